"""Document importance on hand-made reports: DI = min(median cites(S) / median cites(S*), 1)."""

from __future__ import annotations

import pytest
from support.metric_support import cited_report, exemplar_reference, source_doc

from deepscholar.evaluation.metrics import get_metric
from deepscholar.evaluation.metrics.core.document_importance import METRIC, document_importance


def ref(key: str, arxiv_id: str | None, count: int | None):
    return exemplar_reference(key, arxiv_id, f"title {key}", cited_by_count=count)


def src(idx: int, arxiv_id: str | None, count: int | None):
    return source_doc(idx, arxiv_id=arxiv_id, title=f"source {idx}", cited_by_count=count)


def report(sources, refs, cited=None, kind: str = "search_agent"):
    return cited_report(sources, refs, cited, kind=kind)


def di(ctx):
    (score,) = METRIC.score(ctx, [])
    assert score.variant == "score"
    return score


REFS_60 = [ref("a", "2001.00001", 60), ref("b", "2001.00002", 60)]


def test_registered_judge_free_and_versioned():
    assert get_metric("document_importance") is METRIC
    assert METRIC.version == "d2" and METRIC.headline == "score" and METRIC.variants == ("score",)
    ctx = report([src(1, "2101.00001", 5)], REFS_60)
    assert METRIC.items(ctx) == [] and METRIC.judge_local(ctx, []) == []


def test_one_paper_under_two_written_forms_of_its_id_counts_once_on_both_sides():
    """d1 compared the stored ids by hand: `hep-th/9901001v2` and `HEP-TH/9901001` were two papers of S, and
    an id and its arxiv.org URL two papers of S*."""
    sources = [src(1, "hep-th/9901001v2", None), src(2, "HEP-TH/9901001", 30), src(3, "2101.00003", 90)]
    refs = [ref("a", "2001.00001", 60), ref("a2", "https://arxiv.org/abs/2001.00001", None), ref("b", "2001.00002", 60)]
    score = di(report(sources, refs))
    assert score.details["n_sources"] == 2 and score.details["n_exemplar_arxiv"] == 2
    assert score.details["median_sources"] == 60 and score.value == 1.0  # the paper's count is its entries' first


def test_median_not_mean_with_an_even_count():
    # S counts 10, 20, 40, 1000: median 30 (mean 267.5 would be capped to 1). S* median 60.
    sources = [src(1, "2101.00001", 10), src(2, "2101.00002", 1000), src(3, "2101.00003", 20),
               src(4, "2101.00004", 40)]
    score = di(report(sources, REFS_60))
    assert score.value == pytest.approx(0.5)
    assert score.details["median_sources"] == 30 and score.details["median_exemplar"] == 60


def test_exemplar_side_is_a_median_too():
    refs = [ref("a", "2001.00001", 10), ref("b", "2001.00002", 30), ref("c", "2001.00003", 5000)]
    score = di(report([src(1, "2101.00001", 15)], refs))
    assert score.value == pytest.approx(15 / 30)


def test_capped_at_one():
    score = di(report([src(1, "2101.00001", 600)], REFS_60))
    assert score.value == 1.0 and score.details["ratio"] == pytest.approx(10.0) and score.details["capped"]


def test_no_sources_is_zero_a_score():
    score = di(report([], REFS_60))
    assert score.value == 0.0 and score.unscored_reason is None
    # Sources that are not arXiv papers are not in S either.
    assert di(report([src(1, None, 500)], REFS_60)).value == 0.0


def test_sources_without_a_count_are_left_out_of_the_median():
    sources = [src(1, "2101.00001", None), src(2, "2101.00002", 30), src(3, "2101.00003", None)]
    score = di(report(sources, REFS_60))
    assert score.value == pytest.approx(30 / 60)  # not median(0, 30, 0) = 0
    assert score.details["n_sources"] == 3 and score.details["n_sources_with_count"] == 1
    assert score.details["sources_missing_count"] == ["2101.00001", "2101.00003"]


def test_no_source_count_is_unscored():
    score = di(report([src(1, "2101.00001", None)], REFS_60))
    assert score.value is None and "none of the report's 1 cited arXiv papers" in score.unscored_reason


def test_exemplar_without_counts_or_median_zero_is_unscored():
    no_counts = di(report([src(1, "2101.00001", 5)], [ref("a", "2001.00001", None), ref("b", None, 50)]))
    assert no_counts.value is None and "no frozen cited-by count" in no_counts.unscored_reason
    # The query's failure is the same for a report that cites nothing.
    assert di(report([], [ref("a", "2001.00001", None)])).value is None
    zero = di(report([src(1, "2101.00001", 5)], [ref("a", "2001.00001", 0), ref("b", "2001.00002", 0),
                                                  ref("c", "2001.00003", 7)]))
    assert zero.value is None and "is 0" in zero.unscored_reason


def test_exemplar_references_off_arxiv_and_missing_counts_are_not_in_s_star():
    refs = [ref("a", "2001.00001", 40), ref("b", None, 1_000_000), ref("c", "2001.00002", None)]
    assert di(report([src(1, "2101.00001", 20)], refs)).value == pytest.approx(20 / 40)


def test_a_paper_cited_twice_or_left_uncited_counts_as_in_s():
    sources = [src(1, "2101.00001", 10), src(2, "2101.00001", 10), src(3, "2101.00002", 50),
               src(4, "2101.00003v2", 1000), src(5, "2101.00003v1", 1000)]
    # Cited: [1] [2] [3] [4] [5] -> distinct ids 00001 (10), 00002 (50), 00003 (1000): median 50.
    assert di(report(sources, [ref("a", "2001.00001", 100)])).value == pytest.approx(0.5)
    # [3] only in the bibliography: S = {00001 (10)}.
    assert di(report(sources, [ref("a", "2001.00001", 100)], cited=[1, 2])).value == pytest.approx(0.1)


def test_human_exemplar_is_one_by_construction():
    score = di(report([src(1, "2101.00001", 1)], REFS_60, kind="human_exemplar"))
    assert score.value == 1.0 and score.details == {"by_construction": True}


def test_pure_function_on_counts():
    value, reason, details = document_importance({"x": 3, "y": 9}, {"p": 12, "q": None})
    assert (value, reason) == (pytest.approx(6 / 12), None) and details["n_exemplar_with_count"] == 1
