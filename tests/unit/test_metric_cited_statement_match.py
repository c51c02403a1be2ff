"""ReportBench's cited statement match without a network: one call per (sentence, source) pair, the judge
quotes the supporting passage or NOT_FOUND and then decides; score = matches / pairs."""

from __future__ import annotations

import json
import re

import pytest
from support.metric_support import ScriptedJudge, item_judgment, judge_and_score, needs_model, report_context

from deepscholar.evaluation.metrics import get_metric, registry
from deepscholar.evaluation.metrics.reportbench.cited_statement_match import (
    MATCH_COSINE,
    METRIC,
    NOT_FOUND,
    parse_match,
    quote_in_source,
)
from deepscholar.llm.client import ParseError


def _between(prompt: str, n: int) -> str:
    return re.findall(r"<<<\n(.*?)\n>>>", prompt, re.DOTALL)[n]


def quoting_answer(prompt: str) -> str:
    """A judge that reads the prompt: quotes the source sentence sharing a CAPITALISED word with the
    statement, else NOT_FOUND; a quote with the word WRONG does not match."""
    statement, source = _between(prompt, 0), _between(prompt, 1)
    words = set(re.findall(r"\b[A-Z]{3,}\b", statement))
    quote = next((s.strip() for s in source.split(".") if words & set(re.findall(r"\b[A-Z]{3,}\b", s))), None)
    if quote is None:
        return json.dumps({"quote": NOT_FOUND, "match": False, "reason": "nothing in the source"})
    return json.dumps({"quote": quote, "match": "WRONG" not in quote, "reason": "compared"})


def make_report(sentences, sources):
    return report_context(sentences=sentences, sources=sources)


def judge(report, client=None):
    return judge_and_score(METRIC, report, client or ScriptedJudge(quoting_answer))


def test_a_reportbench_metric_of_its_own_dimension():
    assert get_metric("cited_statement_match") is METRIC
    assert registry.dimension_declarations()[METRIC.dimension].family == "reportbench"
    assert METRIC.dimension == "faithfulness" and METRIC.version == "d3+cited_statement_match_v1"
    assert "cited_statement_match" not in registry.judged_metric_names()
    assert "cited_statement_match" in registry.judged_metric_names(["reportbench"])


def test_score_is_matches_over_pairs_with_not_found_and_no_text_as_no_match():
    report = make_report(
        [("ALPHA is fast [1][2].", [1, 2]),  # [1] quotes and matches; [2] NOT_FOUND
         ("BETA is WRONG [1].", [1]),  # quoted, but the passage says something else
         ("GAMMA holds [3][9].", [3, 9]),  # [3] has no text, [9] names no source: no match, no call
         ("[1].", [1]), ("No citation.", [])],  # markers alone state nothing; uncited sentences are no pair
        {1: "ALPHA is fast. BETA is WRONG here.", 2: "An unrelated paper.", 3: " "})
    client = ScriptedJudge(quoting_answer)
    judgments, scores = judge(report, client)
    assert [(j.key, j.label["match"], j.calls) for j in judgments] == [
        ("s0:c1", True, 1), ("s0:c2", False, 1), ("s1:c1", False, 1), ("s2:c3", False, 0), ("s2:c9", False, 0)]
    assert len(client.asked) == 3
    assert judgments[0].label == {"match": True, "quote": "ALPHA is fast", "quote_in_source": True}
    assert judgments[0].explanation == "compared"
    assert judgments[1].label == {"match": False, "quote": None, "quote_in_source": None}  # NOT_FOUND
    assert "has no text" in judgments[3].explanation and "names no stored source" in judgments[4].explanation
    assert scores["score"].value == pytest.approx(1 / 5)
    assert scores["score"].details == {"n_pairs": 5, "n_match": 1, "n_not_found": 3, "n_no_text": 2,
                                       "n_match_quote_not_in_source": 0}


def test_no_pairs_is_zero_and_marked():
    report = make_report([("ALPHA is fast.", []), ("[1][2].", [1, 2])], {1: "ALPHA"})
    assert METRIC.items(report) == []
    (score,) = METRIC.score(report, [])
    assert (score.value, score.unscored_reason, score.details["no_citation_pairs"]) == (0.0, None, True)


def test_parse_match_reads_a_quote_or_not_found():
    assert parse_match('{"quote": " It is fast. ", "match": true, "reason": " same claim "}') == (
        "It is fast.", True, "same claim")
    assert parse_match('```json\n{"quote": "NOT_FOUND", "match": false, "reason": "absent"}\n```') == (
        None, False, "absent")
    assert parse_match('{"quote": "It is slow.", "match": false, "reason": "contradicts"}') == (
        "It is slow.", False, "contradicts")


@pytest.mark.parametrize("text", [
    '{"quote": "NOT_FOUND", "match": true, "reason": "x"}',  # no passage, yet a match
    '{"quote": "", "match": false, "reason": "x"}',
    '{"quote": null, "match": false, "reason": "x"}',
    '{"quote": "q", "match": "true", "reason": "x"}',
    '{"quote": "q", "match": 1, "reason": "x"}',
    '{"quote": "q", "match": true}',
    '{"quote": "q", "match": true, "reason": " "}',
    '{"match": false, "reason": "x"}',
    '[{"quote": "q", "match": true, "reason": "x"}]',
    'NOT_FOUND',
])
def test_parse_match_is_strict(text):
    with pytest.raises(ParseError):
        parse_match(text)


def test_a_quote_not_in_the_source_is_kept_and_counted_but_the_match_stands():
    report = make_report([("ALPHA is fast [1].", [1])], {1: "ALPHA is fast."})
    answer = json.dumps({"quote": "ALPHA is the fastest", "match": True, "reason": "paraphrased"})
    judgments, scores = judge(report, ScriptedJudge(answer))
    assert judgments[0].label == {"match": True, "quote": "ALPHA is the fastest", "quote_in_source": False}
    assert scores["score"].value == 1.0 and scores["score"].details["n_match_quote_not_in_source"] == 1
    assert quote_in_source("alpha  IS\nfast", "ALPHA is fast.") and not quote_in_source("ALPHA", "BETA")


def test_one_unanswerable_pair_leaves_the_report_unscored():
    report = make_report([("ALPHA [1].", [1]), ("BETA [1].", [1])], {1: "ALPHA. BETA."})

    def answer(prompt):
        if "BETA" in _between(prompt, 0):
            return json.dumps({"quote": NOT_FOUND, "match": True, "reason": "contradictory"})
        return quoting_answer(prompt)

    judgments, scores = judge(report, ScriptedJudge(answer, max_reasks=1))
    assert judgments[0].scored and not judgments[1].scored and judgments[1].calls == 2
    assert "must be false when the quote is NOT_FOUND" in judgments[1].unscored_reason
    assert scores["score"].value is None and "1 of 2 items unscored" in scores["score"].unscored_reason
    with pytest.raises(ValueError, match="must be"):
        METRIC.score(report, [item_judgment("s0:c1", 1), item_judgment("s1:c1", 1)])


@needs_model
def test_local_judge_quotes_the_closest_source_sentence_deterministically():
    report = make_report(
        [("Dense passage retrieval maps questions and passages to vectors with a dual BERT encoder [1][2].", [1, 2]),
         ("It was evaluated on chemistry [4].", [4])],
        {1: "Open-domain QA needs retrieval. We present dense passage retrieval, in which a dual BERT encoder maps "
            "questions and passages to vectors.",
         2: "We study protein folding with molecular dynamics."})
    items = METRIC.items(report)
    judgments = METRIC.judge_local(report, items)
    assert [(j.key, j.label["match"], j.calls) for j in judgments] == [
        ("s0:c1", True, 0), ("s0:c2", False, 0), ("s1:c4", False, 0)]
    assert judgments[0].label["quote"].startswith("We present dense passage retrieval")
    assert judgments[0].label["quote_in_source"] is True and judgments[1].label["quote"] is None
    assert judgments[0].explanation.startswith("local embedding judge (all-MiniLM-L6-v2), not an LLM")
    assert f">= {MATCH_COSINE}" in judgments[0].explanation
    assert METRIC.judge_local(report, items) == judgments
    assert METRIC.score(report, judgments)[0].value == pytest.approx(1 / 3)
