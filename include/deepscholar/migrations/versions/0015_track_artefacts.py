"""Release-time artefacts of the evaluation tracks: RACE's rubrics (race_rubrics), the claims track's
ground truth (gt_claims), and which a release has (release_track_artefacts)."""

from deepscholar.migrations import run_sql

revision = "0015_track_artefacts"
down_revision = "0014_track_boards"


def upgrade() -> None:
    run_sql(revision)
