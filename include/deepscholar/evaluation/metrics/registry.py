"""The metric registry: what a metric is called, where it sits and how it is shown, declared once.

Design notes: docs/MODULE_NOTES.md, `deepscholar.evaluation.metrics.registry`.
"""

from __future__ import annotations

import importlib
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from deepscholar import family_packages
from deepscholar.errors import InvalidInput
from deepscholar.registry import Registry, last_change, note_change

if TYPE_CHECKING:
    from deepscholar.evaluation.metrics.base import Metric

__all__ = [
    "CORE",
    "Family",
    "Dimension",
    "QueryData",
    "families",
    "dimension_declarations",
    "query_data",
    "added_family",
    "register",
    "unregister",
    "registered_family",
    "tracks",
    "family_of",
    "family_order",
    "family_label",
    "ranking_metric",
    "is_bounded",
    "judged_metric_names",
    "registered",
    "get",
    "metrics",
    "metric_names",
    "annotatable_metric_names",
    "dimensions",
    "dimension_of",
    "headline_variant",
    "metric_label",
    "dimension_label",
]

METRICS_PACKAGE = family_packages.LIBRARY_FAMILIES
_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,62}$")  # also a SQL column name in the wide views


@dataclass(frozen=True)
class Family:
    name: str
    label: str
    position: int
    # The metric a track's board ranks by (its headline ranking); None for the core family, which ranks by
    # the geometric mean of its metrics' means.
    ranking_metric: str | None = None


@dataclass(frozen=True)
class Dimension:
    name: str
    label: str
    family: str
    position: int  # within the family, left to right


CORE = "core"  # DeepScholar-Bench's seven: the family of the board and its geometric mean


@dataclass(frozen=True)
class QueryData:
    """Per-query release data a family's metrics read (a track's release-time artefacts), loaded with each
    query by judging/report_contexts.py: `sql` selects `arxiv_id` and the rest from the family's table
    `WHERE {where}` (the loader fills in the release and the queries); `build` turns one query's rows, in
    the statement's order, into what the metrics read as `QueryInfo.family_data[<family>]`."""

    sql: str
    build: Callable[[Sequence[Any]], Any]  # (one query's rows, mappings by column) -> what its metrics read


_FAMILIES: dict[str, Family] = {}
_DIMENSIONS: dict[str, Dimension] = {}
_QUERY_DATA: dict[str, QueryData] = {}
_families_found = False
_lock = threading.RLock()


def _declare(family: Family, dimensions: Sequence[Dimension], query_data: QueryData | None, where: str) -> None:
    if not isinstance(family, Family) or not _NAME_RE.match(family.name):
        raise InvalidInput(f"{where}: FAMILY must be a registry.Family with a lower_snake_case name")
    if not dimensions or not all(isinstance(d, Dimension) for d in dimensions):
        raise InvalidInput(f"{where}: DIMENSIONS must be one or more registry.Dimension")
    if query_data is not None and not isinstance(query_data, QueryData):
        raise InvalidInput(f"{where}: QUERY_DATA must be a registry.QueryData")
    if family.name in _FAMILIES or any(d.name in _DIMENSIONS for d in dimensions):
        raise InvalidInput(f"{where}: family {family.name!r} or one of its dimensions is already declared")
    if any(d.family != family.name for d in dimensions):
        raise InvalidInput(f"{where}: every dimension of family {family.name!r} must name it as its family")
    _FAMILIES[family.name] = family
    _DIMENSIONS.update({d.name: d for d in dimensions})
    note_change()  # metrics sort by their family's and dimension's positions
    if query_data is not None:
        _QUERY_DATA[family.name] = query_data


def _declared_by(module: Any) -> tuple[Any, tuple[Any, ...], Any]:
    """A family package's (FAMILY, DIMENSIONS, QUERY_DATA), as declared; `_declare` judges them."""
    return (getattr(module, "FAMILY", None), tuple(getattr(module, "DIMENSIONS", None) or ()),
            getattr(module, "QUERY_DATA", None))


def _forget(family: Family, dimensions: Sequence[Dimension]) -> None:
    for d in dimensions:
        _DIMENSIONS.pop(d.name, None)
    _FAMILIES.pop(family.name, None)
    _QUERY_DATA.pop(family.name, None)
    note_change()


def _find_families() -> None:
    """Declare every family package's family once per process (family_packages.py says which)."""
    global _families_found
    with _lock:
        if _families_found:
            return
        _families_found = True  # before importing: a family's modules may ask the registry while they load
        for package in family_packages.family_packages():
            module = importlib.import_module(package)
            _declare(*_declared_by(module), package)
            if not package.startswith(METRICS_PACKAGE + "."):  # a plugin's: its metrics are not under ours
                for _, metric in family_packages.declarations("METRIC", [package]):
                    _METRICS.add(metric)  # type: ignore[arg-type]


def families() -> dict[str, Family]:
    """Every declared family by name (the core and the tracks), found on first use."""
    _find_families()
    return _FAMILIES


def dimension_declarations() -> dict[str, Dimension]:
    """Every declared dimension by name, found on first use."""
    _find_families()
    return _DIMENSIONS


def query_data() -> dict[str, QueryData]:
    """Family name -> the per-query data its metrics read, for the families that declare some."""
    _find_families()
    return _QUERY_DATA


def _check(metric: Metric) -> None:
    name = getattr(metric, "name", None)
    where = f"metric {name!r} ({type(metric).__module__}.{type(metric).__qualname__})"
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise InvalidInput(f"{where}: a metric name is lower_snake_case, at most 63 characters")
    if getattr(metric, "dimension", None) not in dimension_declarations():
        raise InvalidInput(f"{where}: unknown dimension {getattr(metric, 'dimension', None)!r}; "
                           f"known: {', '.join(dimension_declarations())}")
    variants = tuple(getattr(metric, "variants", ()) or ())
    if getattr(metric, "headline", None) not in variants:
        raise InvalidInput(f"{where}: headline {getattr(metric, 'headline', None)!r} is not one of its "
                           f"variants {variants}")
    if not isinstance(getattr(metric, "position", None), int):
        raise InvalidInput(f"{where}: `position` (its column within the dimension) must be an int")
    if not str(getattr(metric, "label", "") or "").strip():
        raise InvalidInput(f"{where}: `label` (the column heading) must not be empty")


def _order_key(metric: Metric) -> tuple:
    dim = dimension_declarations()[metric.dimension]
    return (families()[dim.family].position, dim.position, metric.position, metric.name)


_METRICS: Registry[Metric] = Registry("metric", METRICS_PACKAGE, "METRIC", _check, _order_key, recursive=True)
register = _METRICS.register
unregister = _METRICS.unregister
registered = _METRICS.registered
get = _METRICS.get


def metrics(family: str | None = None) -> list[Metric]:
    """Registered metrics in leaderboard order (family, dimension, position), optionally of one family."""
    found = _METRICS.items()
    return found if family is None else [m for m in found if dimension_declarations()[m.dimension].family == family]


_NAMES: dict[str | None, tuple[int, tuple[str, ...]]] = {}  # family -> (registry change, its metric names)


def metric_names(family: str | None = None) -> tuple[str, ...]:
    """The metrics' names in leaderboard order (kept until a registration changes the registry: a page asks
    hundreds of times)."""
    change = last_change()
    kept = _NAMES.get(family)
    if kept is not None and kept[0] == change:
        return kept[1]
    names = tuple(m.name for m in metrics(family))
    _NAMES[family] = (change, names)
    return names


def annotatable_metric_names() -> list[str]:
    """Every registered metric (core and tracks) a person can validate (base.annotatable), in registry order:
    what judge validation samples and the drift check re-asks."""
    from deepscholar.evaluation.metrics.base import annotatable

    return [m.name for m in metrics() if annotatable(m)]


def dimensions(family: str | None = None) -> dict[str, tuple[str, ...]]:
    """{dimension: its metric names}, both in leaderboard order; dimensions without metrics left out."""
    out: dict[str, list[str]] = {}
    for m in metrics(family):
        out.setdefault(m.dimension, []).append(m.name)
    return {d: tuple(ms) for d, ms in out.items()}


def tracks() -> tuple[str, ...]:
    """The evaluation tracks: every family but the core, in their order."""
    return tuple(f.name for f in sorted(families().values(), key=lambda f: (f.position, f.name)) if f.name != CORE)


def family_of(name: str) -> str:
    """The family a registered metric belongs to (through its dimension)."""
    return dimension_declarations()[get(name).dimension].family


def family_order(family: str) -> tuple:
    """Sort key of a family name: its position, then its name (an undeclared one sorts last)."""
    found = families().get(family)
    return (found.position if found else 1 << 30, family)


def family_label(family: str) -> str:
    found = families().get(family)
    return found.label if found is not None else family


def ranking_metric(family: str) -> str | None:
    """The metric a family's board ranks by: None for the core (its geometric mean); for a track its
    declared ranking metric, else its first metric in board order. Refused when it is not one of the
    family's registered metrics, naming them."""
    if family == CORE:
        return None
    if family not in families():
        raise InvalidInput(f"unknown evaluation track {family!r}; known: {', '.join(tracks()) or 'none'}")
    names = metric_names(family)
    declared = families()[family].ranking_metric
    if declared is None and names:
        return names[0]
    if declared not in names:
        raise InvalidInput(f"track {family!r} ranks by {declared!r}, which is not one of its registered "
                           f"metrics ({', '.join(names) or 'none'})")
    return declared


def is_bounded(name: str) -> bool:
    """Does the metric score in [0, 1]? A count (e.g. FACT's effective citations) declares bounded = False;
    its interval is not clipped to [0, 1] nor its mean checked against that range, and it never enters a
    geometric mean."""
    found = _METRICS.find(name)
    return bool(getattr(found, "bounded", True)) if found is not None else True


def judged_metric_names(enabled_tracks: Sequence[str] = ()) -> tuple[str, ...]:
    """What an evaluation judges unless told which metrics: the core family's metrics and those of the
    enabled tracks (DEEPSCHOLAR_TRACKS), in leaderboard order. An unknown track is refused, naming the known."""
    unknown = sorted(set(enabled_tracks) - set(tracks()))
    if unknown:
        raise InvalidInput(f"unknown evaluation tracks: {', '.join(unknown)}; known: {', '.join(tracks()) or 'none'}")
    wanted = {CORE, *enabled_tracks}
    return tuple(m.name for m in metrics() if dimension_declarations()[m.dimension].family in wanted)


@contextmanager
def registered_family(family: Family, dimensions: Sequence[Dimension],
                      query_data: QueryData | None = None) -> Iterator[Family]:
    """Declare a family and its dimensions for the duration of a block (a test's, a plugin's trial)."""
    with _lock:
        _find_families()
        _declare(family, dimensions, query_data, f"family {family.name!r}")
    try:
        yield family
    finally:
        with _lock:
            _forget(family, dimensions)


@contextmanager
def added_family(package: str) -> Iterator[Family]:
    """A whole family package (laid out like evaluation/metrics/<family>/) inside the block: its family,
    dimensions, per-query data and metrics here, and its release-time artefacts for the release
    (family_packages.added). What a plugin's track does through DEEPSCHOLAR_FAMILY_PACKAGES, for a while."""
    family_declared, dimensions, query_data_declared = _declared_by(importlib.import_module(package))
    with registered_family(family_declared, dimensions, query_data_declared) as family, \
            family_packages.added(package):
        found = [metric for _, metric in family_packages.declarations("METRIC", [package])]
        names = [_METRICS.register(metric).name for metric in found]  # type: ignore[arg-type]  # checked there
        try:
            yield family
        finally:
            for name in names:
                _METRICS.unregister(name)


def dimension_of(name: str) -> str:
    return get(name).dimension


def headline_variant(name: str) -> str:
    return get(name).headline


def metric_label(name: str) -> str:
    """The column heading (Table 2's names for the core seven); an unregistered name shows as itself."""
    metric = _METRICS.find(name)
    return metric.label if metric is not None else name


def dimension_label(name: str) -> str:
    dim = dimension_declarations().get(name)
    return dim.label if dim is not None else name
