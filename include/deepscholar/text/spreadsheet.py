"""Text cells a spreadsheet opens safely: the one rule every CSV we write applies (the export's files and
the annotation sample's CSV).

A spreadsheet runs a cell that begins with `=`, `+`, `-` or `@` as a formula, and a tab or a carriage return
before them is skipped by some; text third parties wrote (reports, source titles) can begin with any of them.
`csv_cell` puts a `'` before such a cell, which spreadsheets show as text and hide; the files that keep the
exact text (Parquet, JSONL) are written without it. Line breaks inside a cell are the CSV writer's to quote
(RFC 4180, CRLF line ends).
"""

from __future__ import annotations

__all__ = ["FORMULA_LEADS", "csv_cell"]

FORMULA_LEADS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: object) -> object:
    """A text cell as a CSV holds it: a leading `'` before a formula lead; anything else unchanged."""
    if isinstance(value, str) and value.startswith(FORMULA_LEADS):
        return "'" + value
    return value
