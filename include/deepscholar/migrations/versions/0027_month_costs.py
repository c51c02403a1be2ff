"""A month's costs computed from its own rows (month_costs_of) and stored at its roll-up (month_costs), instead
of re-aggregating every judgment of every month on each read of leaderboard_costs."""

from deepscholar.migrations import run_sql

revision = "0027_month_costs"
down_revision = "0026_system_endpoint_revision"


def upgrade() -> None:
    run_sql(revision)
