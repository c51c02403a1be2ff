"""Versioned boards: every board row carries its board_version (today's boards become version 1,
published); board_versions records what each version was computed from. The generated wide views are
re-created over the versions with the metric columns they had (the core seven when there were none)."""

from deepscholar.migrations import run_sql

revision = "0017_board_versions"
down_revision = "0016_release_versions"

# The metrics a warehouse without wide views gets them for; the roll-up re-creates them from the registry.
CORE_SEVEN = ("organization", "nugget_coverage", "relevance_rate", "reference_coverage", "document_importance",
              "citation_precision", "claim_coverage")


def upgrade() -> None:
    from alembic import op

    from deepscholar.migrations.wide_views import drop_generated_views, sync_track_views, sync_wide_views

    conn = op.get_bind()
    core, tracks = drop_generated_views(conn)  # they group by the primary keys this revision changes
    run_sql(revision)
    sync_wide_views(conn, core or CORE_SEVEN)
    sync_track_views(conn, tracks)
