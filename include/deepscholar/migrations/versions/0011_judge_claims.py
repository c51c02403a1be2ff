"""judge_claims: who is judging which report for a (metric, judge_config) right now, so two evaluations of
one month at once ask the provider once per judgment (deepscholar/evaluation/claims.py)."""

from deepscholar.migrations import run_sql

revision = "0011_judge_claims"
down_revision = "0010_report_system_build"


def upgrade() -> None:
    run_sql(revision)
