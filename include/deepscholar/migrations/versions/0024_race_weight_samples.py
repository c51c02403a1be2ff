"""RACE: the dimension-weight samples each race_rubrics row's weight is the mean of (weight_samples)."""

from deepscholar.migrations import run_sql

revision = "0024_race_weight_samples"
down_revision = "0023_judge_drift"


def upgrade() -> None:
    run_sql(revision)
