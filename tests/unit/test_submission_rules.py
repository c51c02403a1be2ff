"""The submission rules (systems/external/rules.py) that `reports import` and `reports check` share, on
outputs made here; and docs/SUBMITTING.md's example line is the kit's example file's first line."""

from __future__ import annotations

from pathlib import Path

import pytest

from deepscholar.systems.base import Report, Source
from deepscholar.systems.external.formats import ExternalOutput, report_from_json
from deepscholar.systems.external.rules import (
    Caps,
    Refused,
    ReleaseKeys,
    admit,
    query_paper_citations,
    too_big,
)

ROOT = Path(__file__).resolve().parents[2]
KEYS = ReleaseKeys({"2506.01001", "2506.01002"}, {0: "2506.01001"}, {"2506.01001": None, "2506.01002": None})
CAPS = Caps(max_file_bytes=10_000, max_chars=200, max_citations=5)


def _output(key, text="A claim [1].", n_sources=1, path="f.jsonl:1", error=None) -> ExternalOutput:
    report = None if error else Report(text=text, sources=[Source(idx=i, title=f"T{i}", snippet="", arxiv_id=f"2401.0000{i}")
                                                            for i in range(1, n_sources + 1)])
    return ExternalOutput(key=key, report=report, path=path, format="jsonl", error=error)


@pytest.mark.parametrize(("output", "says"), [
    (_output(None, error="Expecting value: line 1 column 1 (char 0)"), "Expecting value"),
    (_output(None), "names no arXiv id"),
    (_output("2301.99999"), "is not a query of release 2025-06"),
    (_output(7), "row 7 is not a row of the dataset"),
    (_output("2506.01002", text="x" * 201), "report text of 201 characters"),
    (_output("2506.01002", n_sources=6), "6 sources, more than DEEPSCHOLAR_IMPORT_MAX_CITATIONS (5)"),
    (_output("2506.01002", text="Claims [1, 2-9]."), "citation number 9, higher than"),
])
def test_an_output_breaking_a_rule_is_refused_with_its_reason(output, says):
    claimed: dict[str, str] = {}
    with pytest.raises(Refused, match=None) as refused:
        admit(output, KEYS, "2025-06", claimed, CAPS)
    assert says in str(refused.value) and claimed == {}


def test_the_first_output_of_a_query_is_admitted_and_a_second_refused():
    claimed: dict[str, str] = {}
    assert admit(_output(0, path="a:1"), KEYS, "2025-06", claimed, CAPS) == "2506.01001"  # by dataset row
    with pytest.raises(Refused, match=r"a second output for 2506.01001 \(first: a:1\)"):
        admit(_output("2506.01001", path="a:2"), KEYS, "2025-06", claimed, CAPS)
    assert claimed == {"2506.01001": "a:1"}
    assert too_big(_output("x", text="[5]", n_sources=5).report, CAPS) is None  # the caps themselves pass


def test_citations_of_the_query_paper_itself_are_named_by_number():
    sources = [Source(idx=1, title="", snippet="", arxiv_id="2506.01001"),
               Source(idx=2, title="", snippet="", arxiv_id="2401.00001"),
               Source(idx=3, title="", snippet="", arxiv_id="2506.01001", cited=False)]  # retrieved only
    assert query_paper_citations(sources, "2506.01001") == [1]
    assert query_paper_citations(sources, "2506.01002") == []


def test_the_guide_shows_the_example_files_first_line_and_it_parses():
    example = (ROOT / "tests" / "data" / "submission_example.jsonl").read_text(encoding="utf-8").splitlines()
    guide = (ROOT / "docs" / "SUBMITTING.md").read_text(encoding="utf-8")
    assert f"```json\n{example[0]}\n```" in guide
    import json

    for line in example:
        report = report_from_json(json.loads(line))
        assert report.sources and all(s.arxiv_id for s in report.sources)
    for command in ("deepscholar reports check", "deepscholar reports import", "systems backfill", "hf upload"):
        assert command in guide
