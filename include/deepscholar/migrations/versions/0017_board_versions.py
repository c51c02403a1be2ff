"""Versioned boards: every board row carries its board_version (today's boards become version 1,
published); board_versions records what each version was computed from. The generated wide views are
re-created over the versions with the metric columns they had (the core seven when there were none)."""

from deepscholar.migrations.wide_views import run_sql_around_views

revision = "0017_board_versions"
down_revision = "0016_release_versions"


def upgrade() -> None:
    run_sql_around_views(revision)
