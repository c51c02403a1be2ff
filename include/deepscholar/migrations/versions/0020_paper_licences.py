"""Each query paper's licence (arXiv OAI-PMH), kept apart from the sealed release tables so it can be
fetched for a month already published."""

from deepscholar.migrations import run_sql

revision = "0020_paper_licences"
down_revision = "0019_judgment_requests"


def upgrade() -> None:
    run_sql(revision)
