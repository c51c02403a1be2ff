"""What is left to judge, as SQL over report `r` (of table reports): the pending condition, the query shard.

The runner (which reports to judge), the jobs planner (how many there are, per unit and shard) and the
claims (which claimed reports still need a judgment) must all mean the same thing by these. They sit here,
below all three, so that none of them imports another for its words.
"""

from __future__ import annotations

from deepscholar.evaluation.metrics.base import Metric

__all__ = ["PENDING_CONDITION", "SHARD_OF_QUERY", "pending_params"]

# No headline score of metric :m at its current version :ver under judge_config :j.
PENDING_CONDITION = """NOT EXISTS (
    SELECT 1 FROM metric_scores m
    WHERE m.report_id = r.report_id AND m.metric = :m AND m.judge_config = :j
      AND m.variant = :v AND m.metric_version = :ver)"""
# The shard of report `r`'s query among :shards: from md5, so it never changes between servers or versions.
SHARD_OF_QUERY = "mod(('x' || substr(md5(r.arxiv_id), 1, 7))::bit(28)::int, :shards)"


def pending_params(metric: Metric, judge_config: str) -> dict:
    """The bind parameters of PENDING_CONDITION."""
    return {"m": metric.name, "j": judge_config, "v": metric.headline, "ver": metric.version}
