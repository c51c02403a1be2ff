"""The one interface every report generator implements, and the registry of system kinds.

A system gets a query (title, abstract, cutoff date) and a search tool that already enforces the
cutoff, and returns a Report: markdown whose numbered in-line citations [n] refer to `sources[n-1]`,
each source carrying the exact snippet the system saw. Adding a kind is adding one file to this package
with a `System` subclass marked `@register_system("kind")` (or declaring `kind = "..."`): the registry
below finds it; nothing else lists kinds. An unknown kind is refused with the known ones listed.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

from sqlalchemy.engine import Engine

from deepscholar.errors import InvalidInput, NotFound
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


# ------------------------------------------------------------------------------ the kind registry
#
# Every module of this package (subpackages included) is imported once, when a kind is first asked
# for; every System subclass defined there with a non-empty `kind` is a kind, so adding one is one file.
# `@register_system("kind")` sets `kind` (and registers a class defined outside the package, e.g. in a
# test); a class attribute `kind = "..."` in a package module does the same.

SYSTEMS_PACKAGE = "deepscholar.systems"
_KIND_RE = re.compile(r"^[a-z][a-z0-9_]{0,62}$")
_registered: dict[str, type[System]] = {}
_lock = threading.RLock()
_discovered = False


def _check(cls: type, kind: object) -> None:
    where = f"system kind {kind!r} ({cls.__module__}.{cls.__qualname__})"
    if not (isinstance(cls, type) and issubclass(cls, System)):
        raise InvalidInput(f"{where}: a system kind is a subclass of deepscholar.systems.base.System")
    if not isinstance(kind, str) or not _KIND_RE.match(kind):
        raise InvalidInput(f"{where}: a kind is lower_snake_case, at most 63 characters")


def _add(cls: type[System]) -> None:
    with _lock:
        current = _registered.get(cls.kind)
        if current is not None and current is not cls:
            raise InvalidInput(f"system kind {cls.kind!r} registered twice: by {current.__module__}."
                               f"{current.__qualname__} and {cls.__module__}.{cls.__qualname__}")
        _registered[cls.kind] = cls


def register_system(kind: str):
    """Class decorator: the class is system kind `kind` (a taken kind is refused)."""

    def decorate(cls: type[System]) -> type[System]:
        _check(cls, kind)
        cls.kind = kind
        _add(cls)
        return cls

    return decorate


def unregister_system(kind: str) -> None:
    with _lock:
        _registered.pop(kind, None)


@contextmanager
def registered_system(cls: type[System]) -> Iterator[type[System]]:
    """`cls` (its `kind` set) is a registered kind inside the block only (tests, trial runs)."""
    register_system(cls.kind)(cls)
    try:
        yield cls
    finally:
        unregister_system(cls.kind)


def _package_modules(package_name: str) -> Iterator[str]:
    """Every module of the package and of its subpackages (names starting with "_" left out)."""
    package = importlib.import_module(package_name)
    for info in pkgutil.iter_modules(package.__path__):
        if info.name.startswith("_"):
            continue
        name = f"{package_name}.{info.name}"
        yield name
        if info.ispkg:
            yield from _package_modules(name)


def _kinds_in(module: Any) -> list[type[System]]:
    """The System subclasses a module defines (not imports) that declare a kind."""
    return [obj for obj in vars(module).values()
            if isinstance(obj, type) and issubclass(obj, System) and obj is not System
            and obj.__module__ == module.__name__ and obj.__dict__.get("kind")]


def _discover() -> None:
    """Import every module of the systems package once and register the kinds they define."""
    global _discovered
    with _lock:
        if _discovered:
            return
        _discovered = True  # before importing: a module may ask for kinds while it loads
        for name in _package_modules(SYSTEMS_PACKAGE):
            for cls in _kinds_in(importlib.import_module(name)):
                _check(cls, cls.kind)
                _add(cls)


def system_kinds() -> dict[str, type[System]]:
    """{kind: class} of every registered kind, by kind."""
    with _lock:
        _discover()
        return dict(sorted(_registered.items()))


def system_kind(kind: str) -> type[System]:
    """The class of `kind`; an unknown kind is refused (NotFound, a LookupError) with the known ones listed."""
    kinds = system_kinds()
    if kind not in kinds:
        raise NotFound(f"unknown system kind {kind!r}; known: {', '.join(kinds)}")
    return kinds[kind]


def make_system(name: str, kind: str, config: dict[str, Any], context: SystemContext) -> System:
    return system_kind(kind)(name, config, context)
