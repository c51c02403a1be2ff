"""Citation precision without a network: items, the two formulas, unresolved pairs, and the local judge."""

from __future__ import annotations

import re

import pytest
from support.metric_support import (
    ScriptedJudge,
    item_judgment,
    judge_and_score,
    needs_model,
    query_info,
    report_context,
    source_doc,
)

from deepscholar.evaluation.metrics import get_metric, registry
from deepscholar.evaluation.metrics.core.citation_precision import (
    METRIC,
    SUPPORT_COSINE,
    CitationPrecision,
    parse_support,
    strip_citation_numbers,
)
from deepscholar.llm.client import ParseError
from deepscholar.text.sentences import split_report_sentences as split_sentences

QUERY = query_info(title="Retrieval for citing papers",
                   abstract="We study retrieval-augmented generation for related-work sections.")


def make_report(sentences, sources, *, kind="deepscholar_base", report_id=1):
    """sentences: [(text, [cited numbers])]; sources: {number: text}."""
    return report_context(sentences=sentences, sources=sources, query=QUERY, system_kind=kind, report_id=report_id)


def _between(prompt: str, n: int) -> str:
    return re.findall(r"<<<\n(.*?)\n>>>", prompt, re.DOTALL)[n]


def keyword_answer(prompt: str) -> str:
    """A judge that reads the prompt: supported when the sentence and the source share a CAPITALISED word."""
    sentence, source = _between(prompt, 0), _between(prompt, 1)
    shared = set(re.findall(r"\b[A-Z]{3,}\b", sentence)) & set(re.findall(r"\b[A-Z]{3,}\b", source))
    return f'{{"supported": {"true" if shared else "false"}, "explanation": "shares {sorted(shared)}"}}'


def judge(report, client=None):
    return judge_and_score(METRIC, report, client or ScriptedJudge(keyword_answer))


def test_registered_with_headline_and_version():
    assert get_metric("citation_precision") is METRIC
    assert METRIC.headline == registry.headline_variant("citation_precision") == "per_pair"
    assert METRIC.variants == ("per_pair", "per_sentence")
    assert METRIC.version == "d4+citation_precision_v2"
    assert METRIC.prompt.version == "citation_precision_v2"


def test_one_item_per_distinct_pair_and_a_repeated_marker_counts_once():
    report = make_report([("ALPHA is fast [2][2].", [2, 2]), ("No citation here.", []),
                          ("BETA and GAMMA [1][3].", [1, 3])], {1: "BETA", 2: "ALPHA", 3: "nothing shared"})
    assert [i.key for i in METRIC.items(report)] == ["s0:c2", "s2:c1", "s2:c3"]
    # [2][2] as the splitter reads it is one citation as well.
    assert [s.citations for s in split_sentences("ALPHA is fast [2][2]. BETA too [1].")] == [[2], [1]]
    _, scores = judge(report)
    # s0:c2 precise, s2:c1 precise, s2:c3 not: 2/3 (counting [2] twice would give 3/4).
    assert scores["per_pair"].value == pytest.approx(2 / 3)
    assert scores["per_pair"].n_items == 3


def test_two_numbers_of_one_paper_in_a_sentence_are_one_pair():
    sources = {3: source_doc(3, "ALPHA", arxiv_id="2401.00001"), 5: source_doc(5, "   ", arxiv_id="2401.00001v2"),
               1: source_doc(1, "nothing shared", arxiv_id="2402.00002")}
    report = make_report([("ALPHA is fast [3][5].", [3, 5]), ("ALPHA again [5].", [5]), ("BETA [1].", [1])], sources)
    # [5] is [3]'s paper: keyed by the first-cited number, judged on the paper's text (d2: 4 pairs, 2/4)
    assert [i.key for i in METRIC.items(report)] == ["s0:c3", "s1:c3", "s2:c1"]
    _, scores = judge(report)
    assert scores["per_pair"].value == pytest.approx(2 / 3)


def test_per_pair_and_per_sentence_differ_on_a_crafted_case():
    report = make_report(
        [("ALPHA, BETA and GAMMA work [1][2][3].", [1, 2, 3]), ("DELTA works too [4].", [4]),
         ("A sentence citing nothing.", [])],
        {1: "ALPHA paper", 2: "BETA paper", 3: "GAMMA paper", 4: "an unrelated paper"})
    judgments, scores = judge(report)
    assert [j.label for j in judgments] == [1, 1, 1, 0]
    assert scores["per_pair"].value == pytest.approx(3 / 4)
    # Mean over the two sentences that cite something: (3/3 + 0/1) / 2; not over all three sentences.
    assert scores["per_sentence"].value == pytest.approx(1 / 2)
    assert scores["per_pair"].details == {"n_pairs": 4, "n_precise": 3, "n_unresolved": 0,
                                          "n_sentences_citing": 2}


def test_unresolved_citation_is_an_imprecise_pair_without_a_call():
    report = make_report([("ALPHA is fast [1][7][8].", [1, 7, 8])], {1: "ALPHA", 8: "   "})
    client = ScriptedJudge(keyword_answer)
    judgments, scores = judge(report, client)
    assert len(client.asked) == 1  # only [1] has a source with text
    assert [(j.key, j.label, j.calls) for j in judgments] == [("s0:c1", 1, 1), ("s0:c7", 0, 0), ("s0:c8", 0, 0)]
    assert "resolves to no source" in judgments[1].explanation
    assert scores["per_pair"].value == pytest.approx(1 / 3)
    assert scores["per_sentence"].value == pytest.approx(1 / 3)
    assert scores["per_pair"].details["n_unresolved"] == 2


def test_a_report_without_citations_scores_zero_not_unscored():
    report = make_report([("ALPHA is fast.", []), ("BETA too.", [])], {1: "ALPHA"})
    assert METRIC.items(report) == []
    scores = METRIC.score(report, [])
    assert [(s.variant, s.value, s.unscored_reason) for s in scores] == [("per_pair", 0.0, None),
                                                                         ("per_sentence", 0.0, None)]
    assert scores[0].details["n_pairs"] == 0


def test_one_unscored_pair_makes_every_variant_unscored():
    report = make_report([("ALPHA [1].", [1]), ("BETA [2].", [2])], {1: "ALPHA", 2: "BETA"})

    def answer(prompt):
        return "Yes, it supports it." if "BETA" in _between(prompt, 0) else keyword_answer(prompt)

    judgments, scores = judge(report, ScriptedJudge(answer))
    assert judgments[0].scored and not judgments[1].scored
    for s in scores.values():
        assert s.value is None
        assert "1 of 2 items unscored" in s.unscored_reason and "s1:c2" in s.unscored_reason
        assert "unparseable" in s.unscored_reason
    # A judgment that never came back is not a silent 0 either.
    missing = METRIC.score(report, judgments[:1])
    assert all(s.value is None and "no judgment" in s.unscored_reason for s in missing)


def test_prompt_holds_only_the_sentence_and_the_source_so_repeats_are_identical():
    a = make_report([("Intro sentence [3].", [3]), ("ALPHA is fast [1].", [1])], {1: "ALPHA paper", 3: "x"})
    b = make_report([("ALPHA is fast [4].", [4])], {4: "ALPHA paper"}, report_id=2)
    client = ScriptedJudge(keyword_answer)
    METRIC.judge_llm(client, a, METRIC.items(a)[1])
    METRIC.judge_llm(client, b, METRIC.items(b)[0])
    (purpose_a, prompt_a), (purpose_b, prompt_b) = client.asked
    assert purpose_a == purpose_b == "metric.citation_precision"
    assert prompt_a == prompt_b
    assert _between(prompt_a, 0) == "ALPHA is fast." and _between(prompt_a, 1) == "ALPHA paper"
    assert "{{" not in prompt_a


def test_parse_support_is_strict():
    assert parse_support('{"supported": true, "explanation": " it says so "}') == (True, "it says so")
    assert parse_support('```json\n{"supported": false, "explanation": "no"}\n```') == (False, "no")
    for bad in ('{"supported": "true", "explanation": "x"}', '{"supported": 1, "explanation": "x"}',
                '{"supported": true}', '{"supported": true, "explanation": ""}', "Supported: yes",
                '[{"supported": true, "explanation": "x"}]'):
        with pytest.raises(ParseError):
            parse_support(bad)


def test_strip_citation_numbers():
    assert strip_citation_numbers("A claim [1][2, 3] and more \\[4\\], see [5-7].") == "A claim and more, see."


def test_score_rejects_a_label_that_is_not_zero_or_one():
    report = make_report([("ALPHA [1].", [1])], {1: "ALPHA"})
    with pytest.raises(ValueError, match="0 or 1"):
        METRIC.score(report, [item_judgment("s0:c1", 2)])


@needs_model
def test_local_judge_on_a_tiny_case():
    report = make_report(
        [("Dense passage retrieval encodes questions and passages with two BERT encoders [1][2][9].", [1, 2, 9])],
        {1: "We present dense passage retrieval, in which a dual BERT encoder maps questions and passages to "
            "vectors. It beats BM25.",
         2: "We study protein folding with molecular dynamics."})
    items = CitationPrecision().items(report)
    judgments = METRIC.judge_local(report, items)
    assert [(j.key, j.label, j.calls) for j in judgments] == [("s0:c1", 1, 0), ("s0:c2", 0, 0), ("s0:c9", 0, 0)]
    assert judgments[0].explanation.startswith("local embedding judge (all-MiniLM-L6-v2), not an LLM")
    assert f">= {SUPPORT_COSINE}" in judgments[0].explanation
    assert METRIC.judge_local(report, items) == judgments  # deterministic
    scores = {s.variant: s.value for s in METRIC.score(report, judgments)}
    assert scores == {"per_pair": pytest.approx(1 / 3), "per_sentence": pytest.approx(1 / 3)}
