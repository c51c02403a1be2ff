"""Judging: turning a month's reports into stored judgments and scores.

Design notes: docs/MODULE_NOTES.md, `deepscholar.evaluation.judging`.
"""

__all__ = ["batch_rounds", "evaluate", "jobs", "report_contexts", "runner"]
