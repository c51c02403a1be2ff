"""What a search backend returns and promises: the types systems program against.

Systems import these from here; search never imports systems (a backend needs only the query paper's
id and cutoff, `SearchScope`, which a system's Query satisfies).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

__all__ = ["SearchResult", "SearchScope", "SearchTool"]


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
