"""Leaderboard roll-up at a year's scale: 12 months x 20 systems x 100 queries x 7 metrics.

Usage: .venv/bin/python bench/rollup.py [--months 12] [--systems 20] [--queries 100] [--n-boot 1000]
Database: DEEPSCHOLAR_DB_URL when set (its bench rows are deleted afterwards); else a throwaway database
on the local server (postgresql+psycopg2://postgres@127.0.0.1:5432) when it answers, dropped afterwards;
else the embedded PostgreSQL under a throwaway DEEPSCHOLAR_HOME, stopped afterwards.

Synthetic scores with every variant of every metric (16 metric_scores rows per report, as the runner
stores them), 2 % unscored headline scores and 1 % failed reports. Times: loading the scores, roll_up
of every month, a re-run (must change nothing), the GX check of one month, the two views, the analyst
queries, and load + format of one board.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import numpy as np  # noqa: E402
import sqlalchemy as sa  # noqa: E402
from support.warehouse import throwaway_warehouse  # noqa: E402

JUDGE = "llm:openai/gpt-4o"
YEAR = 2090  # far from any real month, so a shared database's own rows are never touched


@contextlib.contextmanager
def bench_database() -> Iterator[tuple[sa.Engine, str]]:
    """(engine, description): DEEPSCHOLAR_DB_URL's database, whose bench rows (YEAR's releases, bench_sys_*
    systems) are deleted afterwards; else a throwaway warehouse (tests/support/warehouse.py): a new
    database on the local server when it answers, else the embedded PostgreSQL in a temporary home."""
    from deepscholar import db

    if os.environ.get("DEEPSCHOLAR_DB_URL"):
        engine = db.get_engine()
        try:
            yield engine, f"DEEPSCHOLAR_DB_URL ({db.describe_url(engine)})"
        finally:
            with engine.begin() as conn:
                conn.execute(sa.text("DELETE FROM releases WHERE release_id LIKE :p"), {"p": f"{YEAR}-%"})
                conn.execute(sa.text("DELETE FROM systems WHERE system_id LIKE 'bench_sys_%'"))
        return
    with throwaway_warehouse("deepscholar_bench_rollup_", database="auto") as (engine, home):
        yield engine, f"throwaway warehouse {db.describe_url(engine)} (home {home})"


def _copy(conn, table: str, columns: list[str], rows) -> None:
    """COPY rows (tuples) in: 400k score rows in seconds rather than minutes."""
    buf = io.StringIO()
    for row in rows:
        buf.write("\t".join(r"\N" if v is None else str(v) for v in row) + "\n")
    buf.seek(0)
    raw = conn.connection.dbapi_connection
    with raw.cursor() as cur:
        cur.copy_expert(f"COPY deepscholar.{table} ({', '.join(columns)}) FROM STDIN", buf)


def load_synthetic(engine, months: list[str], n_systems: int, n_queries: int, seed: int = 0) -> dict:
    """Insert releases, queries, systems, reports and every variant's scores; returns row counts."""
    from deepscholar.evaluation.metrics import registry

    rng = np.random.default_rng(seed)
    variants_by_metric = {m.name: list(m.variants) for m in registry.metrics()}  # every stored variant
    systems = [f"bench_sys_{i:02d}" for i in range(n_systems)]
    quality = dict(zip(systems, np.linspace(0.25, 0.75, n_systems), strict=True))
    counts = {"reports": 0, "metric_scores": 0}
    with engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO systems (system_id, kind) VALUES (:s, 'external')"),
                     [{"s": s} for s in systems])
        for mi, month in enumerate(months):
            conn.execute(sa.text("INSERT INTO releases (release_id, status, window_start) VALUES "
                                 "(:r, 'published', CAST(:w AS timestamptz))"),
                         {"r": month, "w": f"{month}-01T00:00:00+00:00"})
            ids = [f"{month[2:4]}{month[5:7]}.{q:05d}" for q in range(n_queries)]
            _copy(conn, "release_queries", ["release_id", "arxiv_id", "title", "abstract", "section_raw_latex",
                                            "section_text", "word_count"],
                  [(month, a, f"Paper {a}", "abstract", "x", "x", 1) for a in ids])
            status = {(s, a): ("system_error" if rng.random() < 0.01 else "ok") for s in systems for a in ids}
            _copy(conn, "reports", ["release_id", "system_id", "arxiv_id", "status", "text"],
                  [(month, s, a, st, "text [1]") for (s, a), st in status.items()])
            report_ids = conn.execute(sa.text(
                "SELECT report_id, system_id FROM reports WHERE release_id = :r AND status = 'ok'"),
                {"r": month}).all()
            rows = []
            for report_id, s in report_ids:
                drift = 0.03 * np.sin(mi + systems.index(s))  # systems move a little from month to month
                for metric, variants in variants_by_metric.items():
                    base = float(np.clip(rng.normal(quality[s] + drift, 0.15), 0.0, 1.0))
                    unscored = rng.random() < 0.02
                    for vi, variant in enumerate(variants):
                        value = None if unscored else round(min(1.0, base + 0.02 * vi), 4)
                        rows.append((report_id, metric, JUDGE, variant, f"d1+{metric}_v1",
                                     value, "judge answer unparseable" if unscored else None))
            _copy(conn, "metric_scores", ["report_id", "metric", "judge_config", "variant", "metric_version",
                                          "value", "unscored_reason"], rows)
            counts["reports"] += len(status)
            counts["metric_scores"] += len(rows)
    with engine.begin() as conn:
        conn.execute(sa.text("ANALYZE deepscholar.reports; ANALYZE deepscholar.metric_scores"))
    return counts


def _timed(fn, repeat: int = 1):
    times, result = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
    return result, statistics.median(times)


def _snapshot(engine) -> list[tuple]:
    with engine.connect() as conn:
        return [tuple(r) for t in ("leaderboard", "leaderboard_metrics") for r in conn.execute(sa.text(
            f"SELECT * FROM {t} WHERE release_id LIKE :p ORDER BY 1, 2, 3, 4"), {"p": f"{YEAR}-%"})]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--months", type=int, default=12, help="at least 1")
    parser.add_argument("--systems", type=int, default=20)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--n-boot", type=int, default=1000)
    args = parser.parse_args()
    if args.months < 1:
        parser.error("--months must be at least 1")

    from deepscholar import db
    from deepscholar.evaluation.boards.leaderboard import (
        analyst_queries,
        format_leaderboard,
        load_leaderboard,
    )
    from deepscholar.evaluation.boards.leaderboard_quality import check_leaderboard
    from deepscholar.evaluation.boards.rollup import roll_up

    months = [f"{YEAR}-{m:02d}" for m in range(1, args.months + 1)]
    figures: list[tuple[str, float, str]] = []
    with bench_database() as (engine, where):
        print(f"database: {where}")
        db.init_db(engine)
        counts, secs = _timed(lambda: load_synthetic(engine, months, args.systems, args.queries))
        figures.append(("load synthetic scores (COPY)", secs,
                        f"{counts['reports']} reports, {counts['metric_scores']} metric_scores rows"))

        per_month = []
        t0 = time.perf_counter()
        for month in months:
            _, secs = _timed(lambda month=month: roll_up(engine, month, JUDGE, n_boot=args.n_boot))
            per_month.append(secs)
        total = time.perf_counter() - t0
        figures.append((f"roll_up, {len(months)} months (first run)", total,
                        f"per month median {statistics.median(per_month):.3f} s, max {max(per_month):.3f} s; "
                        f"n_boot={args.n_boot}"))
        before = _snapshot(engine)
        _, secs = _timed(lambda: [roll_up(engine, m, JUDGE, n_boot=args.n_boot) for m in months])
        unchanged = _snapshot(engine) == before
        figures.append((f"roll_up, {len(months)} months (re-run)", secs,
                        f"{len(before)} rows; identical after re-run: {unchanged}"))

        result, secs = _timed(lambda: check_leaderboard(engine, months[-1], JUDGE))
        figures.append(("GX check of one month (incl. GX import)", secs, result.summary))
        if len(months) > 1:  # the second check shows the cost once GX is imported
            result, secs = _timed(lambda: check_leaderboard(engine, months[-2], JUDGE))
            figures.append(("GX check of another month", secs, f"success={result.success}"))

        with engine.connect() as conn:
            for view in ("leaderboard_latest", "leaderboard_history"):
                rows, secs = _timed(lambda view=view: conn.execute(sa.text(f"SELECT * FROM {view}")).all(), 5)
                figures.append((f"SELECT * FROM {view}", secs, f"{len(rows)} rows (median of 5)"))
            params = {"judge_config": JUDGE, "release_id": months[-1], "system_id": "bench_sys_00",
                      "metric": "citation_precision", "window_from": f"{months[0]}-01",
                      "window_to": f"{months[-1]}-28"}
            for name, query in analyst_queries().items():
                bound = {p: params[p] for p in query.params}
                rows, secs = _timed(lambda q=query, b=bound: conn.execute(sa.text(q.sql), b).all(), 5)
                figures.append((f"analyst query {name}", secs, f"{len(rows)} rows (median of 5)"))

        board, secs = _timed(lambda: load_leaderboard(engine, months[-1], JUDGE), 5)
        figures.append(("load_leaderboard (one month)", secs, f"{len(board)} systems (median of 5)"))
        _, secs = _timed(lambda: [format_leaderboard(board, f) for f in ("table", "csv", "json", "markdown")], 5)
        figures.append(("format_leaderboard, all four formats", secs, "(median of 5)"))
        print(format_leaderboard(board[:5], "table"))
        print()
        width = max(len(f[0]) for f in figures)
        for label, secs, note in figures:
            print(f"{label.ljust(width)}  {secs * 1000:10.1f} ms  {note}")
        return 0 if unchanged else 1


if __name__ == "__main__":
    sys.exit(main())
