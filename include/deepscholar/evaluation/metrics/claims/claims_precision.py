"""Claims precision (claims track, Prior-art claims): how much of what a report claims about prior work is
right, per work it cites.

precision = sum of the per-claim scores / #predicted claims, one predicted claim per distinct work the
report cites; a claim matched to a ground-truth claim scores (1 + connection right) / 2, else 0 (`strict`:
1 only when the connection is right too). Claims, matching and the one batched judge call:
metrics/claims/base.py. A report citing nothing scores 0; a query without ground-truth claims is unscored.
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
