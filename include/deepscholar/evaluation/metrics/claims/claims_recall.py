"""Claims recall (claims track, Prior-art claims): how much of the prior art the exemplar's authors
describe a report finds and connects rightly.

Definition: docs/METRICS.md, "`claims_precision`, `claims_recall`, `claims_f1` (the track's ranking metric)".
Design notes: docs/MODULE_NOTES.md, `deepscholar.evaluation.metrics.claims.claims_recall`.
"""

from __future__ import annotations

from deepscholar.evaluation.metrics.claims.base import ClaimsMetric

__all__ = ["ClaimsRecall", "METRIC"]


class ClaimsRecall(ClaimsMetric):
    name = "claims_recall"
    position = 2  # column within the dimension
    label = "Claims R"
    quantity = "recall"
    calls_per_report = 0.1  # answered by claims_precision's request (cache or single flight) in the same task


METRIC = ClaimsRecall()
