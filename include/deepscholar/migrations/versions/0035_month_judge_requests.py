"""A month's judge requests as the roll-up counted them (per metric, system and transport), kept with the
stamp of the judgments they came from, so `deepscholar cost` reads them instead of the month's audit trail
when nothing was judged since."""

from deepscholar.migrations import run_sql

revision = "0035_month_judge_requests"
down_revision = "0034_pooled_board_store"


def upgrade() -> None:
    run_sql(revision)
