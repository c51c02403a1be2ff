"""Effective citations (FACT track, Citations): how many of a report's unique citation pairs are supported.

effective = the number of supported unique (statement, cited source) pairs, as metrics/fact/base.py reads and
judges them: an absolute count, not a share (`bounded = False`: the board neither clips its interval to
[0, 1] nor checks it against that range). It asks exactly citation_accuracy's questions, so judged with
it, it costs no request of its own. A report without citation pairs scores 0 (details:
no_citation_pairs); a report whose every pair is unknown (no cited source has text) is unscored, as for
the accuracy: 0 would blame the report for text we lack. Unknown pairs are never counted as supported,
so missing source text can only lower the count. A source the judge could not answer leaves the report
unscored.
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
