"""Long leaderboard storage (leaderboard_systems + leaderboard_metrics); the wide tables become views
generated from the metric registry, so a new metric needs no DDL."""

from deepscholar.migrations import run_sql
from deepscholar.migrations.wide_views import sync_wide_views

revision = "0008_long_leaderboard"
down_revision = "0007_host_rate_limits"

# The metrics the warehouse had when this revision was written; the library re-creates the views with
# the registry's metrics at its next roll-up (evaluation/rollup.py).
CORE_SEVEN = ("organization", "nugget_coverage", "relevance_rate", "reference_coverage", "document_importance",
              "citation_precision", "claim_coverage")


def upgrade() -> None:
    from alembic import op

    run_sql(revision)
    sync_wide_views(op.get_bind(), CORE_SEVEN)
