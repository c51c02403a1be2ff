"""Baseline: the schema of sql/001..004 as the pre-Alembic code applied them (releases, systems and
reports, judging, leaderboard). Pre-Alembic warehouses are stamped here after a check."""

from deepscholar.migrations import run_sql

revision = "0001_baseline"
down_revision = None


def upgrade() -> None:
    run_sql(revision)
