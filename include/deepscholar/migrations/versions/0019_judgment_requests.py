"""judgments.request_hashes: the audit trail's rows (llm_calls) behind each judgment, so judge tokens and
cost are attributed per system and month; the leaderboard_costs view puts them beside generation's."""

from deepscholar.migrations import run_sql

revision = "0019_judgment_requests"
down_revision = "0018_knowledge_cutoffs"


def upgrade() -> None:
    run_sql(revision)
