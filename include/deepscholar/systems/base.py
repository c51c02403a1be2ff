"""The one interface every report generator implements, and the registry of system kinds.

A system gets a query (title, abstract, cutoff date) and a search tool that already enforces the
cutoff, and returns a Report: markdown whose numbered in-line citations [n] refer to `sources[n-1]`,
each source carrying the exact snippet the system saw. Adding a kind is adding one file to this package
with a `System` subclass marked `@register_system("kind")` (or declaring `kind = "..."`): the registry
below finds it; nothing else lists kinds. An unknown kind is refused with the known ones listed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

from sqlalchemy.engine import Engine

from deepscholar.errors import InvalidInput, NotFound
from deepscholar.prompts import Prompt
from deepscholar.registry import Registry
from deepscholar.search.base import SearchTool
from deepscholar.systems.build import RUN_KEYS, SystemBuild, search_backend


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
    # Base URLs the system's `api_base` must lie under when it runs: for a system registered from the page,
    # DEEPSCHOLAR_WEB_API_BASES as it stands then (systems.registered_from); None: the operator's, unbound.
    api_bases: tuple[str, ...] | None = None


class System:
    """Base class: subclasses set `kind` and implement `generate`.

    A kind states what defines its output, so every report records the build that wrote it
    (`effective_version`, systems/build.py): `version`, `defaults`, `load_prompts` and `models`.
    """

    kind: ClassVar[str] = ""
    uses_search: ClassVar[bool] = True
    # Whether the kind writes from a language model's training, which may include a month's papers: then its
    # registration's knowledge cutoff decides on which months it is ranked (docs/ARCHITECTURE.md).
    uses_model_knowledge: ClassVar[bool] = True
    # The kind's code version. Bump it (to "2", ...) with any code change that makes the kind write
    # something else for the same config, prompts and model (a new step, a changed parse or ordering);
    # not for a refactoring, a fix of a crash, or a change of how it runs (retries, concurrency). Prompt
    # files and defaults need no bump: their versions and values are part of the build themselves.
    version: ClassVar[str] = "1"
    # The values the kind uses for config keys the registered config leaves out (part of the build).
    defaults: ClassVar[Mapping[str, Any]] = {}
    # Every config key the kind reads, and what its value must be (systems/config_schema.py); registration
    # refuses any other key. None: not declared (only the checks every config gets).
    config_schema: ClassVar[Mapping[str, Any] | None] = None

    def __init__(self, name: str, config: dict[str, Any], context: SystemContext):
        self.name = name
        self.config = dict(config)
        self.context = context

    def generate(self, query: Query, search: SearchTool) -> Report:
        raise NotImplementedError

    @classmethod
    def load_prompts(cls) -> dict[str, Prompt]:
        """{role: prompt} of every prompt file the kind uses; the instance uses these same prompts."""
        return {}

    @classmethod
    def models(cls, config: Mapping[str, Any]) -> tuple[str, ...]:
        """The models the kind calls with this config: by default the config's litellm `model`."""
        model = config.get("model")
        return (str(model),) if model else ()

    @classmethod
    def output_config(cls, config: Mapping[str, Any]) -> dict[str, Any]:
        """What defines the output: the defaults overlaid with the config, less how it runs (RUN_KEYS)."""
        return {k: v for k, v in {**cls.defaults, **config}.items() if k not in RUN_KEYS}

    @classmethod
    def effective_version(cls, registered_version: str, config: Mapping[str, Any],
                          endpoint_revision: int = 0) -> SystemBuild:
        """The build of a system of this kind registered with `registered_version` and `config`, moved
        `endpoint_revision` times since (systems.endpoint_revision)."""
        return SystemBuild(kind=cls.kind, version=str(registered_version), code=cls.version,
                           prompts={role: p.version for role, p in cls.load_prompts().items()},
                           models=cls.models(config), config=cls.output_config(config),
                           search=search_backend(config) if cls.uses_search else None,
                           endpoint_revision=int(endpoint_revision or 0))

    @classmethod
    def build_of(cls, system_row: Mapping[str, Any]) -> SystemBuild:
        """The build a registered system (its `systems` row) writes with now: the one place that reads the
        row's version, config and endpoint revision for it."""
        return cls.effective_version(system_row["version"], system_row["config"] or {},
                                     system_row.get("endpoint_revision", 0))


# ------------------------------------------------------------------------------ the kind registry
#
# Every module of this package (subpackages included) is imported once, when a kind is first asked
# for; every System subclass defined there with a non-empty `kind` is a kind, so adding one is one file.
# `@register_system("kind")` sets `kind` (and registers a class defined outside the package, e.g. in a
# test); a class attribute `kind = "..."` in a package module does the same.

SYSTEMS_PACKAGE = "deepscholar.systems"
_KIND_RE = re.compile(r"^[a-z][a-z0-9_]{0,62}$")


def _check(cls: type) -> None:
    kind = getattr(cls, "kind", None)
    where = f"system kind {kind!r} ({getattr(cls, '__module__', '?')}.{getattr(cls, '__qualname__', cls)})"
    if not (isinstance(cls, type) and issubclass(cls, System)):
        raise InvalidInput(f"{where}: a system kind is a subclass of deepscholar.systems.base.System")
    if not isinstance(kind, str) or not _KIND_RE.match(kind):
        raise InvalidInput(f"{where}: a kind is lower_snake_case, at most 63 characters")


def _kinds_in(module: Any) -> list[type[System]]:
    """The System subclasses a module defines (not imports) that declare a kind."""
    return [obj for obj in vars(module).values()
            if isinstance(obj, type) and issubclass(obj, System) and obj is not System
            and obj.__module__ == module.__name__ and obj.__dict__.get("kind")]


_KINDS: Registry[type[System]] = Registry(
    "system kind", SYSTEMS_PACKAGE, "", _check, name=lambda cls: cls.kind, collect=_kinds_in, recursive=True,
    unknown_error=NotFound)


def register_system(kind: str):
    """Class decorator: the class is system kind `kind` (a taken kind is refused)."""

    def decorate(cls: type[System]) -> type[System]:
        if isinstance(cls, type):
            cls.kind = kind
        _check(cls)
        # A module of the package declaring itself while it is imported must not start discovery (which
        # imports the package); anything else is checked against every kind first.
        inside = getattr(cls, "__module__", "").startswith(SYSTEMS_PACKAGE + ".")
        (_KINDS.add if inside else _KINDS.register)(cls)
        return cls

    return decorate


@contextmanager
def registered_system(cls: type[System]) -> Iterator[type[System]]:
    """`cls` (its `kind` set) is a registered kind inside the block only (tests, trial runs)."""
    with _KINDS.registered(cls):
        yield cls


def system_kinds() -> dict[str, type[System]]:
    """{kind: class} of every registered kind, by kind."""
    return {cls.kind: cls for cls in _KINDS.items()}


def system_kind(kind: str) -> type[System]:
    """The class of `kind`; an unknown kind is refused (NotFound, a LookupError) with the known ones listed."""
    return _KINDS.get(kind)


def make_system(name: str, kind: str, config: dict[str, Any], context: SystemContext) -> System:
    return system_kind(kind)(name, config, context)
