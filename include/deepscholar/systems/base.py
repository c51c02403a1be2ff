"""The one interface every report generator implements, and the registry of system kinds.

A system gets a query (title, abstract, cutoff date) and a search tool that already enforces the
cutoff, and returns a Report: markdown whose numbered in-line citations [n] refer to `sources[n-1]`,
each source carrying the exact snippet the system saw. Adding a kind is adding one file with
`@register_system("kind")`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

from sqlalchemy.engine import Engine

from deepscholar.search.base import SearchTool


@dataclass(frozen=True)
class Query:
    release_id: str
    arxiv_id: str  # version-less
    title: str
    abstract: str
    cutoff: datetime  # the query paper's publication date: nothing on or after it may be used


@dataclass
class Source:
    idx: int  # 1-based: [idx] in the report text
    title: str
    snippet: str
    arxiv_id: str | None = None
    url: str | None = None
    published: datetime | None = None
    # False: a source the system says it retrieved but the report does not list (an external system's
    # paper.csv or ctxs). Stored for the leakage check only; [n] never resolves to it.
    cited: bool = True


@dataclass
class Report:
    text: str
    sources: list[Source]
    trace: dict[str, Any] = field(default_factory=dict)


class SystemFailure(Exception):
    """A system failed to produce a report; stored as status system_error with this message."""


@dataclass
class SystemContext:
    """What a system may use besides the query and search: the warehouse (read-only use) and LLMs."""

    engine: Engine
    llm: Callable[..., Any] | None = None  # factory: llm(model, **kw) -> deepscholar.llm.client.LLMClient


class System:
    """Base class: subclasses set `kind` and implement `generate`."""

    kind: ClassVar[str] = ""
    uses_search: ClassVar[bool] = True

    def __init__(self, name: str, config: dict[str, Any], context: SystemContext):
        self.name = name
        self.config = dict(config)
        self.context = context

    def generate(self, query: Query, search: SearchTool) -> Report:
        raise NotImplementedError


_REGISTRY: dict[str, type[System]] = {}


def register_system(kind: str):
    def decorate(cls: type[System]) -> type[System]:
        if kind in _REGISTRY and _REGISTRY[kind] is not cls:
            raise ValueError(f"system kind {kind!r} registered twice")
        cls.kind = kind
        _REGISTRY[kind] = cls
        return cls

    return decorate


def system_kinds() -> dict[str, type[System]]:
    import deepscholar.systems  # noqa: F401  (imports every built-in kind so it registers)

    return dict(_REGISTRY)


def make_system(name: str, kind: str, config: dict[str, Any], context: SystemContext) -> System:
    kinds = system_kinds()
    if kind not in kinds:
        raise LookupError(f"unknown system kind {kind!r}; known: {', '.join(sorted(kinds))}")
    return kinds[kind](name, config, context)
