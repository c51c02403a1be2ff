"""Text cells a spreadsheet opens safely: the one rule every CSV we write applies (the export's files and
the annotation sample's CSV).

Design notes: docs/MODULE_NOTES.md, `deepscholar.text.spreadsheet`.
"""

from __future__ import annotations

__all__ = ["FORMULA_LEADS", "csv_cell"]

FORMULA_LEADS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: object) -> object:
    """A text cell as a CSV holds it: a leading `'` before a formula lead; anything else unchanged."""
    if isinstance(value, str) and value.startswith(FORMULA_LEADS):
        return "'" + value
    return value
