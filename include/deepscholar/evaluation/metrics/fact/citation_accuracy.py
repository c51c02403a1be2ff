"""Citation accuracy (FACT track, Citations): the share of a report's checkable citation pairs whose
cited source supports the statement.

accuracy = supported / (supported + unsupported), over the report's unique (statement, cited source)
pairs as metrics/fact/base.py reads and judges them (one call per cited source). Pairs whose source has no
text are "unknown": left out of the denominator and counted in the details. A report without citation
pairs scores 0, as FACT has it (details: no_citation_pairs); a report whose every pair is unknown is
unscored (nothing could be checked). A source the judge could not answer leaves the report unscored.
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
