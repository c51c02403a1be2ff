"""Could a system have seen a month's papers? Its model's knowledge cutoff against the month's queries.

A system whose model was trained on data up to its knowledge cutoff may have read every query paper
published on or before that day, and with it the related-work section it is asked to write. On such a
month its row is shown on every board but not ranked (`may_have_seen`), and it is never marked best nor
counted in the agreement between boards. A system that writes from a model whose cutoff nobody registered
is ranked and marked `cutoff_unknown`; a system that writes from no model (extractive, oracle, the human
exemplar) has no cutoff to check.
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
