"""Judging through a provider's batch API: the requests waiting for a batch (llm_batch_requests), the batches
submitted (llm_batches), and llm_calls.transport, which says how an answer was obtained and priced."""

from deepscholar.migrations import run_sql

revision = "0029_llm_batches"
down_revision = "0028_month_costs_by_report"


def upgrade() -> None:
    run_sql(revision)
