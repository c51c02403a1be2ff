"""Nugget coverage without a network: batching, the four variants, unscored cases and the local judge."""

from __future__ import annotations

import json

import pytest
from support.metric_support import ScriptedJudge, item_judgment, needs_model, query_info, report_context

from deepscholar.evaluation.metrics import get_metric
from deepscholar.evaluation.metrics.base import Metric, NuggetInfo, unscored_item
from deepscholar.evaluation.metrics.core.nugget_coverage import (
    BATCH_SIZE,
    METRIC,
    coverage,
    parse_nugget_labels,
    strip_citation_numbers,
)
from deepscholar.llm.client import ParseError

REPORT_TEXT = (
    "Retrieval-augmented generation conditions a language model on passages retrieved from Wikipedia [1]. "
    "Dense retrievers with dual encoders beat BM25 for open-domain question answering [2][3].\n"
)


def make_report(nuggets=(), *, kind: str = "llm", text: str = REPORT_TEXT):
    query = query_info(title="Citing with retrieval", abstract="We write cited related-work sections.",
                       exemplar_text="x [@a].", nuggets=nuggets)
    return report_context(text=text, query=query, report_id=7, system_kind=kind)


def nuggets(*importances: str) -> list[NuggetInfo]:
    return [NuggetInfo(i, f"fact number {i}", imp) for i, imp in enumerate(importances)]


def label(batch_nuggets, labels) -> dict:
    return {"nugget_idx": [n.idx for n in batch_nuggets], "labels": list(labels)}


def scores_of(report, judgments) -> dict:
    return {s.variant: s for s in METRIC.score(report, judgments)}


def test_registry_and_protocol():
    assert get_metric("nugget_coverage") is METRIC and isinstance(METRIC, Metric)
    assert METRIC.variants == ("strict_all", "all", "strict_vital", "vital")
    assert METRIC.headline == "strict_all"
    assert METRIC.version == "d2+nugget_coverage_v2"


def test_items_are_batches_of_ten_in_nugget_idx_order():
    stored = [NuggetInfo(i, f"n{i}", "okay") for i in reversed(range(3, 26))]  # 23 nuggets, idx 3..25
    items = METRIC.items(make_report(stored))
    assert BATCH_SIZE == 10
    assert [i.key for i in items] == ["nuggets:3-12", "nuggets:13-22", "nuggets:23-25"]
    assert [len(i.payload) for i in items] == [10, 10, 3]
    assert [n.idx for n in items[0].payload] == list(range(3, 13))


def test_variants_with_partials_and_a_vital_subset():
    ns = nuggets("vital", "vital", "okay", "okay")
    report = make_report(ns)
    judgments = [item_judgment("nuggets:0-3", label(ns, ["support", "partial_support", "partial_support",
                                                        "not_support"]))]
    s = scores_of(report, judgments)
    assert s["strict_all"].value == 0.25  # 1 support of 4
    assert s["all"].value == 0.5  # (1 + 0.5 * 2) / 4: partials count half, only here
    assert s["strict_vital"].value == 0.5  # over the 2 vital nuggets only
    assert s["vital"].value == 0.75  # (1 + 0.5) / 2
    assert all(x.unscored_reason is None and x.n_items == 1 for x in s.values())
    assert s["all"].details["partial_support"] == 2 and s["all"].details["n_vital"] == 2


def test_labels_from_several_batches_are_pooled_per_nugget():
    ns = [NuggetInfo(i, f"n{i}", "vital" if i % 3 == 0 else "okay") for i in range(12)]
    report = make_report(ns)
    first = item_judgment("nuggets:0-9", label(ns[:10], ["support"] * 10))
    second = item_judgment("nuggets:10-11", label(ns[10:], ["not_support", "partial_support"]))
    s = scores_of(report, [first, second])
    assert s["strict_all"].value == pytest.approx(10 / 12)
    assert s["all"].value == pytest.approx(10.5 / 12)
    assert s["strict_vital"].value == 1.0 and s["vital"].value == 1.0  # vital: 0, 3, 6, 9


def test_a_label_for_a_nugget_the_query_no_longer_has_is_not_counted():
    ns = nuggets("vital", "okay")
    stale = [*ns, NuggetInfo(99, "gone", "vital")]
    s = scores_of(make_report(ns), [item_judgment("nuggets:0-99", label(stale, ["not_support", "support",
                                                                               "support"]))])
    assert s["strict_all"].value == 0.5 and s["strict_vital"].value == 0.0


def test_no_vital_nuggets_leaves_only_the_vital_variants_unscored():
    ns = nuggets("okay", "okay")
    s = scores_of(make_report(ns), [item_judgment("nuggets:0-1", label(ns, ["support", "not_support"]))])
    assert s["strict_all"].value == 0.5 and s["all"].value == 0.5
    for v in ("strict_vital", "vital"):
        assert s[v].value is None and s[v].unscored_reason == "the query has no vital nuggets"


def test_no_nuggets_leaves_every_variant_unscored():
    report = make_report(())
    assert METRIC.items(report) == []
    s = scores_of(report, [])
    assert all(x.value is None and "no nuggets" in x.unscored_reason for x in s.values())
    assert set(s) == set(METRIC.variants)


def test_one_unscored_batch_makes_every_variant_unscored():
    ns = [NuggetInfo(i, f"n{i}", "vital") for i in range(12)]
    judgments = [item_judgment("nuggets:0-9", label(ns[:10], ["support"] * 10)),
                 unscored_item("nuggets:10-11", "expected exactly 2 labels, got 1", 3)]
    s = scores_of(make_report(ns), judgments)
    # Not 1.0 over the ten that were judged: the two unjudged nuggets stay in the denominator.
    assert all(x.value is None and "nuggets:10-11" in x.unscored_reason for x in s.values())


def test_a_missing_batch_is_unscored_not_a_smaller_denominator():
    ns = [NuggetInfo(i, f"n{i}", "vital") for i in range(12)]
    s = scores_of(make_report(ns), [item_judgment("nuggets:0-9", label(ns[:10], ["support"] * 10))])
    assert all(x.value is None and "2 of 12 nuggets have no label" in x.unscored_reason for x in s.values())


def test_human_exemplar_is_one_by_construction():
    report = make_report(nuggets("vital", "okay"), kind="human_exemplar")
    assert METRIC.items(report) == []
    s = scores_of(report, [])
    assert all(x.value == 1.0 and x.details == {"by_construction": True} for x in s.values())


def test_coverage_helper():
    assert coverage(["support", "partial_support", "not_support", "not_support"]) == (0.25, 0.375)


def test_parse_nugget_labels_is_strict():
    assert parse_nugget_labels('["support", " Partial_Support ", "not_support"]', 3) == [
        "support", "partial_support", "not_support"]
    for bad in ('["support"]', '["support", "maybe", "support"]', '{"labels": []}', "support, support, no",
                '["support", 1, "support"]'):
        with pytest.raises(ParseError):
            parse_nugget_labels(bad, 3)


def test_prompt_lists_the_batch_and_asks_for_exactly_that_many_labels():
    ns = nuggets("vital", "okay", "vital")
    report = make_report(ns)
    client = ScriptedJudge('["support", "not_support", "partial_support"]')
    [item] = METRIC.items(report)
    j = METRIC.judge_llm(client, report, item)
    assert j.scored
    assert j.label == {"nugget_idx": [0, 1, 2], "labels": ["support", "not_support", "partial_support"]}
    json.dumps(j.label)
    prompt = client.prompts[0]
    assert client.purposes == ["metric.nugget_coverage"]
    assert "1. fact number 0\n2. fact number 1\n3. fact number 2" in prompt
    assert "exactly 3 strings" in prompt and REPORT_TEXT.strip() in prompt

    bad = METRIC.judge_llm(ScriptedJudge('["support"]'), report, item)
    assert not bad.scored and "expected exactly 3 labels, got 1" in bad.unscored_reason


def test_strip_citation_numbers():
    assert strip_citation_numbers("Dense retrievers win [2][3], mostly [4, 5] \\[6\\].") == (
        "Dense retrievers win, mostly.")


@needs_model
def test_local_judge_labels_by_best_sentence_cosine():
    ns = [NuggetInfo(0, "Retrieval-augmented generation conditions a language model on retrieved passages.",
                     "vital"),
          NuggetInfo(1, "Dense passage retrieval uses dual encoders for open-domain question answering.",
                     "okay"),
          NuggetInfo(2, "Adam is a stochastic optimiser for training neural networks.", "vital")]
    report = make_report(ns)
    [j] = METRIC.judge_local(report, METRIC.items(report))
    assert j.label["labels"][0] == "support"
    assert j.label["labels"][1] in ("support", "partial_support")
    assert j.label["labels"][2] == "not_support"
    assert j.explanation.startswith("local embedding judge (all-MiniLM-L6-v2), not an LLM")
    assert METRIC.judge_local(report, METRIC.items(report)) == [j]  # deterministic
    s = scores_of(report, [j])
    assert s["strict_vital"].value == 0.5

    empty = make_report(ns, text="")
    [e] = METRIC.judge_local(empty, METRIC.items(empty))
    assert e.label["labels"] == ["not_support"] * 3
