"""release_candidates.sample_rank: each filtered candidate's place in the month's seeded, category-balanced
order (release/sampling.py); extraction takes candidates in this order until max_queries are kept."""

from deepscholar.migrations import run_sql

revision = "0005_sample_rank"
down_revision = "0004_retrieved_sources"


def upgrade() -> None:
    run_sql(revision)
