"""The judge drift alarm: each judge's fixed calibration slice per metric, and every month's re-judging of it."""

from deepscholar.migrations import run_sql

revision = "0023_judge_drift"
down_revision = "0022_judge_comparisons"


def upgrade() -> None:
    run_sql(revision)
