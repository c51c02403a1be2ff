"""Claim coverage without a network: the minimal-window search, coverage at each w, and the local judge."""

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
)

from deepscholar.evaluation.metrics import get_metric, registry
from deepscholar.evaluation.metrics.core.claim_coverage import (
    METRIC,
    SUPPORT_COSINE,
    SWEEP_W_MAX,
    ClaimCoverage,
    configured_w_max,
    references_at,
)

QUERY = query_info(title="A QUERYTOPIC study", abstract="We study QUERYTOPIC in depth.")

# The crafted case: CAPITALISED words are the claims; a sentence is covered when the references contain all
# of its claims. Expected minimal windows in the comment of each sentence.
CASE = [
    ("QUERYTOPIC is studied here.", []),  # 0: by the query paper's own abstract, which is always there
    ("ALPHA improves retrieval [1].", [1]),  # 0
    ("It extends BETA to new domains.", []),  # 1: only through the neighbour's [2]
    ("BETA was proposed earlier [2].", [2]),  # 0
    ("GAMMA is related.", []),  # 2: [3] is cited two sentences later
    ("EPSILON is claimed without support.", []),  # never
    ("DELTA is covered [3].", [3]),  # 0
]
SOURCES = {1: "The ALPHA method.", 2: "BETA was proposed.", 3: "GAMMA and DELTA."}
MINIMA = [0, 0, 1, 0, 2, None, 0]
# Windows actually asked: EPSILON skips w3 (same sources as w2) and w5 (same as w4).
ASKED = [[0], [0], [0, 1], [0], [0, 1, 2], [0, 1, 2, 4], [0]]


def make_report(sentences, sources, *, query=QUERY, kind="deepscholar_base", report_id=1):
    return report_context(sentences=sentences, sources=sources, query=query, system_kind=kind, report_id=report_id)


def _blocks(prompt: str) -> tuple[str, str]:
    references, sentence = re.findall(r"<<<\n(.*?)\n>>>", prompt, re.DOTALL)
    return references, sentence


def _claims(text: str) -> set[str]:
    return set(re.findall(r"\b[A-Z]{3,}\b", text))


def keyword_answer(prompt: str) -> str:
    references, sentence = _blocks(prompt)
    ok = _claims(sentence) <= _claims(references)
    return f'{{"supported": {"true" if ok else "false"}, "explanation": "claims {sorted(_claims(sentence))}"}}'


def run(metric, report, client=None):
    client = client or ScriptedJudge(keyword_answer)
    return client, *judge_and_score(metric, report, client)


# The opt-in w = 0..5 sweep: what most of the tests below exercise (the monthly METRIC stops at w = 1).
SWEEP = ClaimCoverage(w_max=SWEEP_W_MAX)


def test_registered_with_headline_variants_and_version():
    assert get_metric("claim_coverage") is METRIC
    assert METRIC.headline == registry.headline_variant("claim_coverage") == "w1"
    # The monthly run asks only what the headline needs: windows 0 and 1.
    assert METRIC.variants == ("w0", "w1") and METRIC.version == "d2.wmax1+claim_coverage_v2"
    assert SWEEP.variants == ("w0", "w1", "w2", "w3", "w4", "w5")
    assert SWEEP.version == "d2.wmax5+claim_coverage_v2"
    assert ClaimCoverage(w_max=2).variants == ("w0", "w1", "w2")
    assert ClaimCoverage(w_max=2).version != METRIC.version
    with pytest.raises(ValueError):
        ClaimCoverage(w_max=0)


def test_minimal_windows_and_coverage_at_each_w():
    report = make_report(CASE, SOURCES)
    client, judgments, scores = run(SWEEP, report)
    assert [j.key for j in judgments] == [f"s{i}" for i in range(7)]
    assert [j.label["min_window"] for j in judgments] == MINIMA
    assert [j.label["asked"] for j in judgments] == ASKED
    assert [j.calls for j in judgments] == [len(a) for a in ASKED]
    assert len(client.asked) == 13 <= len(CASE) * (SWEEP.w_max + 1)
    assert {p for p, _ in client.asked} == {"metric.claim_coverage"}
    # Coverage grows with w: a formula that ignored w would give one number for all six.
    values = {v: s.value for v, s in scores.items()}
    assert values == pytest.approx({"w0": 4 / 7, "w1": 5 / 7, "w2": 6 / 7, "w3": 6 / 7, "w4": 6 / 7, "w5": 6 / 7})
    assert scores["w1"].details["n_covered"] == 5
    assert scores["w1"].details["min_window_counts"] == {"0": 4, "1": 1, "2": 1, "3": 0, "4": 0, "5": 0,
                                                         "none": 1}
    assert all(s.n_items == 7 and s.unscored_reason is None for s in scores.values())


def test_the_query_abstract_is_what_covers_an_uncited_sentence_at_w0():
    off_topic = query_info(title="Something else", abstract="Nothing in common.")
    _, with_abstract, _ = run(METRIC, make_report(CASE[:1], {}))
    _, without, _ = run(METRIC, make_report(CASE[:1], {}, query=off_topic))
    assert with_abstract[0].label == {"min_window": 0, "asked": [0]}
    assert without[0].label == {"min_window": None, "asked": [0]}  # one sentence: wider windows add nothing


def test_w_max_is_respected():
    metric = ClaimCoverage(w_max=1)
    client, judgments, scores = run(metric, make_report(CASE, SOURCES))
    # GAMMA needs w=2 and EPSILON is never covered: neither is asked beyond w=1.
    assert [j.label["min_window"] for j in judgments] == [0, 0, 1, 0, None, None, 0]
    assert max(w for j in judgments for w in j.label["asked"]) == 1
    assert len(client.asked) == 10
    assert set(scores) == {"w0", "w1"}
    assert scores["w1"].value == pytest.approx(5 / 7)


def test_references_are_the_query_paper_plus_resolved_sources_in_the_window():
    report = make_report(CASE + [("ZETA cites a missing source [9].", [9])], SOURCES)
    query = "A QUERYTOPIC study. We study QUERYTOPIC in depth."
    assert references_at(report, 2, 0) == (query,)
    assert references_at(report, 2, 1) == (query, SOURCES[1], SOURCES[2])
    assert references_at(report, 0, 50) == (query, *SOURCES.values())  # clipped; [9] has no source
    assert references_at(report, 7, 0) == (query,)
    # In the prompt, references are numbered by position, the query paper first; markers leave the sentence.
    client = ScriptedJudge(keyword_answer)
    METRIC.judge_llm(client, report, METRIC.items(report)[3])
    references, sentence = _blocks(client.asked[0][1])
    assert sentence == "BETA was proposed earlier."
    assert references == f"Reference 1 (the query paper):\n{query}\n\nReference 2:\n{SOURCES[2]}"


def test_coverage_follows_from_stored_minima_without_calls():
    report = make_report([(f"S{i}.", []) for i in range(4)], {})
    judgments = [item_judgment(f"s{i}", {"min_window": m, "asked": []}) for i, m in enumerate([0, 1, None, 3])]
    values = {s.variant: s.value for s in SWEEP.score(report, judgments)}
    assert values == {"w0": 0.25, "w1": 0.5, "w2": 0.5, "w3": 0.75, "w4": 0.75, "w5": 0.75}
    with pytest.raises(ValueError, match="min_window"):
        SWEEP.score(report, [*judgments[:3], item_judgment("s3", {"min_window": 6, "asked": []})])


def test_a_report_without_sentences_scores_zero():
    scores = METRIC.score(make_report([], {}), [])
    assert [(s.variant, s.value, s.unscored_reason) for s in scores] == [(v, 0.0, None) for v in METRIC.variants]
    assert scores[0].details["n_sentences"] == 0


def test_one_unscored_sentence_makes_every_variant_unscored():
    # GAMMA's judge answers w0 and w1 properly and then garbage at w2: the minimum is unknown. No re-asks,
    # so each window is one call.
    def answer(prompt):
        references, sentence = _blocks(prompt)
        return "covered, I think" if "GAMMA" in sentence and "DELTA" in references else keyword_answer(prompt)

    _, judgments, scores = run(SWEEP, make_report(CASE, SOURCES), ScriptedJudge(answer, max_reasks=0))
    failed = [j for j in judgments if not j.scored]
    assert [(j.key, j.calls) for j in failed] == [("s4", 3)]
    assert failed[0].unscored_reason.startswith("window 2: unparseable")
    for s in scores.values():
        assert s.value is None
        assert "1 of 7 items unscored; first: s4: window 2" in s.unscored_reason


@needs_model
def test_local_judge_on_a_tiny_case():
    query = query_info(title="Retrieval-Augmented Generation for Citing Research Papers",
                       abstract="We study retrieval-augmented generation for writing related-work sections.")
    report = make_report([
        ("We study retrieval-augmented generation for writing related-work sections.", []),
        ("Dense passage retrieval encodes questions and passages with two BERT encoders.", []),
        ("Passage retrievers are widely used [1].", [1]),
        ("Graph neural networks aggregate features from neighbouring nodes.", []),
    ], {1: "We present dense passage retrieval, in which a dual BERT encoder maps questions and passages to "
           "vectors. It beats BM25."}, query=query)
    judgments = METRIC.judge_local(report, METRIC.items(report))
    labels = [j.label for j in judgments]
    assert labels[0] == {"min_window": 0, "asked": [0]}  # the abstract itself
    assert labels[1] == {"min_window": 1, "asked": [0, 1]}  # only through the neighbour's [1]
    assert labels[3]["min_window"] is None and labels[3]["asked"] == [0, 1]  # w2.. add no new source
    assert all(j.calls == 0 and j.explanation.startswith("local embedding judge (all-MiniLM-L6-v2), not an LLM")
               for j in judgments)
    assert f"< {SUPPORT_COSINE}" in judgments[3].explanation
    assert METRIC.judge_local(report, METRIC.items(report)) == judgments  # deterministic
    assert {s.variant: s.value for s in METRIC.score(report, judgments)}["w0"] == pytest.approx(
        sum(x["min_window"] == 0 for x in labels) / 4)


def test_the_monthly_run_asks_no_window_beyond_the_headline():
    report = make_report(CASE, SOURCES)
    monthly, judgments, scores = run(METRIC, report)
    sweep, _, sweep_scores = run(SWEEP, report)
    assert len(monthly.asked) < len(sweep.asked)
    # Same headline either way: windows past 1 never change coverage at w = 1.
    assert scores["w1"].value == sweep_scores["w1"].value


@pytest.mark.parametrize(("raw", "expected"), [("", 1), ("5", 5), ("3", 3), ("0", 1), ("9", 1), ("all", 1)])
def test_the_sweep_is_opt_in_through_the_environment(monkeypatch, raw, expected):
    monkeypatch.setenv("DEEPSCHOLAR_CLAIM_COVERAGE_W_MAX", raw)
    assert configured_w_max() == expected
