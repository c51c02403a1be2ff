"""reports.system_build(_detail): the effective version of the system that wrote each report."""

from deepscholar.migrations import run_sql

revision = "0010_report_system_build"
down_revision = "0009_judge_configs"


def upgrade() -> None:
    run_sql(revision)
