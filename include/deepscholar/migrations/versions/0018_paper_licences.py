"""Each query paper's licence (arXiv OAI-PMH), kept apart from the sealed release tables so it can be
fetched for a month already published."""

from deepscholar.migrations import run_sql

revision = "0018_paper_licences"
down_revision = "0017_board_versions"


def upgrade() -> None:
    run_sql(revision)
