"""Live arXiv search for systems, through ArxivSource (process-wide ≤ 1 request per delay, backoff).

The cutoff is enforced twice: the query asks arXiv only for papers submitted before the cutoff's
minute (so k results are k usable ones), and every result is checked again here, since the
submittedDate clause is minute-grained and a server may ignore it. Results can be recorded in
`corpus` so a later local search, and the leakage check, know the papers a live search saw.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.engine import Engine

from deepscholar.clock import as_utc
from deepscholar.errors import InfrastructureError
from deepscholar.search.base import Backend, SearchResult
from deepscholar.settings import ARXIV_API_URL
from deepscholar.sources.arxiv import QUERY_STOP_WORDS, ArxivPaper, ArxivSource, is_transient
from deepscholar.text import strip_arxiv_version

__all__ = ["BACKEND", "ArxivSearch", "arxiv_terms"]

MAX_K = 200
MAX_AND_TERMS = 6  # arXiv ANDs every term: past a handful of words almost nothing matches
MAX_OR_TERMS = 16
# Before the first arXiv submission: the lower bound of the submittedDate range.
_EPOCH = "199101010000"
_WORD_RE = re.compile(r"[A-Za-z0-9]+")


def arxiv_terms(text: str) -> list[str]:
    """Significant words of free text, once each, in order; operators and Lucene stop words removed."""
    words = [w.lower() for w in _WORD_RE.findall(text or "")]
    return list(dict.fromkeys(w for w in words if w not in QUERY_STOP_WORDS and w not in {"andnot"} and len(w) > 1))


class ArxivSearch:
    """SearchTool on the arXiv API: all terms first, then any term when that finds fewer than k."""

    name = "arxiv"

    def __init__(self, cutoff: datetime, *, api_url: str = ARXIV_API_URL, delay_seconds: float = 3.0,
                 exclude_ids: Iterable[str] = (), engine: Engine | None = None,
                 date_filter_in_query: bool = True, source: ArxivSource | None = None) -> None:
        self.cutoff = as_utc(cutoff)
        self.exclude_ids = {strip_arxiv_version(i)[0] for i in exclude_ids if i}
        self.engine = engine
        self.date_filter_in_query = date_filter_in_query
        self.source = source or ArxivSource(api_url=api_url, delay_seconds=delay_seconds)
        self.history: list[dict[str, Any]] = []  # one entry per search, for system traces

    def _date_clause(self) -> str:
        # submittedDate bounds are inclusive minutes: the last minute wholly before the cutoff.
        last = (self.cutoff - timedelta(minutes=1)).strftime("%Y%m%d%H%M")
        return f" AND submittedDate:[{_EPOCH} TO {last}]"

    def _query(self, terms: list[str], op: str) -> str:
        q = "(" + f" {op} ".join(f"all:{t}" for t in terms) + ")"
        return q + (self._date_clause() if self.date_filter_in_query else "")

    def _paper_search(self, query: str, k: int) -> list[ArxivPaper]:
        # ArxivSource has no public free-text search; _search_query is its paged, rate-limited,
        # retried relevance search (the one search_title uses).
        try:
            return self.source._search_query(query, k)
        except Exception as exc:
            if is_transient(exc):  # still down after ArxivSource's retries: not the calling system's fault
                raise InfrastructureError(f"arXiv search at {self.source.api_url}", exc) from exc
            raise

    def search(self, text: str, k: int = 10) -> list[SearchResult]:
        k = max(0, min(int(k), MAX_K))
        terms = arxiv_terms(text)
        entry: dict[str, Any] = {"text": text, "k": k, "queries": [], "dropped_after_cutoff": []}
        self.history.append(entry)
        if not k or not terms:
            return []
        fetch = k + len(self.exclude_ids) + (0 if self.date_filter_in_query else k)
        kept: dict[str, ArxivPaper] = {}
        queries = [self._query(terms[:MAX_AND_TERMS], "AND")]
        if len(terms) > 1:
            queries.append(self._query(terms[:MAX_OR_TERMS], "OR"))
        seen: list[ArxivPaper] = []
        for query in queries:
            if len(kept) >= k:
                break
            found = self._paper_search(query, fetch)
            entry["queries"].append({"query": query, "n": len(found)})
            seen += found
            for p in found:
                if p.arxiv_id in kept or p.arxiv_id in self.exclude_ids:
                    continue
                if as_utc(p.published) >= self.cutoff:
                    if p.arxiv_id not in entry["dropped_after_cutoff"]:
                        entry["dropped_after_cutoff"].append(p.arxiv_id)
                    continue
                kept[p.arxiv_id] = p
        self._record(seen)
        return [SearchResult(arxiv_id=p.arxiv_id, title=p.title, abstract=p.abstract, published=p.published,
                             url=f"https://arxiv.org/abs/{p.arxiv_id}")
                for p in list(kept.values())[:k]]

    def _record(self, papers: list[ArxivPaper]) -> None:
        """First write wins: a paper already in the corpus keeps the row the pipeline froze."""
        if self.engine is None or not papers:
            return
        from deepscholar import db

        rows = {p.arxiv_id: {"arxiv_id": p.arxiv_id, "title": p.title, "abstract": p.abstract,
                             "authors": list(p.authors), "published": p.published,
                             "categories": list(p.categories), "doi": p.doi, "source": "search"}
                for p in papers}
        with self.engine.begin() as conn:
            db.upsert(conn, "corpus", list(rows.values()), key=["arxiv_id"], update=[])


def make_arxiv_search(engine: Engine | None, cutoff: datetime, exclude_ids: Iterable[str], **kw: Any) -> ArxivSearch:
    """Endpoint and pacing from the run's settings unless given; papers seen are recorded in `engine`."""
    from deepscholar.settings import current_settings

    if "api_url" not in kw:
        kw["api_url"] = current_settings().arxiv_api_url
    if "delay_seconds" not in kw:
        kw["delay_seconds"] = current_settings().arxiv_delay_seconds
    kw.setdefault("engine", engine)
    return ArxivSearch(cutoff, exclude_ids=exclude_ids, **kw)


BACKEND = Backend("arxiv", make_arxiv_search, "live arXiv API search, cutoff enforced twice")
