"""docs/METRICS.md's conformance tables name the unit test that checks each worked example: every test
named there must exist, so a renamed or deleted test cannot leave a number in the docs unchecked."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_test_the_conformance_tables_name_exists():
    text = (ROOT / "docs" / "METRICS.md").read_text(encoding="utf-8")
    tables = text[text.index("## Conformance"):]
    named = set(re.findall(r"`(test_[a-z0-9_]+)`", tables))
    assert len(named) >= 10, "the conformance tables should name the tests of their worked examples"
    defined = {m for p in (ROOT / "tests").rglob("test_*.py")
               for m in re.findall(r"^def (test_[a-z0-9_]+)\(", p.read_text(encoding="utf-8"), re.MULTILINE)}
    assert sorted(named - defined) == []



def _released_code_cells(text: str) -> list[tuple[str, str]]:
    """(row's first cell, its released-code cell) of every table whose header has a released-code column."""
    cells, column = [], None
    for line in text.splitlines():
        row = [c.strip() for c in line.strip().strip("|").split("|")] if line.strip().startswith("|") else None
        if row is None:
            column = None
        elif column is None:
            column = next((i for i, c in enumerate(row) if "released code" in c), -1)
        elif column >= 0 and not set(row[0]) <= set("-: ") and len(row) > column:
            cells.append((row[0], row[column]))
    return cells


def _unnamed(text: str) -> list[tuple[str, str]]:
    """Rows whose released-code cell names no file or function in backticks and does not say "none"."""
    return [(point, cell) for point, cell in _released_code_cells(text)
            if not re.search(r"`[\w./]+(\.py)?(: [\w.]+)?`", cell) and not cell.lower().startswith("none")]


def test_every_released_code_cell_names_the_code_it_describes():
    """Each row saying what the authors' released code does names its file or function (in backticks), or says
    that nothing was released for that point: a row cannot describe their scorer without saying where."""
    text = (ROOT / "docs" / "METRICS.md").read_text(encoding="utf-8")
    assert len(_released_code_cells(text)) >= 25, "the conformance tables should have a released-code column"
    assert _unnamed(text) == []


def test_a_row_without_a_named_function_is_caught():
    table = ("| point | paper | released code |\n|---|---|---|\n| a | — | `x.py: f` does it |\n"
             "| b | — | none released |\n| c | — | the same as the paper |\n\nprose\n| not | a table |\n")
    assert _unnamed(table) == [("c", "the same as the paper")]
