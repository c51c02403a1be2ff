"""ReportBench's bibliography metrics on hand-made reports: precision = |S ∩ G| / |S|, recall = |S ∩ G| / |G|
over the exemplar's whole bibliography, both resolved to papers, matched by arXiv id, else DOI, else the same
title (text.same_title) where one side lacks the identifier, one to one; `academic` precision as ReportBench
scores it."""

from __future__ import annotations

from dataclasses import replace

import pytest
from support.metric_support import cited_report, exemplar_reference, source_doc

from deepscholar.evaluation.metrics import get_metric, registry
from deepscholar.evaluation.metrics.reportbench.reference_precision import METRIC as PRECISION
from deepscholar.evaluation.metrics.reportbench.reference_recall import METRIC as RECALL
from deepscholar.evaluation.metrics.reportbench.reference_recall import pooled_quartile_recall, quartile_of
from deepscholar.text import normalise_title, title_similarity
from deepscholar.text.paper_ids import doi_key

DPR = "Dense Passage Retrieval for Open-Domain Question Answering"


def ref(key, arxiv_id=None, title=None, doi=None, count=None, important=False):
    return replace(exemplar_reference(key, arxiv_id, title, cited_by_count=count, is_important=important), doi=doi)


def src(idx, arxiv_id=None, title=None, doi=None):
    return replace(source_doc(idx, "t", arxiv_id=arxiv_id, title=title), doi=doi)


def scores(metric, ctx) -> dict:
    return {s.variant: s for s in metric.score(ctx, [])}


def test_both_are_judge_free_metrics_of_the_reportbench_track_not_of_the_core():
    assert get_metric("reference_precision") is PRECISION and get_metric("reference_recall") is RECALL
    assert "reportbench" in registry.tracks()
    assert registry.dimensions("reportbench")["bibliography"] == ("reference_recall", "reference_precision")
    assert "reference_recall" not in registry.judged_metric_names()
    assert {"reference_recall", "reference_precision"} <= set(registry.judged_metric_names(["reportbench"]))
    ctx = cited_report([src(1, "2004.04906", DPR)], [ref("dpr", "2004.04906", DPR)])
    assert PRECISION.items(ctx) == [] and RECALL.items(ctx) == []


def test_precision_divides_by_the_cited_papers_and_recall_by_the_whole_bibliography():
    # G: 5 references, arXiv or not, important or not; S: 4 cited papers, 3 of them in G.
    refs = [ref("a", "2101.00001", "Alpha graphs", important=True), ref("b", None, "Beta retrieval at scale"),
            ref("c", None, "Gamma nets", doi="10.1000/gamma"), ref("d", "2101.00004", "Delta models"),
            ref("e", None, "Epsilon")]
    sources = [src(1, "2101.00001v2", "whatever"), src(2, None, "Beta Retrieval at Scale"),
               src(3, None, "A different title", doi="https://doi.org/10.1000/GAMMA"), src(4, "2201.00009", "Zeta")]
    ctx = cited_report(sources, refs)
    p, r = scores(PRECISION, ctx)["score"], scores(RECALL, ctx)["score"]
    assert p.value == pytest.approx(3 / 4) and r.value == pytest.approx(3 / 5)
    assert p.details["ref_count"] == 4 and p.details["n_references"] == 5
    assert [(m["cite_key"], m["by"]) for m in p.details["matched"]] == [("a", "id"), ("b", "title"), ("c", "doi")]
    assert p.details["unmatched_sources"] == [4]


def test_one_paper_cited_twice_counts_once_and_matches_once():
    refs = [ref("a", "2101.00001", "Alpha"), ref("a2", "2101.00001", "Alpha again"), ref("b", None, "Beta")]
    ctx = cited_report([src(1, "2101.00001", "Alpha"), src(2, "2101.00001v3", "Alpha")], refs)
    assert scores(PRECISION, ctx)["score"].value == 1.0  # S = {Alpha}
    assert scores(RECALL, ctx)["score"].value == pytest.approx(1 / 2)  # G = {Alpha, Beta}


def test_a_source_that_resolves_to_nothing_counts_in_s_and_never_matches():
    refs = [ref("a", "2101.00001", "Alpha")]
    ctx = cited_report([src(1, "2101.00001", "Alpha"), src(2, None, None), src(3, None, None)], refs)
    assert scores(PRECISION, ctx)["score"].value == pytest.approx(1 / 3)


def test_no_citations_is_precision_zero_and_no_bibliography_is_unscored():
    refs = [ref("a", "2101.00001", "Alpha")]
    nothing = cited_report([src(1, "2101.00001", "Alpha")], refs, cited=[])
    assert scores(PRECISION, nothing)["score"].value == 0.0 and scores(RECALL, nothing)["score"].value == 0.0
    no_g = cited_report([src(1, "2101.00001", "Alpha")], [])
    assert scores(PRECISION, no_g)["score"].value is None and "|G| = 0" in scores(PRECISION, no_g)["score"].unscored_reason
    assert all(s.value is None for s in scores(RECALL, no_g).values())


def test_the_human_exemplar_is_one_by_construction():
    ctx = cited_report([src(1, None, "Unrelated")], [ref("a", "2101.00001", "Alpha")], kind="human_exemplar")
    assert scores(PRECISION, ctx)["score"].value == 1.0
    assert {v: s.value for v, s in scores(RECALL, ctx).items()} == dict.fromkeys(RECALL.variants, 1.0)


def test_quartile_cut_points_are_the_percentiles_of_the_querys_counts():
    assert quartile_of([1, 2, 3, 4, 5, 6, 7, 8]) == [0, 0, 1, 1, 2, 2, 3, 3]
    # cuts 5, 10, 55: a count equal to a cut point belongs to that quartile
    assert quartile_of([0, 10, 100]) == [0, 1, 3]
    assert quartile_of([5, 5, 5, 5]) == [0, 0, 0, 0] and quartile_of([]) == []


def test_recall_per_popularity_quartile():
    refs = [ref(f"r{c}", f"2101.{c:05d}", f"Paper {c}", count=c) for c in (1, 2, 3, 4, 5, 6, 7, 8)]
    refs.append(ref("nocount", "2101.99999", "Uncounted"))
    # the report cites the two least and one of the two most cited papers, and the uncounted one
    sources = [src(i, f"2101.{c:05d}", "t") for i, c in enumerate((1, 2, 8), start=1)]
    sources.append(src(9, "2101.99999", "t"))
    got = scores(RECALL, cited_report(sources, refs))
    assert got["score"].value == pytest.approx(4 / 9)
    assert [got[q].value for q in ("q1", "q2", "q3", "q4")] == [1.0, 0.0, 0.0, 0.5]
    assert got["q1"].details == {"n_references": 2, "n_matched": 2, "n_without_count": 1}
    assert got["q4"].details["n_matched"] == 1  # the pooled figure sums these counts over queries
    lone = scores(RECALL, cited_report([src(1, "2101.00001", "t")], [ref("a", "2101.00001", "A", count=3)]))
    assert lone["q1"].value == 1.0 and lone["q2"].value is None and "quartile q2" in lone["q2"].unscored_reason


def test_dois_compare_without_resolver_prefixes_or_case():
    assert doi_key(" https://doi.org/10.1000/ABC ") == doi_key("doi:10.1000/abc") == "10.1000/abc"
    assert doi_key("") is None and doi_key(None) is None


def test_one_paper_cited_by_arxiv_id_and_by_doi_or_title_only_counts_once():
    # d1 counted [1], [2] and [3] as three papers: precision 1/3 here instead of 1.
    refs = [ref("a", "2101.00001", "Alpha: graphs", doi="10.1000/alpha")]
    sources = [src(1, "2101.00001", "Alpha: graphs"), src(2, None, "Alpha -- Graphs"), src(3, None, None, doi="10.1000/ALPHA")]
    # [3] links to [1] through G's entry, which carries both the id and the DOI
    p = scores(PRECISION, cited_report(sources, refs))["score"]
    assert p.value == 1.0 and p.details["ref_count"] == 1


def test_near_miss_titles_under_different_ids_never_match():
    refs = [ref("gan", "1406.2661", "Generative Adversarial Nets"),
            ref("ddpm", "2006.11239", "Denoising Diffusion Probabilistic Models")]
    sources = [src(1, "1411.1784", "Conditional Generative Adversarial Nets"),
               src(2, "2010.02502", "Denoising Diffusion Implicit Models")]
    ctx = cited_report(sources, refs)
    assert scores(PRECISION, ctx)["score"].value == 0.0 and scores(RECALL, ctx)["score"].value == 0.0


def test_academic_precision_leaves_web_pages_out_and_skips_a_report_citing_nothing():
    refs = [ref("a", "2101.00001", "Alpha"), ref("b", None, "Beta", doi="10.1000/beta")]
    # two papers (one in G), two web pages (no id, no DOI), one of which has G's title
    sources = [src(1, "2101.00001", "Alpha"), src(2, "2301.00002", "Zeta"), src(3, None, "Some blog post"),
               src(4, None, "Beta")]
    got = scores(PRECISION, cited_report(sources, refs))
    assert got["score"].value == pytest.approx(2 / 4)  # the page titled "Beta" matches G's Beta by title
    assert got["academic"].value == pytest.approx(1 / 2)  # over [1] and [2]; the page's title match is not counted
    assert got["academic"].details["n_academic"] == 2
    only_pages = scores(PRECISION, cited_report([src(1, None, "A blog")], refs))
    assert only_pages["academic"].value == 0.0  # as ReportBench: pages but no paper is 0
    nothing = scores(PRECISION, cited_report([src(1, "2101.00001", "Alpha")], refs, cited=[]))
    assert nothing["score"].value == 0.0
    assert nothing["academic"].value is None and "leaves such a report out" in nothing["academic"].unscored_reason


def test_quartile_recall_is_a_mean_over_queries_and_the_papers_pooled_figure_sums_the_counts():
    """docs/METRICS.md, ReportBench conformance: query 1's first quartile has 2 references, both cited
    (recall 1.0); query 2's has 8, none cited (0.0). Our board: (1.0 + 0.0) / 2 = 0.5; pooled as the paper
    reports it: 2 / 10 = 0.2."""
    one = [ref(f"a{c}", f"2101.{c:05d}", f"A {c}", count=c) for c in range(1, 9)]  # q1: counts 1, 2
    two = [ref(f"b{i}", f"2102.{i:05d}", f"B {i}", count=c)
           for i, c in enumerate((1,) * 8 + (2, 3, 4, 5, 6, 7, 8, 9), start=1)]  # q1: the eight counts of 1
    q1_one = scores(RECALL, cited_report([src(1, "2101.00001"), src(2, "2101.00002")], one))["q1"]
    q1_two = scores(RECALL, cited_report([src(1, "2999.00001")], two))["q1"]
    assert (q1_one.value, q1_two.value) == (1.0, 0.0)
    assert (q1_one.details["n_references"], q1_two.details["n_references"]) == (2, 8)
    assert (q1_one.value + q1_two.value) / 2 == 0.5
    assert pooled_quartile_recall([q1_one.details, q1_two.details]) == pytest.approx(0.2)
    assert pooled_quartile_recall([]) is None


def test_matching_is_looser_than_reportbenchs_exact_title_by_a_documented_margin():
    """docs/METRICS.md, ReportBench conformance: their scorer matches exact normalised titles only; here a
    title a web page cut short ("...") or marked as its site's ("[PDF]", "- arXiv") names the same paper
    (no id on the cited side), there it does not. A title merely similar matches neither (d2 matched it)."""
    full = "BERT: Pre-training of Deep Bidirectional Transformers for Language Understanding"
    for short in ("BERT: Pre-training of Deep Bidirectional Transformers for ...",
                  "[PDF] BERT: Pre-training of Deep Bidirectional Transformers for Language Understanding - arXiv"):
        assert normalise_title(full) != normalise_title(short)
        got = scores(RECALL, cited_report([src(1, None, short)], [ref("bert", "1810.04805", full)]))
        assert got["score"].value == 1.0 and got["score"].details["matched"][0]["by"] == "title"
    similar = "BERT: Pre-training of Deep Bidirectional Transformers for Language"  # cut, but not marked cut
    assert 0.8 <= title_similarity(full, similar) < 1.0
    assert scores(RECALL, cited_report([src(1, None, similar)], [ref("bert", "1810.04805", full)]))["score"].value == 0.0
