"""Claims precision (claims track, Prior-art claims): how much of what a report claims about prior work is
right, per work it cites.

Definition: docs/METRICS.md, "`claims_precision`, `claims_recall`, `claims_f1` (the track's ranking metric)".
Design notes: docs/MODULE_NOTES.md, `deepscholar.evaluation.metrics.claims.claims_precision`.
"""

from __future__ import annotations

from deepscholar.evaluation.metrics.claims.base import ClaimsMetric

__all__ = ["ClaimsPrecision", "METRIC"]


class ClaimsPrecision(ClaimsMetric):
    name = "claims_precision"
    position = 1  # column within the dimension
    label = "Claims P"
    quantity = "precision"


METRIC = ClaimsPrecision()
