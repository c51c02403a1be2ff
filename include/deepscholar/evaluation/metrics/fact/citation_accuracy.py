"""Citation accuracy (FACT track, Citations): the share of a report's checkable citation pairs whose
cited source supports the statement.

Definition: docs/METRICS.md, "`citation_accuracy` (the track's ranking metric)".
Design notes: docs/MODULE_NOTES.md, `deepscholar.evaluation.metrics.fact.citation_accuracy`.
"""

from __future__ import annotations

from deepscholar.evaluation.metrics.fact.base import SUPPORTED, UNSUPPORTED, FactMetric

__all__ = ["CitationAccuracy", "METRIC"]


class CitationAccuracy(FactMetric):
    name = "citation_accuracy"
    position = 1  # column within the dimension
    label = "Cite acc"

    def value(self, counts: dict) -> float:
        return counts[SUPPORTED] / (counts[SUPPORTED] + counts[UNSUPPORTED])


METRIC = CitationAccuracy()
