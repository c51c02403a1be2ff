"""benchmark_runs: what each benchmark DAG run for a month is doing (waiting for its release, running,
published, blocked by a failed release, failed), read by the release DAG to start a run when needed."""

from deepscholar.migrations import run_sql

revision = "0003_benchmark_runs"
down_revision = "0002_report_quality_flags"


def upgrade() -> None:
    run_sql(revision)
