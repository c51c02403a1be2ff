"""The metric registry: what a metric is called, where it sits and how it is shown, declared once.

Every metric module in `deepscholar.evaluation.metrics` exports `METRIC`, an object that declares its
`name`, `dimension`, `position` (its column within the dimension), `label` (the leaderboard's column
heading), `headline` and `variants`; the registry finds those modules itself, so adding a metric is one
file there (plus its prompt files). Everything that lists metrics — the runner, the roll-up, the CLI
table, the page, the JSON, the SQL views, the bench, the GX checks — asks this module, in this order.

Dimensions group metrics into the leaderboard's column groups; families group dimensions. The family
`core` (CORE) is DeepScholar-Bench's seven: the board, its geometric mean, the wide SQL views and the page's
main table are the core family's, whatever else is registered. Every other family is an evaluation track
(a family of its own dimensions and metrics, judged only when enabled: `judged_metric_names`), so adding a
track never moves a core number. A metric outside the library (a test's, a plugin's) joins with
`register()` or, for a while, `registered()`; a family with `registered_family()`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from deepscholar.errors import InvalidInput
from deepscholar.registry import Registry

if TYPE_CHECKING:
    from deepscholar.evaluation.metrics.base import Metric

__all__ = [
    "CORE",
    "Family",
    "Dimension",
    "FAMILIES",
    "DIMENSIONS",
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
    "dimensions",
    "dimension_of",
    "headline_variant",
    "metric_label",
    "dimension_label",
]

METRICS_PACKAGE = "deepscholar.evaluation.metrics"
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
FAMILIES: dict[str, Family] = {
    CORE: Family(CORE, "DeepScholar-Bench", 1),
    "race": Family("race", "RACE", 2, ranking_metric="race_overall"),
    "fact": Family("fact", "FACT", 3, ranking_metric="citation_accuracy"),
    "reportbench": Family("reportbench", "ReportBench", 4, ranking_metric="reference_recall"),
    "claims": Family("claims", "Claims", 5, ranking_metric="claims_f1"),
}
# The paper's three dimensions, in Table 2's order.
DIMENSIONS: dict[str, Dimension] = {
    d.name: d for d in (
        Dimension("knowledge_synthesis", "Knowledge synthesis", "core", 1),
        Dimension("retrieval_quality", "Retrieval quality", "core", 2),
        Dimension("verifiability", "Verifiability", "core", 3),
        # The tracks' dimensions (docs/METRICS.md "Tracks").
        Dimension("reference_relative_quality", "Quality vs the human section", "race", 1),
        Dimension("citations", "Citations", "fact", 1),
        Dimension("bibliography", "Bibliography", "reportbench", 1),
        Dimension("faithfulness", "Faithfulness", "reportbench", 2),
        Dimension("prior_art_claims", "Prior-art claims", "claims", 1),
    )
}

def _check(metric: Metric) -> None:
    name = getattr(metric, "name", None)
    where = f"metric {name!r} ({type(metric).__module__}.{type(metric).__qualname__})"
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise InvalidInput(f"{where}: a metric name is lower_snake_case, at most 63 characters")
    if getattr(metric, "dimension", None) not in DIMENSIONS:
        raise InvalidInput(f"{where}: unknown dimension {getattr(metric, 'dimension', None)!r}; "
                           f"known: {', '.join(DIMENSIONS)}")
    variants = tuple(getattr(metric, "variants", ()) or ())
    if getattr(metric, "headline", None) not in variants:
        raise InvalidInput(f"{where}: headline {getattr(metric, 'headline', None)!r} is not one of its "
                           f"variants {variants}")
    if not isinstance(getattr(metric, "position", None), int):
        raise InvalidInput(f"{where}: `position` (its column within the dimension) must be an int")
    if not str(getattr(metric, "label", "") or "").strip():
        raise InvalidInput(f"{where}: `label` (the column heading) must not be empty")


def _order_key(metric: Metric) -> tuple:
    dim = DIMENSIONS[metric.dimension]
    return (FAMILIES[dim.family].position, dim.position, metric.position, metric.name)


_METRICS: Registry[Metric] = Registry("metric", METRICS_PACKAGE, "METRIC", _check, _order_key)
register = _METRICS.register
unregister = _METRICS.unregister
registered = _METRICS.registered
get = _METRICS.get


def metrics(family: str | None = None) -> list[Metric]:
    """Registered metrics in leaderboard order (family, dimension, position), optionally of one family."""
    found = _METRICS.items()
    return found if family is None else [m for m in found if DIMENSIONS[m.dimension].family == family]


def metric_names(family: str | None = None) -> tuple[str, ...]:
    return tuple(m.name for m in metrics(family))


def dimensions(family: str | None = None) -> dict[str, tuple[str, ...]]:
    """{dimension: its metric names}, both in leaderboard order; dimensions without metrics left out."""
    out: dict[str, list[str]] = {}
    for m in metrics(family):
        out.setdefault(m.dimension, []).append(m.name)
    return {d: tuple(ms) for d, ms in out.items()}


def tracks() -> tuple[str, ...]:
    """The evaluation tracks: every family but the core, in their order."""
    return tuple(f.name for f in sorted(FAMILIES.values(), key=lambda f: (f.position, f.name)) if f.name != CORE)


def family_of(name: str) -> str:
    """The family a registered metric belongs to (through its dimension)."""
    return DIMENSIONS[get(name).dimension].family


def family_order(family: str) -> tuple:
    """Sort key of a family name: its position, then its name (an undeclared one sorts last)."""
    found = FAMILIES.get(family)
    return (found.position if found else 1 << 30, family)


def family_label(family: str) -> str:
    found = FAMILIES.get(family)
    return found.label if found is not None else family


def ranking_metric(family: str) -> str | None:
    """The metric a family's board ranks by: None for the core (its geometric mean); for a track its
    declared ranking metric, else its first metric in board order. Refused when it is not one of the
    family's registered metrics, naming them."""
    if family == CORE:
        return None
    if family not in FAMILIES:
        raise InvalidInput(f"unknown evaluation track {family!r}; known: {', '.join(tracks()) or 'none'}")
    names = metric_names(family)
    declared = FAMILIES[family].ranking_metric
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
    return tuple(m.name for m in metrics() if DIMENSIONS[m.dimension].family in wanted)


@contextmanager
def registered_family(family: Family, dimensions: Sequence[Dimension]) -> Iterator[Family]:
    """Declare a family and its dimensions for the duration of a block (a test's, a plugin's trial)."""
    if family.name in FAMILIES or any(d.name in DIMENSIONS for d in dimensions):
        raise InvalidInput(f"family {family.name!r} or one of its dimensions is already declared")
    if any(d.family != family.name for d in dimensions):
        raise InvalidInput(f"every dimension of family {family.name!r} must name it as its family")
    FAMILIES[family.name] = family
    DIMENSIONS.update({d.name: d for d in dimensions})
    try:
        yield family
    finally:
        for d in dimensions:
            DIMENSIONS.pop(d.name, None)
        FAMILIES.pop(family.name, None)


def dimension_of(name: str) -> str:
    return get(name).dimension


def headline_variant(name: str) -> str:
    return get(name).headline


def metric_label(name: str) -> str:
    """The column heading (Table 2's names for the core seven); an unregistered name shows as itself."""
    metric = _METRICS.find(name)
    return metric.label if metric is not None else name


def dimension_label(name: str) -> str:
    dim = DIMENSIONS.get(name)
    return dim.label if dim is not None else name
