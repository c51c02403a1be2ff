"""Who paid for each answer (llm_calls.billed_to, llm_batch_requests.billed_to), so a budget counts what was
paid whether or not a judgment was stored; and a run's approval kept in the warehouse beside its estimate."""

from deepscholar.migrations import run_sql

revision = "0039_spend_ledger"
down_revision = "0038_batch_queues"


def upgrade() -> None:
    run_sql(revision)
