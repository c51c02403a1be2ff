"""Claims recall (claims track, Prior-art claims): how much of the prior art the exemplar's authors
describe a report finds and connects rightly.

recall = sum of the per-claim scores / #ground-truth claims (one per important exemplar reference); a
ground-truth claim matched by a work the report cites scores (1 + connection right) / 2, else 0
(`strict`: 1 only when the connection is right too). Claims, matching and the one batched judge call:
metrics/claims/base.py, whose question this metric shares with claims_precision (so it costs no call of its
own). A query without ground-truth claims is unscored.
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
