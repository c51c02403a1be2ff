"""What RACE reads per query: the rubric made for it at release time (race/rubrics.py, table race_rubrics).

`RaceCriterion` and `RaceDimension` are the one shape the rubric's builder writes and the five race_*
metrics read; `QUERY_DATA` loads a query's four dimensions with the query (judging/report_contexts.py), and
`rubric_of` is how a metric reads them back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from deepscholar.evaluation.metrics.registry import QueryData

if TYPE_CHECKING:
    from deepscholar.evaluation.metrics.base import QueryInfo

__all__ = ["RaceCriterion", "RaceDimension", "QUERY_DATA", "rubric_of"]

FAMILY = "race"


@dataclass(frozen=True)
class RaceCriterion:
    criterion: str
    explanation: str
    weight: float  # within its dimension; a dimension's weights sum to 1
    raw_weight: float | None = None  # the judge's own weight before re-normalising; None where not kept


@dataclass(frozen=True)
class RaceDimension:
    """One of RACE's four dimensions for one query, made at release time."""

    name: str  # comprehensiveness | insight | instruction_following | readability
    weight: float  # the four sum to 1
    criteria: tuple[RaceCriterion, ...]


def _rubric(rows: Sequence[Mapping[str, Any]]) -> tuple[RaceDimension, ...]:
    return tuple(RaceDimension(d["dimension"], d["weight"], tuple(
        RaceCriterion(c["criterion"], c["explanation"], c["weight"]) for c in d["criteria"])) for d in rows)


QUERY_DATA = QueryData(
    sql="SELECT arxiv_id, dimension, weight, criteria FROM race_rubrics WHERE {where} ORDER BY arxiv_id, dimension",
    build=_rubric)


def rubric_of(query: QueryInfo) -> tuple[RaceDimension, ...]:
    """The query's rubric; empty until the release has RACE's artefacts (`deepscholar release enrich`)."""
    return query.family_data.get(FAMILY, ())
