"""Money: what evaluating a month costs and what it may cost, in one place below judging.

Design notes: docs/MODULE_NOTES.md, `deepscholar.evaluation.money`.
"""

__all__ = ["budget", "costs"]
