"""What the static site's tests add to a seeded board: a track's board beside the core one (with the agreement
between the two) and judge-validation figures, written as the roll-up and the validation commands store them."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar import db
from deepscholar.evaluation.metrics import registry

__all__ = ["TRACK", "add_track_board", "add_validation_figures"]

TRACK = "fact"  # a bounded metric and a count: both kinds of track cell


def add_track_board(engine: Engine, release: str, judge: str, means: Mapping[str, Sequence[float]],
                    version: int = 1) -> None:
    """TRACK's board of (release, judge): `means` {system: one mean per metric of the track}, ranked by the
    track's ranking metric; and the core-vs-track agreement row of that board version."""
    metrics = registry.metric_names(TRACK)
    ranking = registry.ranking_metric(TRACK)
    order = sorted(means, key=lambda s: -means[s][metrics.index(ranking)])
    key = {"release_id": release, "judge_config": judge, "board_version": version, "family": TRACK}
    boards = [key | {"system_id": s, "n_queries": 2, "n_reports": 2, "n_failed": 0, "ranking_metric": ranking,
                     "rank": order.index(s) + 1, "metric_versions": {m: f"{m}_v1" for m in metrics}}
              for s in means]
    cells = [key | {"system_id": s, "metric": m, "dimension": registry.dimension_of(m),
                    "metric_position": metrics.index(m) + 1, "variant": registry.headline_variant(m),
                    "metric_version": f"{m}_v1", "mean": values[metrics.index(m)], "n": 2, "n_unscored": 0,
                    "ci_low": values[metrics.index(m)] * 0.9, "ci_high": values[metrics.index(m)] * 1.1,
                    "is_best": order[0] == s, "significant": False}
             for s, values in means.items() for m in metrics]
    family_a, family_b = sorted((registry.CORE, TRACK))
    with engine.begin() as conn:
        db.upsert(conn, "track_boards", boards, key=[*key, "system_id"])
        db.upsert(conn, "track_board_metrics", cells, key=[*key, "system_id", "metric"])
        db.upsert(conn, "board_agreement", [{
            "release_id": release, "judge_config": judge, "board_version": version, "family_a": family_a,
            "family_b": family_b, "n_systems": len(means), "kendall_tau": 1 / 3, "p_value": 0.6,
            "movers": [{"system_id": order[-1], "rank_a": 1, "rank_b": len(order), "shift": 2}]}],
            key=["release_id", "judge_config", "board_version", "family_a", "family_b"])


def _agreement_entry(release: str, judge: str, metric: str, label: str) -> dict:
    """One judge-vs-humans entry as `deepscholar annotate import` stores it (judge_vs_humans.agreement_report)."""
    return {"metric": metric, "label": label, "release_id": release, "judge_config": judge, "n_items": 40,
            "n_labelled": 42, "n_annotators": 3, "n_ties": 2, "n_unjudged": 0, "labels": ["yes", "no"],
            "percent_agreement": 0.825, "ci": [0.7, 0.925], "cohen_kappa": 0.61, "kappa_ci": [0.38, 0.81],
            "confusion": {"yes": {"yes": 25, "no": 3}, "no": {"yes": 4, "no": 8}}, "n_labels": 120,
            "inter_annotator": None, "paper_agreement": 0.78}


def add_validation_figures(engine: Engine, release: str, judge: str, other_judge: str, *,
                           label: str | None = None) -> dict:
    """A judge-vs-humans entry, a judge-vs-judge comparison and a drift check of `release` under `judge`, as
    their commands store them; `label`: the metric's label in the stored entry (hostile text, say). Returns
    the stored numbers a page must show."""
    metric = "citation_precision"
    a, b = sorted((judge, other_judge))
    with engine.begin() as conn:
        conn.execute(sa.text(
            "INSERT INTO deepscholar.human_agreement_stats (release_id, judge_config, metric, report, n_labels) "
            "VALUES (:r, :j, :m, CAST(:e AS jsonb), 120)"),
            {"r": release, "j": judge, "m": metric,
             "e": json.dumps(_agreement_entry(release, judge, metric, label or registry.metric_label(metric)))})
        db.upsert(conn, "judge_comparisons", [{
            "release_id": release, "judge_a": a, "judge_b": b, "board_version_a": 1, "board_version_b": 1,
            "n_systems": 2, "kendall_tau": -1.0, "p_value": 0.32, "swaps": [], "n_swaps": 1,
            "n_swaps_within_noise": 1}], key=["release_id", "judge_a", "judge_b"])
        db.upsert(conn, "judge_comparison_metrics", [{
            "release_id": release, "judge_a": a, "judge_b": b, "metric": "organization", "n_items": 12,
            "percent_agreement": 0.75, "ci_low": 0.5, "ci_high": 0.9167, "cohen_kappa": 0.4, "kappa_ci_low": 0.1,
            "kappa_ci_high": 0.7, "confusion": {}, "deltas": {}, "n_systems": 2,
            "kendall_tau": 1.0, "swaps": []}], key=["release_id", "judge_a", "judge_b", "metric"])
        db.upsert(conn, "judge_drift_checks", [{
            "release_id": release, "judge_config": judge, "metric": metric, "status": "checked",
            "reference_kind": "human", "n_items": 20, "n_agree": 19, "agreement": 0.95, "min_agreement": 0.7,
            "max_drop": 0.1, "tripped": False, "message": f"{metric}: 95% of the slice as before"}],
            key=["release_id", "judge_config", "metric"])
    return {"humans": 0.825, "kappa": 0.61, "pair_tau": -1.0, "items_agree": 0.75, "drift": 0.95}
