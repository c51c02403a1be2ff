"""What a search backend returns and promises: the types systems program against.

Systems import these from here; search never imports systems (a backend needs only the query paper's
id and cutoff, `SearchScope`, which a system's Query satisfies).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

__all__ = ["Backend", "SearchResult", "SearchScope", "SearchTool", "warehouse_outages"]


@dataclass(frozen=True)
class SearchResult:
    arxiv_id: str | None
    title: str
    abstract: str
    published: datetime | None
    url: str | None = None
    score: float | None = None


class SearchTool(Protocol):
    """A search backend bound to one query's cutoff."""

    name: str
    cutoff: datetime

    def search(self, text: str, k: int = 10) -> list[SearchResult]: ...


class SearchScope(Protocol):
    """What binds a backend to one query: the query paper (excluded) and its cutoff."""

    @property
    def arxiv_id(self) -> str: ...

    @property
    def cutoff(self) -> datetime: ...


@dataclass(frozen=True)
class Backend:
    """One search backend, declared once by its module as `BACKEND` (found by search/registry.py).

    `make(engine, cutoff, exclude_ids, **kw)` returns the SearchTool for one (system, query) run: bound
    to the cutoff, never returning an excluded paper (the query paper is always among them); `kw` are
    the backend's own options.
    """

    name: str
    make: Callable[..., SearchTool]
    description: str = ""


@contextmanager
def warehouse_outages(engine, what: str) -> Iterator[None]:
    """A search over the warehouse that cannot reach it is an outage (InfrastructureError, retried by the
    caller's task), not the system's failure; any other error passes through."""
    from deepscholar.errors import InfrastructureError, is_warehouse_outage

    try:
        yield
    except Exception as exc:
        if is_warehouse_outage(exc):
            raise InfrastructureError(f"{what} at {engine.url.host or 'local socket'}", exc) from exc
        raise
