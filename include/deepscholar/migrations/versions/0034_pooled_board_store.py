"""Pooled boards (a window of months, one arXiv category) kept once computed, keyed by their selection and
stamped with what they were computed from, so a cold `deepscholar leaderboard --from/--category` process
reads one row instead of recomputing the bootstrap over every month's queries."""

from deepscholar.migrations import run_sql

revision = "0034_pooled_board_store"
down_revision = "0033_month_generation_costs"


def upgrade() -> None:
    run_sql(revision)
