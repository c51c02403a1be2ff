"""`local`: BM25 search over the warehouse's `corpus`, the offline, reproducible search backend.

Design notes: docs/MODULE_NOTES.md, `deepscholar.search.local`.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar.clock import assume_utc
from deepscholar.search import bm25_index
from deepscholar.search.base import Backend, SearchResult, warehouse_outages
from deepscholar.text import strip_arxiv_version

__all__ = ["BACKEND", "MAX_K", "LocalSearch"]

MAX_K = 500  # a system asking for more is a bug; bound the query cost

# The warehouse's word on what may be returned: the same predicate whatever the index proposed.
_CONFIRM_SQL = sa.text("""
    SELECT c.arxiv_id, c.title, c.abstract, c.published
    FROM corpus c
    WHERE c.arxiv_id = ANY(:ids)
      AND c.published IS NOT NULL
      AND c.published < :cutoff
      AND NOT (c.arxiv_id = ANY(:exclude))
""")


class LocalSearch:
    """SearchTool over `corpus` bound to one cutoff: BM25-ranked, confirmed by the warehouse.

    `index_dir`: the index cache's folder (default DEEPSCHOLAR_SEARCH_INDEX_DIR, else search-index/ under
    DEEPSCHOLAR_HOME); `check_seconds`: how often this process asks whether `corpus` changed (default
    DEEPSCHOLAR_SEARCH_INDEX_CHECK_SECONDS; 0 before every search).
    """

    name = "local"

    def __init__(self, engine: Engine, cutoff: datetime, *, exclude_ids: Iterable[str] = (),
                 index_dir: str | Path | None = None, check_seconds: float | None = None) -> None:
        self.engine = engine
        self.cutoff = assume_utc(cutoff)
        self.exclude_ids = sorted({strip_arxiv_version(i)[0] for i in exclude_ids if i})
        self.index_dir = Path(index_dir) if index_dir else None
        self.check_seconds = check_seconds
        self.history: list[dict[str, Any]] = []  # one entry per search, for system traces

    def search(self, text: str, k: int = 10) -> list[SearchResult]:
        k = max(0, min(int(k), MAX_K))
        text = (text or "").strip()
        entry: dict[str, Any] = {"text": text, "k": k, "n_hits": 0}
        self.history.append(entry)
        if not k or not text:
            return []
        with warehouse_outages(self.engine, "warehouse search"):
            return self._search(text, k, entry)

    def _check_interval(self) -> float:
        from deepscholar.settings import current_settings

        if self.check_seconds is not None:
            return self.check_seconds
        return current_settings().search_index_check_seconds

    def _index(self, *, now: bool = False) -> bm25_index.Bm25Index:
        root = self.index_dir or bm25_index.default_index_dir()
        return bm25_index.current_index(self.engine, root, 0.0 if now else self._check_interval())

    def _search(self, text: str, k: int, entry: dict[str, Any]) -> list[SearchResult]:
        # The index is asked for with no connection held: finding it may take its lock, whose holder takes a
        # connection (bm25_index.current_index), and a pool's threads all holding one while waiting for that
        # lock deadlocked it (issue 32).
        index = self._index()
        with self.engine.connect() as conn:
            lexemes = bm25_index.query_lexemes(conn, text)
            entry["terms"] = len(lexemes)
            if not lexemes:
                return []
            hits, unconfirmed = self._ranked(conn, index, lexemes, k)
        if (unconfirmed or len(hits) < k) and self._check_interval() > 0:
            # The index proposed papers the corpus no longer has as they were, or found few: it may lag the
            # corpus. Ask now (one fingerprint query) and search again if it did.
            fresh = self._index(now=True)
            if fresh is not index:
                index = fresh
                with self.engine.connect() as conn:
                    hits, unconfirmed = self._ranked(conn, index, lexemes, k)
        entry.update(index=index.fingerprint, n_hits=len(hits), unconfirmed=unconfirmed)
        return hits

    def _ranked(self, conn: sa.Connection, index: bm25_index.Bm25Index, lexemes: list[str], k: int
                ) -> tuple[list[SearchResult], int]:
        """The best k confirmed papers, and how many proposed ones the warehouse did not confirm."""
        m = k
        while True:
            proposed = index.rank(lexemes, self.cutoff, self.exclude_ids, m)
            if not proposed:
                return [], 0
            rows = {r["arxiv_id"]: r for r in conn.execute(_CONFIRM_SQL, {
                "ids": [a for a, _ in proposed], "cutoff": self.cutoff, "exclude": self.exclude_ids,
            }).mappings()}
            hits = [SearchResult(arxiv_id=a, title=rows[a]["title"], abstract=rows[a]["abstract"] or "",
                                 published=rows[a]["published"], url=f"https://arxiv.org/abs/{a}", score=score)
                    for a, score in proposed if a in rows]
            # Fewer confirmed than proposed only when the index lags the corpus: look further down.
            if len(hits) >= k or len(proposed) < m:
                return hits[:k], len(proposed) - len(hits)
            m *= 4


def make_local_search(engine: Engine, cutoff: datetime, exclude_ids: Iterable[str], **kw: Any) -> LocalSearch:
    return LocalSearch(engine, cutoff, exclude_ids=exclude_ids, **kw)


BACKEND = Backend("local", make_local_search,
                  "BM25 over the warehouse corpus, index cached on disk (offline, reproducible)")
