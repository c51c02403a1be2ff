"""Search backends for systems; each is bound to one query's cutoff and excludes the query paper.

One module per backend exports `BACKEND` (search/base.py); `registry` finds them, so adding a backend
is one file in this package and nothing else.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import Engine

from deepscholar.search import registry
from deepscholar.search.base import Backend, SearchResult, SearchScope, SearchTool
from deepscholar.search.registry import backend_names

__all__ = ["Backend", "SearchResult", "SearchScope", "SearchTool", "backend_names", "make_search"]


def make_search(backend: str | None, engine: Engine, query: SearchScope, **kw: Any) -> SearchTool:
    """The search tool for one (system, query) run; `local` unless the system's config says otherwise.

    An unknown backend is refused (InvalidInput) with the known ones listed. The arXiv endpoint and
    pacing come from the run's environment (DEEPSCHOLAR_ARXIV_API_URL, DEEPSCHOLAR_ARXIV_DELAY_SECONDS),
    like the release pipeline's, unless given in `kw`.
    """
    name = (backend or registry.DEFAULT).strip().lower()
    exclude = tuple(kw.pop("exclude_ids", ())) + (query.arxiv_id,)
    return registry.get(name).make(engine, query.cutoff, exclude, **kw)
