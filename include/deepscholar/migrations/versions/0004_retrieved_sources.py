"""report_sources.cited and reports.n_leaked_retrieved: sources an imported report only says it retrieved
are kept for the leakage check, apart from the ones it cites (which the metrics read)."""

from deepscholar.migrations import run_sql

revision = "0004_retrieved_sources"
down_revision = "0003_benchmark_runs"


def upgrade() -> None:
    run_sql(revision)
