"""The tracks' figures as their authors' released scorers aggregate them (evaluation/boards/published.py), from
stored per-report (value, details) rows: worked by hand, as docs/METRICS.md's conformance tables give them."""

from __future__ import annotations

import pytest

from deepscholar.evaluation.boards.published import FIGURES, aggregate, format_published


def fact_details(supported: int, unsupported: int) -> dict:
    n = supported + unsupported
    return {"n_pairs": n, "supported": supported, "unsupported": unsupported, "unknown": 0,
            **({"no_citation_pairs": True} if n == 0 else {})}


def test_fact_pools_over_citing_reports_where_our_board_averages_every_report():
    rows = {("citation_accuracy", "score"): {
        "sys": [(1.0, fact_details(10, 0)), (0.2, fact_details(1, 4)), (0.0, fact_details(0, 0)),
                (0.0, fact_details(0, 0))],
        "quiet": [(0.0, fact_details(0, 0))]}}
    got = aggregate("fact", rows)
    assert got["sys"]["citation_accuracy_pooled"] == pytest.approx(11 / 15)
    assert got["sys"]["effective_citations_per_citing_report"] == pytest.approx(5.5)
    assert got["quiet"] == {"citation_accuracy_pooled": None, "effective_citations_per_citing_report": None}


def test_reportbench_academic_precision_skips_unscored_and_quartiles_pool_the_counts():
    rows = {("reference_precision", "academic"): {"sys": [(0.5, {}), (None, {}), (1.0, {})]},
            ("reference_recall", "q1"): {"sys": [(1.0, {"n_references": 2, "n_matched": 2}),
                                                 (0.0, {"n_references": 8, "n_matched": 0})]}}
    got = aggregate("reportbench", rows)["sys"]
    assert got["reference_precision_academic"] == pytest.approx(0.75)  # the uncited report left out
    assert got["reference_recall_q1_pooled"] == pytest.approx(0.2)  # our board: 0.5
    assert got["reference_recall_q2_pooled"] is None


def test_claims_titles_only_means_and_a_readable_table():
    rows = {(f"claims_{q}", "titles_only"): {"sys": [(1.0, {}), (0.5, {})]} for q in ("precision", "recall", "f1")}
    got = aggregate("claims", rows)
    assert got == {"sys": {"claims_precision_titles_only": 0.75, "claims_recall_titles_only": 0.75,
                           "claims_f1_titles_only": 0.75}}
    table = format_published([{"system_id": "sys", "human_exemplar": False, **got["sys"],
                               "metric_versions": ["claims_f1 d2+claims_connection_v1"]}], "claims")
    assert "Claims F titles" in table and "0.750" in table and "not our board" in table
    assert "d2+claims_connection_v1" in table
    assert set(FIGURES) == {"fact", "reportbench", "claims"}


def test_claims_as_published_counts_a_task_without_ground_truth_as_their_grader_does():
    """LiveDRBench grades a task without ground truth 0 and averages it in; a task the judge could not answer
    stays out. Ours: 1.0 and 0.5 scored, one task with no ground truth, one unscored by the judge."""
    rows = {("claims_f1", "titles_only"): {"sys": [(1.0, {}), (0.5, {}), (None, {"n_gt": 0}),
                                                   (None, {})]}}
    got = aggregate("claims", rows)["sys"]
    assert got["claims_f1_titles_only"] == pytest.approx(0.5)  # (1 + 0.5 + 0) / 3; our board: 0.75
