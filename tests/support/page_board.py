"""A small published board (two systems, one month) and one scored report, for the page's service tests."""

from __future__ import annotations

import sqlalchemy as sa

from deepscholar import db
from deepscholar.evaluation.metrics import registry
from support.warehouse import store_board

METRICS = registry.metric_names(registry.CORE)
DIMENSION_OF = {m: registry.dimension_of(m) for m in METRICS}
MONTH, JUDGE, SYSTEMS = "2025-06", "llm:openai/judge", ("alpha", "beta")


def seed_board(engine, version: int = 1) -> None:
    with engine.begin() as conn:
        db.upsert(conn, "releases", [{"release_id": MONTH, "status": "published",
                                      "window_start": f"{MONTH}-01T00:00:00+00:00"}], key=["release_id"])
        db.upsert(conn, "systems", [{"system_id": s, "kind": "extractive"} for s in SYSTEMS], key=["system_id"])
        rows = [{"release_id": MONTH, "system_id": s, "judge_config": JUDGE, "n_queries": 1, "n_reports": 1,
                 "n_failed": 0, **dict.fromkeys(METRICS, 0.5 + rank / 10), "geometric_mean": 0.5 + rank / 10,
                 "rank": len(SYSTEMS) - rank, "metric_versions": dict.fromkeys(METRICS, "v1")}
                for rank, s in enumerate(SYSTEMS)]
        cells = [{"release_id": MONTH, "system_id": r["system_id"], "judge_config": JUDGE, "metric": m,
                  "dimension": DIMENSION_OF[m], "metric_position": METRICS.index(m) + 1,
                  "variant": registry.headline_variant(m), "mean": r[m], "n": 1, "n_unscored": 0,
                  "is_best": r["rank"] == 1, "significant": False, "runner_up": None} for r in rows for m in METRICS]
        store_board(conn, rows, cells, METRICS, version=version)


def seed_report(engine) -> int:
    """One ok report of SYSTEMS[0] in MONTH with one scored metric; its id."""
    with engine.begin() as conn:
        conn.execute(sa.text("""
            INSERT INTO deepscholar.release_queries (release_id, arxiv_id, title, abstract, section_raw_latex,
                                                     section_text, word_count)
            VALUES (:m, '2506.00001', 'A query', '', '', '', 0)"""), {"m": MONTH})
        report_id = conn.execute(sa.text("""
            INSERT INTO deepscholar.reports (release_id, system_id, arxiv_id, status, text)
            VALUES (:m, :s, '2506.00001', 'ok', 'A related-work section.') RETURNING report_id"""),
            {"m": MONTH, "s": SYSTEMS[0]}).scalar_one()
        conn.execute(sa.text("""
            INSERT INTO deepscholar.metric_scores (report_id, metric, judge_config, variant, metric_version, value)
            VALUES (:r, :m, :j, :v, 'v1', 0.5)"""),
            {"r": report_id, "m": METRICS[0], "j": JUDGE, "v": registry.headline_variant(METRICS[0])})
    return report_id
