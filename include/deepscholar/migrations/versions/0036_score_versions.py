"""Per-report scores and judgments of every metric version kept, and the authors' aggregations stored with
each board version: a definition change adds numbers beside the published ones instead of rewriting them."""

from deepscholar.migrations import run_sql

revision = "0036_score_versions"
down_revision = "0035_month_judge_requests"


def upgrade() -> None:
    run_sql(revision)
