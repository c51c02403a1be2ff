"""A board version keeps the per-query headline scores it was computed from, one compact array per system and
metric, so a board over many months (a window, a category) reads arrays instead of every score row."""

from deepscholar.migrations import run_sql

revision = "0032_board_query_scores"
down_revision = "0031_month_calls_by_hash"


def upgrade() -> None:
    run_sql(revision)
