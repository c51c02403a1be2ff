"""A month's costs stored at its roll-up (month_costs); leaderboard_costs reads them instead of re-aggregating
every judgment of every month on each read."""

from deepscholar.migrations import run_sql

revision = "0027_month_costs"
down_revision = "0026_system_endpoint_revision"


def upgrade() -> None:
    run_sql(revision)
