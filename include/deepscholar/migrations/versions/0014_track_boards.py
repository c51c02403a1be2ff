"""Track boards (track_boards, track_board_metrics), the agreement between families' rankings
(board_agreement, leaderboard_agreement) and scores that may be counts (metric_scores.value >= 0)."""

from deepscholar.migrations import run_sql

revision = "0014_track_boards"
down_revision = "0013_drop_metric_indexes"


def upgrade() -> None:
    run_sql(revision)
