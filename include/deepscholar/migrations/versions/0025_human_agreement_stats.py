"""Judge vs humans stored per month, judge config and metric, so the page reads it instead of computing it."""

from deepscholar.migrations import run_sql

revision = "0025_human_agreement_stats"
down_revision = "0024_race_weight_samples"


def upgrade() -> None:
    run_sql(revision)
