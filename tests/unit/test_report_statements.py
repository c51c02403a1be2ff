"""What counts as a sentence of a report (text.sentences.split_report_sentences), on a real-looking report with
headings, bullets, a table citing many sources, a code block and a reference list; and that the sentence-
level metrics judge exactly those statements."""

from __future__ import annotations

from pathlib import Path

import pytest

from deepscholar.evaluation.metrics.base import QueryInfo, ReportContext
from deepscholar.evaluation.metrics.core.citation_precision import METRIC as CITATION_PRECISION
from deepscholar.evaluation.metrics.core.claim_coverage import METRIC as CLAIM_COVERAGE
from deepscholar.text.citations import arxiv_links_to_numbers, citation_stats
from deepscholar.text.sentences import split_report_sentences

REPORT = """\
# Related Work

Retrieval-augmented generation grounds a model's answers in retrieved passages [1][2]. Dense retrievers
such as DPR replaced sparse ones in most pipelines [3].

## Approaches at a glance

| Approach | Key idea | Representative work |
|----------|----------|---------------------|
| Dense retrieval | Dual encoders score passages by inner product. | [3][4][5][6][7] |
| Re-ranking | A cross-encoder re-scores the top candidates; it is slower. It is more precise. | [8][9][10][11] |
| Query rewriting | An LLM rewrites the query \\| expands it | [12][13][14][15][16][17] |
|  |  |  |

Long-context models
-------------------

- Long-context models read whole documents [18]. They still miss facts in the middle [19].
- Hybrid systems combine both:
  - retrieval picks the documents [20],
  - the long context reads them [21].
- Evaluation

> Benchmarks disagree on which is better [22].

```python
score = retriever(query)  # [23] is not a citation here
```

---

## References

[1] Lewis et al. Retrieval-Augmented Generation for Knowledge-Intensive NLP Tasks. arXiv:2005.11401.
[2] Guu et al. REALM. arXiv:2002.08909.
"""

EXPECTED = [
    ("Retrieval-augmented generation grounds a model's answers in retrieved passages [1][2].", [1, 2]),
    ("Dense retrievers such as DPR replaced sparse ones in most pipelines [3].", [3]),
    ("Dense retrieval; Dual encoders score passages by inner product.; [3][4][5][6][7]", [3, 4, 5, 6, 7]),
    ("Re-ranking; A cross-encoder re-scores the top candidates; it is slower. It is more precise.; "
     "[8][9][10][11]", [8, 9, 10, 11]),
    ("Query rewriting; An LLM rewrites the query | expands it; [12][13][14][15][16][17]",
     [12, 13, 14, 15, 16, 17]),
    ("Long-context models read whole documents [18].", [18]),
    ("They still miss facts in the middle [19].", [19]),
    ("Hybrid systems combine both:", []),
    ("retrieval picks the documents [20],", [20]),
    ("the long context reads them [21].", [21]),
    ("Benchmarks disagree on which is better [22].", [22]),
]


def test_headings_lists_tables_quotes_and_code_of_a_report():
    assert [(s.text, s.citations) for s in split_report_sentences(REPORT)] == EXPECTED
    assert [s.index for s in split_report_sentences(REPORT)] == list(range(len(EXPECTED)))


def test_a_table_row_is_one_statement_and_the_header_and_delimiter_are_none():
    table = "Intro sentence [1].\n\n| a | b |\n|:--|--:|\n| x [2] | y [3] |\n| z | w [4] |\nAfter the table [5]."
    assert [s.text for s in split_report_sentences(table)] == ["Intro sentence [1].", "x [2]; y [3]", "z; w [4]",
                                                        "After the table [5]."]
    # Without a delimiter row, lines starting with "|" are still rows; a row of citations only is dropped.
    assert [s.text for s in split_report_sentences("| Method | Uses RAG [1] |\n| [2] | [3] |")] == ["Method; Uses RAG [1]"]
    # A pipe in prose does not make a table.
    assert [s.text for s in split_report_sentences("Precision | recall trade-offs matter [1].")] == [
        "Precision | recall trade-offs matter [1]."]


def test_citation_precision_and_claim_coverage_judge_the_same_statements():
    """One (statement, number) pair per row citation, not one 20-citation "sentence" for the whole table."""
    report = ReportContext(
        report_id=1, release_id="2025-01", system_id="sys", system_kind="deepscholar_base", arxiv_id="2501.00001",
        text=REPORT, query=QueryInfo(release_id="2025-01", arxiv_id="2501.00001", title="T", abstract="A",
                                     published=None, exemplar_text=""),
        sources={}, sentences=tuple(split_report_sentences(REPORT)))
    pairs = [item.payload for item in CITATION_PRECISION.items(report)]
    assert len(pairs) == sum(len(c) for _, c in EXPECTED) == 23
    assert max(sum(1 for pos, _ in pairs if pos == p) for p in range(len(EXPECTED))) == 6  # the widest row
    assert [item.payload for item in CLAIM_COVERAGE.items(report)] == list(range(len(EXPECTED)))
    assert citation_stats(REPORT, []).n_citations == 23


def test_a_real_deepscholar_base_report_with_a_table(shared_fixtures: Path):
    """The published deepscholar-base (gpt-4.1) output: its table of six rows used to be one 22-citation sentence."""
    path = shared_fixtures / "deepscholar_official" / "system_outputs_paper0" / "deepscholar_base_gpt_4.1" / \
        "final_report.md"
    if not path.is_file():
        pytest.skip(f"{path} missing")
    text, _ = arxiv_links_to_numbers(path.read_text(encoding="utf-8"))
    sentences = split_report_sentences(text)
    rows = [s for s in sentences if s.text.startswith(("Agent-Based Modeling (ABM);", "Environmental & Multi"))]
    assert len(rows) == 2
    assert max(len(set(s.citations)) for s in sentences) <= 6
    assert not any("Approach/Model" in s.text or "---" in s.text for s in sentences)
