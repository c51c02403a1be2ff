"""A month's judging, predicted and actual: the estimate each benchmark run made before judging
(judging_estimates) and the month's requests by transport as of its roll-up (month_judging_spend), which the
page and `deepscholar cost` read instead of re-reading the month's audit trail."""

from deepscholar.migrations import run_sql

revision = "0030_judging_spend"
down_revision = "0029_llm_batches"


def upgrade() -> None:
    run_sql(revision)
