"""The claims track: does a report say what the human section says about each important prior work?
Its ground-truth claims are made at release time (ground_truth.py) and read per query (query_data.py)."""

from deepscholar.evaluation.metrics.claims.query_data import QUERY_DATA
from deepscholar.evaluation.metrics.registry import Dimension, Family

FAMILY = Family("claims", "Claims", 5, ranking_metric="claims_f1")
DIMENSIONS = (Dimension("prior_art_claims", "Prior-art claims", "claims", 1),)
__all__ = ["FAMILY", "DIMENSIONS", "QUERY_DATA"]
