"""judgments and metric_scores keep only their primary keys (report_id first): every reader goes by report,
and the metric indexes made the planner scan a whole metric for each chunk a judge task stored."""

from deepscholar.migrations import run_sql

revision = "0013_drop_metric_indexes"
down_revision = "0012_judge_claims_holder_key"


def upgrade() -> None:
    run_sql(revision)
