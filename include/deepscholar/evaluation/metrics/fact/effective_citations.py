"""Effective citations (FACT track, Citations): how many of a report's unique citation pairs are supported.

Definition: docs/METRICS.md, "`effective_citations`".
Design notes: docs/MODULE_NOTES.md, `deepscholar.evaluation.metrics.fact.effective_citations`.
"""

from __future__ import annotations

from deepscholar.evaluation.metrics.fact.base import SUPPORTED, FactMetric

__all__ = ["EffectiveCitations", "METRIC"]


class EffectiveCitations(FactMetric):
    name = "effective_citations"
    position = 2  # column within the dimension
    label = "Eff cites"
    bounded = False  # a count

    def value(self, counts: dict) -> float:
        return float(counts[SUPPORTED])


METRIC = EffectiveCitations()
