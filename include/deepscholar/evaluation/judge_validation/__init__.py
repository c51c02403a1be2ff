"""Judge validation: how far each metric's judge can be trusted, against people and against other judges.

Design notes: docs/MODULE_NOTES.md, `deepscholar.evaluation.judge_validation`.
"""

__all__ = ["annotation", "annotation_units", "drift", "judge_comparison", "judge_vs_humans", "rater_agreement"]
