"""`local_tsrank`: the first `local` search, kept under its own name for comparison (bench/search.py).

Design notes: docs/MODULE_NOTES.md, `deepscholar.search.local_tsrank`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar.clock import assume_utc
from deepscholar.search.base import Backend, SearchResult, warehouse_outages
from deepscholar.text import strip_arxiv_version

__all__ = ["BACKEND", "MAX_K", "TsRankSearch", "or_query_text"]

MAX_K = 500  # a system asking for more is a bug; bound the query cost
MAX_OR_TERMS = 64
# ts_rank_cd normalisation 1: divide by 1 + log(document length), so long abstracts do not win on size.
RANK_NORMALISATION = 1

_WORD_RE = re.compile(r"[^\W_]+")

# The AND query (every term, websearch syntax: quotes, `or`, -word) and the OR query share one shape.
_SEARCH_SQL = sa.text("""
    SELECT c.arxiv_id, c.title, c.abstract, c.published,
           ts_rank_cd(c.search_vector, q.query, :norm) AS score
    FROM corpus c, websearch_to_tsquery('english', :text) AS q(query)
    WHERE c.search_vector @@ q.query
      AND c.published IS NOT NULL
      AND c.published < :cutoff
      AND NOT (c.arxiv_id = ANY(:exclude))
    ORDER BY score DESC, c.arxiv_id
    LIMIT :k
""")


def or_query_text(text: str) -> str:
    """The same words joined by websearch `or`: matches papers that share any one of them."""
    words = [w for w in _WORD_RE.findall(text) if w.lower() != "or"]
    return " or ".join(dict.fromkeys(words[:MAX_OR_TERMS]))


class TsRankSearch:
    """SearchTool over `corpus`: AND query first, topped up from an OR query when it finds too little.

    `fallback_below`: run the OR query when the AND query returns fewer hits than this (default: k,
    so a search returns k results whenever the corpus has k papers sharing a word with the text).
    AND hits keep their places ahead of OR hits: matching every term is the stronger signal.
    """

    name = "local_tsrank"

    def __init__(self, engine: Engine, cutoff: datetime, *, exclude_ids: Iterable[str] = (),
                 fallback_below: int | None = None) -> None:
        self.engine = engine
        self.cutoff = assume_utc(cutoff)
        self.exclude_ids = sorted({strip_arxiv_version(i)[0] for i in exclude_ids if i})
        self.fallback_below = fallback_below
        self.history: list[dict[str, Any]] = []  # one entry per search, for system traces

    def search(self, text: str, k: int = 10) -> list[SearchResult]:
        k = max(0, min(int(k), MAX_K))
        text = (text or "").strip()
        entry: dict[str, Any] = {"text": text, "k": k, "n_and": 0, "n_or": 0}
        self.history.append(entry)
        if not k or not _WORD_RE.search(text):
            return []
        with warehouse_outages(self.engine, "warehouse full-text search"):
            return self._search(text, k, entry)

    def _search(self, text: str, k: int, entry: dict[str, Any]) -> list[SearchResult]:
        with self.engine.connect() as conn:
            hits = self._run(conn, text, k)
            entry["n_and"] = len(hits)
            threshold = k if self.fallback_below is None else min(self.fallback_below, k)
            or_text = or_query_text(text)
            if len(hits) < threshold and or_text:
                seen = {h.arxiv_id for h in hits}
                extra = [h for h in self._run(conn, or_text, k + len(hits)) if h.arxiv_id not in seen]
                entry["n_or"] = len(extra)
                hits += extra[:k - len(hits)]
        return hits

    def _run(self, conn: sa.Connection, text: str, k: int) -> list[SearchResult]:
        rows = conn.execute(_SEARCH_SQL, {"text": text, "cutoff": self.cutoff, "exclude": self.exclude_ids,
                                          "k": k, "norm": RANK_NORMALISATION}).mappings().all()
        return [SearchResult(arxiv_id=r["arxiv_id"], title=r["title"], abstract=r["abstract"] or "",
                             published=r["published"], url=f"https://arxiv.org/abs/{r['arxiv_id']}",
                             score=float(r["score"])) for r in rows]


def make_tsrank_search(engine: Engine, cutoff: datetime, exclude_ids: Iterable[str], **kw: Any) -> TsRankSearch:
    return TsRankSearch(engine, cutoff, exclude_ids=exclude_ids, **kw)


BACKEND = Backend("local_tsrank", make_tsrank_search,
                  "the first local search: PostgreSQL ts_rank_cd over every matching corpus row (slow at scale)")
