"""A month's costs and per-query scores read through the report keys, so reading one month does not scan every
month's judgments or scores."""

from deepscholar.migrations import run_sql
from deepscholar.migrations.wide_views import refresh_query_views

revision = "0028_month_costs_by_report"
down_revision = "0027_month_costs"


def upgrade() -> None:
    from alembic import op

    run_sql(revision)
    refresh_query_views(op.get_bind())
