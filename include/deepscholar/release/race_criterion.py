"""One criterion of a RACE rubric: `RaceCriterion`, the one type the rubric's builder and the RACE metric share.

release/race_rubrics.py makes criteria at release time (with the judge's own weight kept as `raw_weight`)
and evaluation/metrics/base.py's `RaceDimension` carries them to the metric. It sits in release, below evaluation,
in a module of its own so evaluation/metrics/base.py can use it without importing the rubric builder (the LLM
client, GX) and no package imports the other back.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RaceCriterion"]


@dataclass(frozen=True)
class RaceCriterion:
    criterion: str
    explanation: str
    weight: float  # within its dimension; a dimension's weights sum to 1
    raw_weight: float | None = None  # the judge's own weight before re-normalising; None where not kept
