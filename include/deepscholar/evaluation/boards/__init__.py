"""Boards: from stored scores to the published leaderboards, and what is checked and said about them.

Design notes: docs/MODULE_NOTES.md, `deepscholar.evaluation.boards`.
"""

__all__ = ["board_versions", "contamination", "leaderboard", "leaderboard_quality", "pooled", "pooled_store",
           "published", "query_scores", "rank_agreement", "rollup", "selection"]
