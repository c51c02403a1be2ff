"""Model knowledge cutoffs: a system's registration records its model's knowledge cutoff, and a board
shows a system that may have seen a month's papers without ranking it (the wide views are re-created with
the new columns)."""

from deepscholar.migrations import run_sql

revision = "0018_knowledge_cutoffs"
down_revision = "0017_board_versions"

# The metrics a warehouse without wide views gets them for; the roll-up re-creates them from the registry.
CORE_SEVEN = ("organization", "nugget_coverage", "relevance_rate", "reference_coverage", "document_importance",
              "citation_precision", "claim_coverage")


def upgrade() -> None:
    from alembic import op

    from deepscholar.migrations.wide_views import drop_generated_views, sync_track_views, sync_wide_views

    conn = op.get_bind()
    core, tracks = drop_generated_views(conn)
    run_sql(revision)
    sync_wide_views(conn, core or CORE_SEVEN)
    sync_track_views(conn, tracks)
