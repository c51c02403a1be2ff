"""Search backends for systems; each is bound to one query's cutoff and excludes the query paper."""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import Engine

from deepscholar.search.base import SearchResult, SearchScope, SearchTool

__all__ = ["BACKENDS", "SearchResult", "SearchScope", "SearchTool", "make_search"]

BACKENDS = ("local", "arxiv")


def make_search(backend: str | None, engine: Engine, query: SearchScope, **kw: Any) -> SearchTool:
    """The search tool for one (system, query) run; `local` unless the system's config says otherwise.

    The arXiv endpoint and pacing come from the run's environment (DEEPSCHOLAR_ARXIV_API_URL,
    DEEPSCHOLAR_ARXIV_DELAY_SECONDS), like the release pipeline's, unless given in `kw`.
    """
    backend = (backend or "local").strip().lower()
    exclude = tuple(kw.pop("exclude_ids", ())) + (query.arxiv_id,)
    if backend == "local":
        from deepscholar.search.local import LocalSearch

        return LocalSearch(engine, query.cutoff, exclude_ids=exclude, **kw)
    if backend == "arxiv":
        from deepscholar.search.arxiv import ArxivSearch
        from deepscholar.sources.endpoints import arxiv_api_url_from_env, arxiv_delay_seconds_from_env

        if "api_url" not in kw:
            kw["api_url"] = arxiv_api_url_from_env()
        if "delay_seconds" not in kw:
            kw["delay_seconds"] = arxiv_delay_seconds_from_env()
        kw.setdefault("engine", engine)
        return ArxivSearch(query.cutoff, exclude_ids=exclude, **kw)
    raise ValueError(f"unknown search backend {backend!r}; known: {', '.join(BACKENDS)}")
