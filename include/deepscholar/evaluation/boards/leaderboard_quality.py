"""Great Expectations check on a rolled-up board, before it is published.

Design notes: docs/MODULE_NOTES.md, `deepscholar.evaluation.boards.leaderboard_quality`.
"""

from __future__ import annotations

import logging
import time

import pandas as pd
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar.db import SCHEMA
from deepscholar.evaluation.boards import board_versions
from deepscholar.evaluation.metrics import registry
from deepscholar.gx import Check, GateResult, import_gx, run_checks

__all__ = ["CHECK_NAMES", "load_leaderboard_frames", "check_leaderboard"]

log = logging.getLogger("deepscholar.evaluation")

_ROWS_SQL = f"""
    SELECT l.system_id, l.n_reports, l.n_failed, l.geometric_mean, l.geometric_mean_ci_low, l.geometric_mean_ci_high,
           coalesce(c.ok_reports, 0) AS ok_reports,
           (SELECT count(*) FROM {SCHEMA}.leaderboard_metrics d
             WHERE d.release_id = l.release_id AND d.system_id = l.system_id
               AND d.judge_config = l.judge_config AND d.board_version = l.board_version) AS n_metric_rows
    FROM {SCHEMA}.leaderboard_systems l
    LEFT JOIN (SELECT system_id, count(*) AS ok_reports FROM {SCHEMA}.reports
               WHERE release_id = :r AND status = 'ok' GROUP BY system_id) c ON c.system_id = l.system_id
    WHERE l.release_id = :r AND l.judge_config = :j AND l.board_version = :v
    ORDER BY l.system_id"""

# Active systems with ok reports, and how many board rows each has (0 = missing).
_EXPECTED_SQL = f"""
    SELECT s.system_id, count(DISTINCT r.arxiv_id) AS ok_reports,
           (SELECT count(*) FROM {SCHEMA}.leaderboard_systems l
             WHERE l.release_id = :r AND l.judge_config = :j AND l.board_version = :v
               AND l.system_id = s.system_id) AS n_rows
    FROM {SCHEMA}.systems s
    JOIN {SCHEMA}.reports r ON r.system_id = s.system_id AND r.release_id = :r AND r.status = 'ok'
    WHERE s.active
    GROUP BY s.system_id
    ORDER BY s.system_id"""

# Every board's per-metric rows: the core's and each track's (family names the board).
_METRIC_ROWS_SQL = f"""
    SELECT 'core' AS family, d.system_id, d.metric, d.mean, d.ci_low, d.ci_high, d.n, d.n_unscored, l.n_reports,
           l.n_reports - d.n - d.n_unscored AS reports_left
    FROM {SCHEMA}.leaderboard_metrics d
    JOIN {SCHEMA}.leaderboard_systems l USING (release_id, system_id, judge_config, board_version)
    WHERE d.release_id = :r AND d.judge_config = :j AND d.board_version = :v
    UNION ALL
    SELECT t.family, t.system_id, t.metric, t.mean, t.ci_low, t.ci_high, t.n, t.n_unscored, b.n_reports,
           b.n_reports - t.n - t.n_unscored
    FROM {SCHEMA}.track_board_metrics t
    JOIN {SCHEMA}.track_boards b USING (release_id, judge_config, board_version, family, system_id)
    WHERE t.release_id = :r AND t.judge_config = :j AND t.board_version = :v
    ORDER BY 1, 2, 3"""

# Each track board row, with its ok reports and how many metric rows it has.
_TRACK_ROWS_SQL = f"""
    SELECT b.family, b.system_id, b.n_reports, coalesce(c.ok_reports, 0) AS ok_reports,
           (SELECT count(*) FROM {SCHEMA}.track_board_metrics t
             WHERE t.release_id = b.release_id AND t.judge_config = b.judge_config AND t.family = b.family
               AND t.system_id = b.system_id AND t.board_version = b.board_version) AS n_metric_rows
    FROM {SCHEMA}.track_boards b
    LEFT JOIN (SELECT system_id, count(*) AS ok_reports FROM {SCHEMA}.reports
               WHERE release_id = :r AND status = 'ok' GROUP BY system_id) c ON c.system_id = b.system_id
    WHERE b.release_id = :r AND b.judge_config = :j AND b.board_version = :v
    ORDER BY b.family, b.system_id"""

# The month's drift checks under this judge (none when the check did not run: nothing to refuse).
_DRIFT_SQL = f"""
    SELECT metric, tripped::int AS tripped, message FROM {SCHEMA}.judge_drift_checks
    WHERE release_id = :r AND judge_config = :j ORDER BY metric"""

_FRAMES = {"rows": _ROWS_SQL, "expected_systems": _EXPECTED_SQL, "metric_rows": _METRIC_ROWS_SQL,
           "track_rows": _TRACK_ROWS_SQL, "drift": _DRIFT_SQL}

# Each metric's mean and interval are checked on its own row (metric_rows), whatever metrics are registered.
UNIT_COLUMNS = ("geometric_mean", "geometric_mean_ci_low", "geometric_mean_ci_high")
CHECK_NAMES = (
    "board_present",
    *(f"{c}_in_unit_range" for c in UNIT_COLUMNS),
    "n_reports_equals_ok_reports",
    "rows_have_ok_reports",
    "one_row_per_metric",
    "one_row_per_active_system",
    "metric_mean_in_unit_range",
    "metric_ci_low_in_unit_range",
    "metric_ci_high_in_unit_range",
    "scored_plus_unscored_within_reports",
    "track_n_reports_equals_ok_reports",
    "track_one_row_per_metric",
    "no_judge_drift",
)


def load_leaderboard_frames(engine: Engine, release_id: str, judge_config: str) -> dict[str, pd.DataFrame]:
    """The latest version of the board (what the roll-up just wrote and publish_board would publish)."""
    with engine.connect().execution_options(isolation_level="REPEATABLE READ") as conn:
        with conn.begin():
            conn.execute(sa.text("SET TRANSACTION READ ONLY"))
            params = {"r": release_id, "j": judge_config,
                      "v": board_versions.latest_version(conn, release_id, judge_config) or 0}
            frames = {}
            for name, sql in _FRAMES.items():
                result = conn.execute(sa.text(sql), params)
                frames[name] = pd.DataFrame(result.all(), columns=list(result.keys()))
    for col in UNIT_COLUMNS:  # all-NULL columns come back as object; GX range checks need numbers
        frames["rows"][col] = pd.to_numeric(frames["rows"][col], errors="coerce").astype(float)
    metric_rows = frames["metric_rows"]
    for col in ("mean", "ci_low", "ci_high"):
        metric_rows[col] = pd.to_numeric(metric_rows[col], errors="coerce").astype(float)
    # The [0, 1] range holds for fractions only: a count (registry.is_bounded False) is checked for >= 0.
    bounded = metric_rows["metric"].map(registry.is_bounded).astype(bool)
    for col in ("mean", "ci_low", "ci_high"):
        metric_rows[f"{col}_of_fraction"] = metric_rows[col].where(bounded)
    track_rows = frames["track_rows"]
    track_rows["expected_metric_rows"] = [len(registry.metric_names(f)) if f in registry.families() else 0
                                          for f in track_rows["family"]]
    return frames


def _checks(gxe) -> list[Check]:
    names = registry.metric_names(registry.CORE)
    between = gxe.ExpectColumnValuesToBeBetween
    sys_key = ["system_id"]
    checks = [Check("board_present", "rows", gxe.ExpectTableRowCountToBeBetween(min_value=1), [])]
    # GX skips NULLs in range checks: a NULL mean (nothing scored) is allowed, and shown as n/a.
    checks += [Check(f"{c}_in_unit_range", "rows", between(column=c, min_value=0, max_value=1), sys_key)
               for c in UNIT_COLUMNS]
    checks += [
        Check("n_reports_equals_ok_reports", "rows",
              gxe.ExpectColumnPairValuesToBeEqual(column_A="n_reports", column_B="ok_reports"), sys_key),
        # A row for a system without ok reports would also pass the equality (0 = 0).
        Check("rows_have_ok_reports", "rows", between(column="ok_reports", min_value=1), sys_key),
        Check("one_row_per_metric", "rows",
              between(column="n_metric_rows", min_value=len(names), max_value=len(names)), sys_key),
        Check("one_row_per_active_system", "expected_systems", between(column="n_rows", min_value=1, max_value=1),
              ["system_id", "ok_reports"]),
        Check("metric_mean_in_unit_range", "metric_rows",
              between(column="mean_of_fraction", min_value=0, max_value=1), ["family", "system_id", "metric"]),
        Check("metric_ci_low_in_unit_range", "metric_rows",
              between(column="ci_low_of_fraction", min_value=0, max_value=1), ["family", "system_id", "metric"]),
        Check("metric_ci_high_in_unit_range", "metric_rows",
              between(column="ci_high_of_fraction", min_value=0, max_value=1), ["family", "system_id", "metric"]),
        Check("scored_plus_unscored_within_reports", "metric_rows", between(column="reports_left", min_value=0),
              ["family", "system_id", "metric", "n", "n_unscored", "n_reports"]),
        Check("track_n_reports_equals_ok_reports", "track_rows",
              gxe.ExpectColumnPairValuesToBeEqual(column_A="n_reports", column_B="ok_reports"), ["family", "system_id"]),
        Check("track_one_row_per_metric", "track_rows",
              gxe.ExpectColumnPairValuesToBeEqual(column_A="n_metric_rows", column_B="expected_metric_rows"),
              ["family", "system_id"]),
        Check("no_judge_drift", "drift", gxe.ExpectColumnValuesToBeInSet(column="tripped", value_set=[0]),
              ["metric", "message"]),
    ]
    return checks


def check_leaderboard(engine: Engine, release_id: str, judge_config: str) -> GateResult:
    """Validate the stored board of one release under one judge; failures name the offending systems."""
    started = time.perf_counter()
    gx, gxe = import_gx()
    frames = load_leaderboard_frames(engine, release_id, judge_config)
    checks = _checks(gxe)
    results = run_checks(gx, checks, frames)
    failed = [c for c in results if not c["success"]]
    for c in failed:
        log.warning("leaderboard %s (%s): check %s FAILED: observed=%s details=%s", release_id, judge_config,
                    c["name"], c["observed"], c["details"])
    n_rows = len(frames["rows"])
    summary = (f"leaderboard {release_id} ({judge_config}): {n_rows} systems; "
               + (f"all {len(results)} checks passed" if not failed
                  else f"{len(failed)} of {len(results)} checks failed ({', '.join(c['name'] for c in failed)})"))
    drifted = frames["drift"]
    if any(c["name"] == "no_judge_drift" for c in failed):
        summary += ": " + "; ".join(drifted.loc[drifted["tripped"] != 0, "message"])
    return GateResult(release_id=release_id, success=not failed, checks=results, summary=summary,
                      gx_version=gx.__version__, duration_seconds=round(time.perf_counter() - started, 3),
                      config={"judge_config": judge_config})
