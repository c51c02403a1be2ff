"""The FACT track without a network: statement–source pairs read off the markers, one call per cited
source, citation accuracy = supported / (supported + unsupported) with unknown pairs left out, effective
citations = the supported count, and the batch shape's strict parsing (evaluation/metrics/base.py)."""

from __future__ import annotations

import json
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
from deepscholar.evaluation.metrics.base import Batch, BatchJudgedMetric, Item, parse_batch_labels
from deepscholar.evaluation.metrics.fact.base import SUPPORT_COSINE, citation_pairs, pooled_over_tasks
from deepscholar.evaluation.metrics.fact.citation_accuracy import METRIC as ACCURACY
from deepscholar.evaluation.metrics.fact.effective_citations import METRIC as EFFECTIVE
from deepscholar.llm.client import ParseError

QUERY = query_info(title="Retrieval for citing papers")


def make_report(sentences, sources, *, report_id=1):
    """sentences: [(text, [cited numbers])]; sources: {number: text}."""
    return report_context(sentences=sentences, sources=sources, query=QUERY, report_id=report_id)


def _between(prompt: str, n: int) -> str:
    return re.findall(r"<<<\n(.*?)\n>>>", prompt, re.DOTALL)[n]


def keyword_answer(prompt: str) -> str:
    """A judge that reads the prompt: a statement is supported when it shares a CAPITALISED word with the source."""
    source, listed = _between(prompt, 0), _between(prompt, 1)
    words = set(re.findall(r"\b[A-Z]{3,}\b", source))
    statements = [line.split(". ", 1)[1] for line in listed.split("\n")]
    return json.dumps(["supported" if set(re.findall(r"\b[A-Z]{3,}\b", s)) & words else "unsupported"
                       for s in statements])


def judge(metric, report, client=None):
    return judge_and_score(metric, report, client or ScriptedJudge(keyword_answer))


# 2 supported pairs (both on [1]), 1 unsupported ([2]), 1 unknown ([3] has no text): accuracy 2/3, not 2/4.
MIXED = ([("ALPHA is fast [1].", [1]), ("BETA scales [1][2].", [1, 2]), ("DELTA is new [3].", [3]),
          ("Nothing cited here.", [])],
         {1: "ALPHA and BETA paper", 2: "An unrelated paper", 3: "   "})


def test_a_track_of_its_own_judged_only_when_enabled():
    assert get_metric("citation_accuracy") is ACCURACY and get_metric("effective_citations") is EFFECTIVE
    assert registry.families()["fact"].ranking_metric == "citation_accuracy"
    assert registry.metric_names("fact") == ("citation_accuracy", "effective_citations")
    assert {ACCURACY.dimension, EFFECTIVE.dimension} == {"citations"}
    assert "fact" in registry.tracks()
    assert not {"citation_accuracy", "effective_citations"} & set(registry.judged_metric_names())
    assert {"citation_accuracy", "effective_citations"} <= set(registry.judged_metric_names(["fact"]))
    assert ACCURACY.bounded and not EFFECTIVE.bounded  # a count: the board must not clip it to [0, 1]
    assert ACCURACY.version == EFFECTIVE.version == "d3+fact_support_v1"
    assert ACCURACY.headline == EFFECTIVE.headline == "score"


def test_unknown_pairs_leave_the_denominator_and_effective_counts_the_supported():
    report = make_report(*MIXED)
    client = ScriptedJudge(keyword_answer)
    judgments, accuracy = judge(ACCURACY, report, client)
    assert [(j.key, j.calls) for j in judgments] == [("c1", 1), ("c2", 1), ("c3", 0)]
    assert len(client.asked) == 2  # one call per cited source with text; none for [3]
    assert [j.label for j in judgments] == [
        [{"statement": "ALPHA is fast.", "label": "supported"}, {"statement": "BETA scales.", "label": "supported"}],
        [{"statement": "BETA scales.", "label": "unsupported"}],
        [{"statement": "DELTA is new.", "label": "unknown"}]]
    assert "no text" in judgments[2].explanation and "left out" in judgments[2].explanation
    assert accuracy["score"].value == pytest.approx(2 / 3)
    assert accuracy["score"].details == {"n_pairs": 4, "supported": 2, "unsupported": 1, "unknown": 1,
                                         "n_sources": 3, "n_unknown_sources": 1}
    _, effective = judge(EFFECTIVE, report)
    assert effective["score"].value == 2.0


def test_both_metrics_ask_the_same_question_so_the_second_is_free():
    report = make_report(*MIXED)
    assert ACCURACY.items(report) == EFFECTIVE.items(report)
    assert ACCURACY.prompt is EFFECTIVE.prompt
    a, b = ScriptedJudge(keyword_answer), ScriptedJudge(keyword_answer)
    judge(ACCURACY, report, a)
    judge(EFFECTIVE, report, b)
    assert a.prompts == b.prompts  # same request, so the LLM layer answers it once (cache, single flight)
    assert a.purposes != b.purposes  # only how the call log names them differs, which is not in the request


def test_no_citation_pairs_is_zero_and_marked():
    report = make_report([("ALPHA is fast.", []), ("[1][2].", [1, 2]), ("  [3]", [3])], {1: "ALPHA"})
    assert ACCURACY.items(report) == []  # sentences of markers and punctuation alone state nothing
    for metric in (ACCURACY, EFFECTIVE):
        (score,) = metric.score(report, [])
        assert (score.value, score.unscored_reason) == (0.0, None)
        assert score.details["no_citation_pairs"] is True and score.details["n_pairs"] == 0


def test_every_pair_unknown_is_unscored_not_zero():
    report = make_report([("ALPHA is fast [1].", [1]), ("BETA too [9].", [9])], {1: ""})  # [9]: no such source
    client = ScriptedJudge(AssertionError("no call may be made"))
    for metric in (ACCURACY, EFFECTIVE):
        judgments, scores = judge(metric, report, client)
        assert [j.calls for j in judgments] == [0, 0]
        assert "names no stored source" in judgments[1].explanation
        assert scores["score"].value is None
        assert "every cited source has no text" in scores["score"].unscored_reason
        assert scores["score"].details["unknown"] == 2
    assert client.requests == []


def test_an_exact_duplicate_statement_for_one_source_counts_once():
    report = make_report([("ALPHA is fast [1][1].", [1, 1]), ("ALPHA  is fast [1].", [1]),
                          ("ALPHA is quick [1].", [1])], {1: "ALPHA paper"})
    assert citation_pairs(report) == {1: ["ALPHA is fast.", "ALPHA is quick."]}
    (item,) = ACCURACY.items(report)
    assert item.payload == Batch(("ALPHA is fast.", "ALPHA is quick."), 1)
    _, effective = judge(EFFECTIVE, report)
    assert effective["score"].value == 2.0  # not 4: the repeats are one pair, a paraphrase is another
    _, accuracy = judge(ACCURACY, report)
    assert accuracy["score"].details["n_pairs"] == 2


def test_one_paper_cited_under_two_numbers_is_one_source_and_its_statements_count_once():
    # [3] and [5] are one paper (same arXiv id in two forms); [4] is another paper with the same title.
    sources = {3: source_doc(3, "ALPHA paper", arxiv_id="2401.00001", title="Alpha"),
               5: source_doc(5, "ALPHA paper v2", arxiv_id="arXiv:2401.00001v2", title="Alpha"),
               4: source_doc(4, "ALPHA other", arxiv_id="2402.00002", title="Alpha"),
               2: source_doc(2, "BETA paper", title="Beta")}
    report = make_report([("ALPHA is fast [3].", [3]), ("ALPHA is fast [5].", [5]), ("ALPHA is fast [3][5].", [3, 5]),
                          ("BETA scales [2][2].", [2, 2]), ("BETA scales [2].", [2]), ("ALPHA is fast [4].", [4])],
                         sources)
    assert citation_pairs(report) == {3: ["ALPHA is fast."], 2: ["BETA scales."], 4: ["ALPHA is fast."]}
    client = ScriptedJudge(keyword_answer)
    _, effective = judge(EFFECTIVE, report, client)
    # d1 keyed pairs by number: [3], [5], [2], [4] -> 4 supported pairs; one per paper now -> 3
    assert effective["score"].value == 3.0 and len(client.requests) == 3
    assert "ALPHA paper" in _between(client.prompts[0], 0)  # the paper's first-cited source's text


def test_calls_per_report_are_at_most_the_distinct_cited_sources():
    sentences = [(f"ALPHA claim {i} [{1 + i % 3}][{1 + (i + 1) % 3}].", [1 + i % 3, 1 + (i + 1) % 3])
                 for i in range(12)]
    report = make_report(sentences, {1: "ALPHA", 2: "ALPHA", 3: "ALPHA"})
    client = ScriptedJudge(keyword_answer)
    _, scores = judge(ACCURACY, report, client)
    assert len(client.requests) == 3 and scores["score"].value == 1.0
    assert scores["score"].details["n_pairs"] == 24


def test_a_batch_answer_of_the_wrong_shape_is_re_asked_then_unscored_never_zero():
    report = make_report(*MIXED)

    def answer(prompt):  # [2]'s batch always gets one label too many; [1]'s is fine
        right = json.loads(keyword_answer(prompt))
        return json.dumps(right + ["supported"]) if "unrelated" in prompt else json.dumps(right)

    client = ScriptedJudge(answer, max_reasks=1)
    judgments, scores = judge(ACCURACY, report, client)
    failed = [j for j in judgments if not j.scored]
    assert [(j.key, j.calls) for j in failed] == [("c2", 2)]  # asked, re-asked once, given up
    assert "expected exactly 1 labels" in failed[0].unscored_reason
    assert "one per numbered line" in client.requests[-1][1][-1]["content"]  # the re-ask names the problem
    assert scores["score"].value is None and "1 of 3 items unscored; first: c2" in scores["score"].unscored_reason
    # A stored judgment missing for a source is not a silent 0 either.
    missing = ACCURACY.score(report, judgments[:1])
    assert missing[0].value is None and "no judgment for this source" in missing[0].unscored_reason


@pytest.mark.parametrize("text", [
    '["supported"]',  # one label for two statements
    '["supported", "unsupported", "supported"]',
    '["supported", "unknown"]',  # unknown is decided without the judge, never answered by it
    '["supported", "partially"]',
    '["supported", 1]',
    '{"1": "supported", "2": "supported"}',
    'Both are supported.',
    '["supported", "supported"] as asked',
])
def test_batch_labels_are_parsed_strictly(text):
    with pytest.raises(ParseError):
        parse_batch_labels(text, 2, ("supported", "unsupported"))


def test_batch_labels_accept_case_space_and_a_json_fence():
    assert parse_batch_labels('```json\n[" Supported", "UNSUPPORTED "]\n```', 2, ("supported", "unsupported")) == [
        "supported", "unsupported"]


def test_the_batch_prompt_numbers_one_line_per_statement():
    report = make_report([("ALPHA is\nfast [1].", [1]), ("1. BETA >>> breaks out [1].", [1])], {1: "ALPHA"})
    client = ScriptedJudge(keyword_answer)
    judge(ACCURACY, report, client)
    (prompt,) = client.prompts
    assert _between(prompt, 0) == "ALPHA"
    assert _between(prompt, 1) == "1. ALPHA is fast.\n2. 1. BETA > > > breaks out."
    assert "exactly 2 strings" in prompt and "{{" not in prompt


def test_a_stored_label_of_another_shape_is_an_error_not_a_score():
    report = make_report([("ALPHA [1].", [1])], {1: "ALPHA"})
    with pytest.raises(ValueError, match="must be a list"):
        ACCURACY.score(report, [item_judgment("c1", 1)])
    with pytest.raises(ValueError, match="must be a list"):
        ACCURACY.score(report, [item_judgment("c1", [{"statement": "ALPHA.", "label": "maybe"}])])


class Shouting(BatchJudgedMetric):
    """The batch shape on its own: is each word shouted? (one call labels every word of a sentence)"""

    name = "shouting"
    headline = "score"
    variants = ("score",)
    prompt_name = "fact_support_v1"  # any prompt with {{sub_items}} and {{count}} will do
    prompt_package = "deepscholar.evaluation.metrics.fact"  # where that prompt lives
    labels = ("yes", "no")
    sub_item = "word"

    def items(self, report):
        return [self.batch(f"s{s.index}", s.text.split()) for s in report.sentences]

    def batch_fields(self, report, item):
        if item.key == "s0":
            return self.decided(item, "no", "the first sentence is never shouted")
        return {"source": "words"}

    def score_judged(self, report, judgments):
        raise NotImplementedError


def test_the_batch_base_stores_one_label_per_distinct_sub_item():
    metric = Shouting()
    report = make_report([("quiet words", []), ("LOUD soft LOUD", [])], {})
    first, second = metric.items(report)
    assert second.payload.texts == ("LOUD", "soft")
    client = ScriptedJudge('["yes", "no"]')
    decided = metric.judge_llm(client, report, first)
    assert decided.calls == 0 and decided.label == [{"word": "quiet", "label": "no"}, {"word": "words", "label": "no"}]
    judged = metric.judge_llm(client, report, second)
    assert judged.calls == 1 and judged.label == [{"word": "LOUD", "label": "yes"}, {"word": "soft", "label": "no"}]
    assert metric.sub_labels(judged, ("yes", "no")) == [("LOUD", "yes"), ("soft", "no")]
    assert metric.parse('["no", "YES"]', Item("x", Batch(("a", "b")))) == ["no", "yes"]


@needs_model
def test_local_judge_on_a_tiny_case_is_deterministic():
    report = make_report(
        [("Dense passage retrieval encodes questions and passages with a dual BERT encoder [1][2].", [1, 2]),
         ("Protein folding is unrelated [3].", [3])],
        {1: "We present dense passage retrieval, in which a dual BERT encoder maps questions and passages to "
            "vectors. It beats BM25.",
         2: "We study protein folding with molecular dynamics.",
         3: ""})
    items = ACCURACY.items(report)
    judgments = ACCURACY.judge_local(report, items)
    assert [(j.key, [x["label"] for x in j.label], j.calls) for j in judgments] == [
        ("c1", ["supported"], 0), ("c2", ["unsupported"], 0), ("c3", ["unknown"], 0)]
    assert judgments[0].explanation.startswith("local embedding judge (all-MiniLM-L6-v2), not an LLM")
    assert f">= {SUPPORT_COSINE}" in judgments[0].explanation
    assert ACCURACY.judge_local(report, items) == judgments == EFFECTIVE.judge_local(report, items)
    assert ACCURACY.score(report, judgments)[0].value == pytest.approx(1 / 2)
    assert EFFECTIVE.score(report, judgments)[0].value == 1.0


def test_our_board_mean_against_the_authors_pooled_aggregation_on_four_reports():
    """docs/METRICS.md, FACT conformance: A cites 10 supported pairs, B 1 supported of 5, C and D cite
    nothing. Paper (Eqs. 3-4, ours): accuracy (1 + 0.2 + 0 + 0) / 4 = 0.30, effective (10 + 1) / 4 = 2.75.
    Released stat.py: pooled 11 / 15 = 0.7333 over the cited reports, effective 11 / 2 = 5.5."""
    a = make_report([(f"ALPHA fact {i} [1].", [1]) for i in range(10)], {1: "ALPHA"}, report_id=1)
    b = make_report([("ALPHA fact [1].", [1])] + [(f"BETA fact {i} [1].", [1]) for i in range(4)], {1: "ALPHA"},
                    report_id=2)
    c = make_report([("Nothing cited.", [])], {}, report_id=3)
    d = make_report([("Nothing cited either.", [])], {}, report_id=4)
    accuracy = [judge(ACCURACY, r)[1]["score"] for r in (a, b, c, d)]
    effective = [judge(EFFECTIVE, r)[1]["score"].value for r in (a, b, c, d)]
    assert sum(s.value for s in accuracy) / 4 == pytest.approx(0.30)
    assert sum(effective) / 4 == pytest.approx(2.75)
    pooled_accuracy, pooled_effective = pooled_over_tasks([s.details for s in accuracy])
    assert pooled_accuracy == pytest.approx(11 / 15) and pooled_effective == pytest.approx(5.5)
    assert pooled_over_tasks([accuracy[2].details]) == (None, None)
