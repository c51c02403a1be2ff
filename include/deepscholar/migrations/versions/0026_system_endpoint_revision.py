"""A registered system's endpoint changes are counted, so the reports written after one are a new build."""

from deepscholar.migrations import run_sql

revision = "0026_system_endpoint_revision"
down_revision = "0025_human_agreement_stats"


def upgrade() -> None:
    run_sql(revision)
