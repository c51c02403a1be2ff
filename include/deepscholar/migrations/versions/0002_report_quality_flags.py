"""reports.quality_flags: what an importer found wrong with a report (no_sources, unresolved_citations, ...)."""

from deepscholar.migrations import run_sql

revision = "0002_report_quality_flags"
down_revision = "0001_baseline"


def upgrade() -> None:
    run_sql(revision)
