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
