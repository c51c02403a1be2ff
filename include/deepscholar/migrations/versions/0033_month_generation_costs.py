"""A month's generation costs per system as a function of their own (month_generation_costs), which
month_costs_of and the roll-up's one pass over the month's judge requests both read."""

from deepscholar.migrations import run_sql

revision = "0033_month_generation_costs"
down_revision = "0032_board_query_scores"


def upgrade() -> None:
    run_sql(revision)
