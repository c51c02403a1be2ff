"""Reference coverage on hand-made reports: RC = |S ∩ E| / |E| over papers. S and E are on arXiv, so since
d2 the arXiv ids decide (a title match only pairs papers where one side lacks an id: tests/unit/
test_paper_identity.py covers the title step)."""

from __future__ import annotations

import pytest
from support.metric_support import cited_report, exemplar_reference, source_doc

from deepscholar.evaluation.metrics import get_metric
from deepscholar.evaluation.metrics.core.reference_coverage import METRIC, match_important

DPR = "Dense Passage Retrieval for Open-Domain Question Answering"
AT_080 = "Dense Passage Open-Domain Question Answering Systems"  # similarity exactly 0.80 to DPR


def ref(key: str, arxiv_id: str | None, title: str, important: bool | None = True):
    return exemplar_reference(key, arxiv_id, title, is_important=important)


def src(idx: int, arxiv_id: str | None, title: str):
    return source_doc(idx, title, arxiv_id=arxiv_id, title=title)


def report(sources, refs, cited=None, kind: str = "deepscholar_base"):
    return cited_report(sources, refs, cited, kind=kind)


def rc(ctx):
    (score,) = METRIC.score(ctx, [])
    assert score.variant == "score"
    return score


def test_registered_judge_free_and_versioned():
    assert get_metric("reference_coverage") is METRIC
    assert METRIC.version == "d3" and METRIC.headline == "score" and METRIC.variants == ("score",)
    ctx = report([src(1, "2004.04906", DPR)], [ref("dpr", "2004.04906", DPR)])
    assert METRIC.items(ctx) == [] and METRIC.judge_local(ctx, []) == []


def test_ratio_over_important_arxiv_references():
    refs = [ref("a", "2101.00001", "Alpha graphs"), ref("b", "2101.00002", "Beta retrieval"),
            ref("c", "2101.00003", "Gamma nets"), ref("d", "2101.00004", "Delta models")]
    sources = [src(1, "2101.00001", "x"), src(2, "2101.00003", "y"), src(3, "2201.00009", "z")]
    score = rc(report(sources, refs))
    assert score.value == pytest.approx(2 / 4)  # not 2/3 (|S|) nor 2/5
    assert score.details["n_important"] == 4 and score.details["n_sources"] == 3
    assert score.details["unmatched"] == ["b", "d"]


def test_id_match_ignores_versions():
    refs = [ref("a", "2004.04906v2", "Something"), ref("b", "2101.00002", "Other")]
    score = rc(report([src(1, "2004.04906v1", "Unrelated title"), src(2, "2101.00002v3", "Another")], refs))
    assert score.value == 1.0
    assert [(m["cite_key"], m["by"], m["arxiv_id"]) for m in score.details["matched"]] == [
        ("a", "id", "2004.04906"), ("b", "id", "2101.00002")]


def test_a_different_arxiv_id_is_a_different_paper_however_close_the_title():
    # d1 matched these by title (DPR exactly, AT_080 at 0.80) and scored 1.0.
    refs = [ref("dpr", "2004.04906", DPR)]
    for title in (DPR, AT_080):
        miss = rc(report([src(1, "2999.00001", title)], refs))
        assert miss.value == 0.0 and miss.details["matched"] == []


def test_ddim_does_not_cover_ddpm():
    refs = [ref("ddpm", "2006.11239", "Denoising Diffusion Probabilistic Models")]
    score = rc(report([src(1, "2010.02502", "Denoising Diffusion Implicit Models")], refs))
    assert score.value == 0.0 and score.details["unmatched"] == ["ddpm"]


def test_one_paper_cited_under_two_forms_of_its_id_counts_once():
    refs = [ref("dpr", "2004.04906", DPR), ref("other", "2101.00002", "Sparse lexical matching at scale")]
    sources = [src(1, "2004.04906v1", DPR), src(2, "arXiv:2004.04906v2", "DPR")]
    score = rc(report(sources, refs))
    assert score.value == pytest.approx(1 / 2) and score.details["n_sources"] == 1


def test_an_old_style_id_in_any_written_case_is_one_paper():
    refs = [ref("st", "hep-th/9901001", "Strings"), ref("other", "2101.00002", "Sparse lexical matching at scale")]
    sources = [src(1, "https://arxiv.org/abs/HEP-TH/9901001v1", "Strings, the preprint"), src(2, "hep-th/9901001v2", "x")]
    score = rc(report(sources, refs))
    assert score.value == pytest.approx(1 / 2) and score.details["n_sources"] == 1
    assert score.details["matched"][0]["arxiv_id"] == "hep-th/9901001"


def test_one_reference_matched_by_two_sources_counts_once():
    refs = [ref("dpr", "2004.04906", DPR), ref("other", "2101.00002", "Sparse lexical matching at scale")]
    sources = [src(1, "2004.04906", DPR), src(2, "2999.00001", DPR + " revisited"), src(3, "2004.04906", DPR)]
    score = rc(report(sources, refs))
    assert score.value == pytest.approx(1 / 2)
    assert [(m["cite_key"], m["by"], m["source_idx"]) for m in score.details["matched"]] == [("dpr", "id", 1)]


def test_cited_but_not_important_and_important_but_uncited_do_not_count():
    refs = [ref("imp", "2101.00001", "Important paper"),
            ref("minor", "2101.00002", "Minor paper", important=False),
            ref("offarxiv", None, "Off arXiv paper")]
    sources = [src(1, "2101.00002", "Minor paper"), src(2, "2101.00001", "Important paper"),
               src(3, "2999.00003", "Off arXiv paper")]
    # [2] is in the bibliography but never cited in the text.
    score = rc(report(sources, refs, cited=[1, 3]))
    assert score.value == 0.0
    assert score.details["n_important"] == 1  # E: important AND on arXiv
    assert rc(report(sources, refs, cited=[1, 2, 3])).value == 1.0


def test_no_important_reference_is_unscored_not_zero():
    score = rc(report([src(1, "2101.00001", "x")], [ref("a", "2101.00001", "x", important=False)]))
    assert score.value is None and "|E| = 0" in score.unscored_reason


def test_no_sources_scores_zero():
    score = rc(report([], [ref("a", "2101.00001", "x")]))
    assert score.value == 0.0 and score.unscored_reason is None


def test_human_exemplar_is_one_by_construction():
    score = rc(report([], [], kind="human_exemplar"))
    assert score.value == 1.0 and score.details == {"by_construction": True}


def test_matching_is_by_id_in_reference_order():
    refs = [ref("a", "2101.00001", "Graph neural networks for molecules"),
            ref("b", "2101.00002", "Graph neural networks for molecule generation")]
    sources = [src(1, "2101.00002", "Graph neural networks for molecules"),
               src(2, "2101.00001", "Graph neural networks for molecule generation")]
    found = [(m.reference.first.cite_key, m.source.first.idx, m.by) for m in match_important(sources, refs)]
    assert found == [("a", 2, "id"), ("b", 1, "id")]
