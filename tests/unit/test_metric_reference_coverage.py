"""Reference coverage on hand-made reports: RC = |S ∩ E| / |E|, id match else title similarity >= 0.8."""

from __future__ import annotations

import pytest
from support.metric_support import cited_report, exemplar_reference, source_doc

from deepscholar.evaluation.metrics import get_metric
from deepscholar.evaluation.metrics.reference_coverage import (
    METRIC,
    TITLE_MATCH_THRESHOLD,
    match_important,
    title_similarity,
)

DPR = "Dense Passage Retrieval for Open-Domain Question Answering"
AT_080 = "Dense Passage Open-Domain Question Answering Systems"  # similarity exactly 0.80 to DPR
AT_079 = "Dense Passage Retrieval for Open-Domain Dialogue"  # similarity 0.7925 to DPR


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
    assert METRIC.version == "d1" and METRIC.headline == "score" and METRIC.variants == ("score",)
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


def test_title_threshold_is_inclusive_at_080_and_rejects_079():
    assert title_similarity(DPR, AT_080) == pytest.approx(0.80, abs=1e-12)
    assert title_similarity(DPR, AT_080) >= TITLE_MATCH_THRESHOLD
    assert round(title_similarity(DPR, AT_079), 2) == 0.79
    assert title_similarity(DPR, AT_079) < TITLE_MATCH_THRESHOLD
    refs = [ref("dpr", "2004.04906", DPR)]
    hit = rc(report([src(1, "2999.00001", AT_080)], refs))
    assert hit.value == 1.0
    (m,) = hit.details["matched"]
    assert m["by"] == "title" and m["similarity"] == pytest.approx(0.8) and m["source_idx"] == 1
    miss = rc(report([src(1, "2999.00001", AT_079)], refs))
    assert miss.value == 0.0 and miss.details["matched"] == []


def test_title_match_survives_latex_and_accents():
    refs = [ref("c", "2001.00001", r"{C}af\'{e} \emph{Retrieval}: A Study")]
    assert rc(report([src(1, "2999.00002", "Café retrieval -- a study")], refs)).details["matched"][0][
        "similarity"] == 1.0


def test_one_reference_matched_by_two_sources_counts_once():
    refs = [ref("dpr", "2004.04906", DPR), ref("other", "2101.00002", "Sparse lexical matching at scale")]
    sources = [src(1, "2004.04906", DPR), src(2, "2999.00001", DPR + " revisited"), src(3, "2004.04906", DPR)]
    score = rc(report(sources, refs))
    assert score.value == pytest.approx(1 / 2)
    assert [(m["cite_key"], m["by"], m["source_idx"]) for m in score.details["matched"]] == [("dpr", "id", 1)]


def test_a_source_covers_at_most_one_reference():
    # Two important references with near-identical titles; one cited paper cannot be both.
    refs = [ref("v1", "2101.00001", DPR), ref("v2", "2101.00002", DPR + " (extended)")]
    score = rc(report([src(1, "2999.00001", DPR)], refs))
    assert score.value == pytest.approx(1 / 2)
    (m,) = score.details["matched"]
    assert m["cite_key"] == "v1" and m["similarity"] == 1.0


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


def test_matching_is_deterministic_and_greedy_by_similarity():
    refs = [ref("a", "2101.00001", "Graph neural networks for molecules"),
            ref("b", "2101.00002", "Graph neural networks for molecule generation")]
    sources = [src(1, "2999.00001", "Graph neural networks for molecule generation"),
               src(2, "2999.00002", "Graph neural networks for molecules")]
    matches = match_important(sources, refs)
    found = [(m.reference.cite_key, m.source.idx, m.similarity) for m in matches]
    assert found == [("a", 2, 1.0), ("b", 1, 1.0)]
