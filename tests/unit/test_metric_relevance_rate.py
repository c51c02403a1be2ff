"""Relevance rate without a network: which sources count, RR = sum / (2|S|), the prompt, the local judge."""

from __future__ import annotations

import json

import pytest
from support.metric_support import (
    ScriptedJudge,
    item_judgment,
    needs_model,
    query_info,
    report_context,
    source_doc,
)

from deepscholar.evaluation.metrics import get_metric
from deepscholar.evaluation.metrics.base import Metric, unscored_item
from deepscholar.evaluation.metrics.core.relevance_rate import (
    METRIC,
    parse_grade,
    relevance_rate,
    source_fields,
)
from deepscholar.llm.client import ParseError

QUERY = query_info(
    title="Retrieval-Augmented Generation for Citing Research Papers",
    abstract=("We study retrieval-augmented generation for writing the related-work section of a paper. "
              "A dense retriever selects prior papers and a language model writes a cited synthesis."),
    exemplar_text="RAG conditions generation on retrieved passages [@lewis2020].")

RAG = source_doc(1, "snippet the system saw about RAG", arxiv_id="2005.11401",
                 title="Retrieval-Augmented Generation for Knowledge-Intensive NLP Tasks",
                 abstract=("We explore retrieval-augmented generation models, which condition a pre-trained "
                           "language model on passages retrieved from Wikipedia by a dense retriever."))
DPR = source_doc(2, "Dense representations learned by a dual-encoder outperform BM25 for passage retrieval.",
                 arxiv_id="2004.04906", title="Dense Passage Retrieval for Open-Domain Question Answering")
BUTTERFLY = source_doc(3, "Monarch butterflies fly thousands of kilometres south each autumn to overwinter.",
                       arxiv_id="1901.00001", title="The migration of monarch butterflies")
NOT_ARXIV = source_doc(4, "A book about writing.", title="A book")
UNCITED = source_doc(5, "The Transformer.", arxiv_id="1706.03762", title="Attention Is All You Need")
RAG_AGAIN = source_doc(6, "another snippet", arxiv_id="2005.11401", title="Retrieval-augmented generation (RAG)")
GRADE_2 = '{"grade": 2, "explanation": "same problem"}'

TEXT = ("RAG conditions generation on retrieved passages [1]. Dense retrievers beat BM25 [2]. "
        "RAG is used widely [1][6]. A book says so [4]. Butterflies migrate [3].\n")


def make_report(text: str = TEXT, sources=(RAG, DPR, BUTTERFLY, NOT_ARXIV, UNCITED, RAG_AGAIN), *,
                system_id: str = "sys", kind: str = "llm"):
    return report_context(text=text, sources=sources, query=QUERY, report_id=3, system_id=system_id,
                          system_kind=kind)


def graded(*pairs):
    return [item_judgment(f"src:{a}", {"grade": g}) for a, g in pairs]


def test_registry_and_protocol():
    assert get_metric("relevance_rate") is METRIC and isinstance(METRIC, Metric)
    assert METRIC.variants == ("score",) and METRIC.version == "d2+relevance_rate_v2"


def test_items_are_the_distinct_cited_arxiv_sources():
    items = METRIC.items(make_report())
    # RAG cited three times under two numbers: once; the non-arXiv book and the uncited stored source: never.
    assert [i.key for i in items] == ["src:2005.11401", "src:2004.04906", "src:1901.00001"]
    assert items[0].payload is RAG


@pytest.mark.parametrize("written", ["hep-th/9901001", "HEP-TH/9901001", "arXiv:hep-th/9901001v1",
                                     "https://arxiv.org/abs/HEP-TH/9901001v3"])
def test_one_paper_under_two_written_forms_of_its_id_is_one_item(written):
    """d1 keyed items on the stored id as written: `hep-th/9901001v2` and another form were two items."""
    sources = [source_doc(1, "s", arxiv_id="hep-th/9901001v2", title="Strings"),
               source_doc(2, "s", arxiv_id=written, title="Strings, again")]
    report = report_context(text="A [1]. B [2].", sources=sources, query=QUERY)
    (item,) = METRIC.items(report)
    assert item.key == "src:hep-th/9901001" and item.payload.idx == 1
    [s] = METRIC.score(report, graded(("hep-th/9901001", 2)))
    assert s.value == 1.0 and s.details["n_sources"] == 1


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
    assert source_fields(source_doc(9, "", arxiv_id="x")) == ("(unknown)", "(none)")


def test_prompt_holds_nothing_of_the_report():
    client = ScriptedJudge(GRADE_2)
    mine = make_report()
    theirs = make_report("Other words entirely [3]. RAG again [5].\n",
                         sources=(BUTTERFLY, source_doc(5, "a different snippet", arxiv_id=RAG.arxiv_id,
                                                        title=RAG.title, abstract=RAG.abstract)), system_id="other")
    j = METRIC.judge_llm(client, mine, METRIC.items(mine)[0])
    METRIC.judge_llm(client, theirs, METRIC.items(theirs)[1])
    assert client.prompts[0] == client.prompts[1]  # byte-identical: one cached call for both reports
    assert client.purposes == ["metric.relevance_rate"] * 2
    prompt = client.prompts[0]
    assert QUERY.abstract in prompt and QUERY.exemplar_text in prompt and RAG.abstract in prompt
    assert "snippet the system saw" not in prompt and "widely" not in prompt
    assert j.label == {"grade": 2} and j.explanation == "same problem"
    json.dumps(j.label)

    bad = METRIC.judge_llm(ScriptedJudge("very relevant"), mine, METRIC.items(mine)[0])
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
