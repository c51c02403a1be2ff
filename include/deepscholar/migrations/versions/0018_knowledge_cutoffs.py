"""Model knowledge cutoffs: a system's registration records its model's knowledge cutoff, and a board
shows a system that may have seen a month's papers without ranking it (the wide views are re-created with
the new columns)."""

from deepscholar.migrations.wide_views import run_sql_around_views

revision = "0018_knowledge_cutoffs"
down_revision = "0017_board_versions"


def upgrade() -> None:
    run_sql_around_views(revision)
