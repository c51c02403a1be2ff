"""Published means immutable: a release's manifest hash seals its queries, exemplars, references and
nuggets at publication (a trigger refuses any later change), and a correction is a new version of the
month (release_changelog)."""

from deepscholar.migrations import run_sql

revision = "0016_release_versions"
down_revision = "0015_track_artefacts"


def upgrade() -> None:
    run_sql(revision)
