"""A month's costs read its judge requests from llm_calls one request hash at a time (the primary key), so a
month's roll-up does not scan every month's audit trail."""

from deepscholar.migrations import run_sql

revision = "0031_month_calls_by_hash"
down_revision = "0030_judging_spend"


def upgrade() -> None:
    run_sql(revision)
