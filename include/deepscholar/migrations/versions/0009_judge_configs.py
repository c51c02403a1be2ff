"""judge_configs: the models, request parameters and metric (prompt) versions behind each judge_config."""

from deepscholar.migrations import run_sql

revision = "0009_judge_configs"
down_revision = "0008_long_leaderboard"


def upgrade() -> None:
    run_sql(revision)
