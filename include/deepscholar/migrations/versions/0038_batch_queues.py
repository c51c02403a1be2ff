"""The batch queue keyed by month and judge config (a run submits, waits for and pays only its own
requests), with the run that recorded each request and how often a batch's files failed to download."""

from deepscholar.migrations import run_sql

revision = "0038_batch_queues"
down_revision = "0037_system_registration"


def upgrade() -> None:
    run_sql(revision)
