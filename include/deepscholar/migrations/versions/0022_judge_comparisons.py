"""Judge vs judge on one month: item agreement per metric and the stability of the two boards' ranks."""

from deepscholar.migrations import run_sql

revision = "0022_judge_comparisons"
down_revision = "0021_annotations"


def upgrade() -> None:
    run_sql(revision)
