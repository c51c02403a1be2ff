"""resolution_cache: how a reference was resolved, keyed on its DOI, arXiv id and normalised title, so a
paper cited again in a later month is not searched for again (release/resolution.py)."""

from deepscholar.migrations import run_sql

revision = "0006_resolution_cache"
down_revision = "0005_sample_rank"


def upgrade() -> None:
    run_sql(revision)
