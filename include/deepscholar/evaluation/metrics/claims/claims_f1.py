"""Claims F1 (claims track, Prior-art claims; the track's ranking metric): the harmonic mean of claims
precision and claims recall, 0 when both are 0.

Same claims, matching and judge call as the other two (metrics/claims/base.py), so it costs no call of its
own; `strict` is the F1 of the strict precision and recall. A query without ground-truth claims is
unscored; a report citing nothing scores 0.

Definition: docs/METRICS.md, "`claims_precision`, `claims_recall`, `claims_f1` (the track's ranking metric)".
"""

from __future__ import annotations

from deepscholar.evaluation.metrics.claims.base import ClaimsMetric

__all__ = ["ClaimsF1", "METRIC"]


class ClaimsF1(ClaimsMetric):
    name = "claims_f1"
    position = 3  # column within the dimension
    label = "Claims F1"
    quantity = "f1"
    calls_per_report = 0.1  # answered by claims_precision's request (cache or single flight) in the same task


METRIC = ClaimsF1()
