"""Could a system have seen a month's papers? Its model's knowledge cutoff against the month's queries.

Design notes: docs/MODULE_NOTES.md, `deepscholar.evaluation.boards.contamination`.
"""

from __future__ import annotations

from datetime import date

__all__ = ["MAY_HAVE_SEEN", "CUTOFF_UNKNOWN", "contamination", "LABELS"]

MAY_HAVE_SEEN = "may_have_seen"
CUTOFF_UNKNOWN = "cutoff_unknown"
# How readers (CLI, page) say it.
LABELS = {MAY_HAVE_SEEN: "may have seen these papers (not ranked)", CUTOFF_UNKNOWN: "knowledge cutoff unknown"}


def contamination(cutoff: date | None, model_knowledge: bool, first_published: date | None) -> str | None:
    """The board's mark for one system on one month (None: nothing to say).

    `first_published` is the earliest publication day of the month's queries (None when no query has a
    date: then any registered cutoff may cover them)."""
    if not model_knowledge:
        return None
    if cutoff is None:
        return CUTOFF_UNKNOWN
    if first_published is None or first_published <= cutoff:
        return MAY_HAVE_SEEN
    return None
