"""A system registered after its month was published, backfilled through a running Airflow as an operator does.

Used by tests/dags/test_scheduled_month.py's failed-gate run once its month is published: `deepscholar systems
backfill` prints the plan and its estimate and queues the backfill through Airflow's REST API; only the new
system's missing reports may appear, judged on the metrics the month's other systems were judged on. Then a
backfill of a month that has no release must fail at once in `wait_for_release` with one line saying how
to build it, instead of waiting days for a release nobody is building (issue 22).
"""

from __future__ import annotations

import json
import time
from urllib.parse import quote

import sqlalchemy as sa

from deepscholar import cli, db
from deepscholar.local_airflow import LocalAirflow
from deepscholar.orchestration import BENCHMARK_DAG_ID
from deepscholar.systems.registry import add_system
from support.polling import wait_until

# What a backfilled system's run writes: its reports, their judging and the month's new board version.
PRODUCED = ("reports", "report_sources", "systems", "llm_calls", "judgments", "metric_scores", "source_cited_by",
            "leaderboard_systems", "leaderboard_metrics", "benchmark_runs", "judge_configs", "board_versions",
            "month_costs", "calibration_items", "judge_drift_checks", "board_queries", "board_query_scores",
            "month_judge_requests", "board_published_figures")


def report_keys(engine, system_id: str) -> list[sa.Row]:
    with engine.connect() as conn:
        return conn.execute(sa.text(
            "SELECT release_id, arxiv_id, status, updated_at FROM reports WHERE system_id = :s "
            "ORDER BY release_id, arxiv_id"), {"s": system_id}).all()


def _judged_pairs(engine, system_id: str) -> set[tuple[str, str]]:
    """(query, metric) pairs the system's reports have a score for."""
    with engine.connect() as conn:
        return {tuple(r) for r in conn.execute(sa.text(
            "SELECT r.arxiv_id, m.metric FROM metric_scores m JOIN reports r USING (report_id) "
            "WHERE r.system_id = :s"), {"s": system_id})}


def _wait(predicate, airflow: LocalAirflow, timeout: float, what: str) -> None:
    wait_until(predicate, timeout, what, lambda: airflow.log_tail(5000))


def backfill_a_new_system(engine, airflow: LocalAirflow, month: str, judged_like: str, monkeypatch, capsys) -> None:
    """Register `extractive_tight` after `month` was published and backfill it through `deepscholar systems
    backfill`: exactly its missing reports appear, judged like `judged_like`'s, and nothing else changes."""
    with engine.connect() as conn:
        systems = conn.execute(sa.text("SELECT DISTINCT system_id FROM reports")).scalars().all()
    others = {s: report_keys(engine, s) for s in systems}
    with engine.connect() as conn:
        expected = conn.execute(sa.text("SELECT release_id, arxiv_id FROM release_queries ORDER BY 1, 2")).all()
    assert {r.release_id for r in expected} == {month}
    counts_before = db.row_counts(engine)
    add_system(engine, "extractive_tight", "extractive", {"top_k": 6})

    monkeypatch.setenv("DEEPSCHOLAR_DB_URL", engine.url.render_as_string(hide_password=False))
    monkeypatch.setenv("DEEPSCHOLAR_AIRFLOW_API_URL", airflow.url)
    monkeypatch.setenv("AIRFLOW_API_PASSWORD", airflow.admin_password())
    capsys.readouterr()
    assert cli.main(["systems", "backfill", "extractive_tight"]) == 0
    queued = capsys.readouterr().out
    assert "Estimate: judging $0.00" in queued and "queued backfill" in queued and month in queued, queued

    _wait(lambda: len(report_keys(engine, "extractive_tight")) == len(expected), airflow, 400, "the new reports")
    new = report_keys(engine, "extractive_tight")
    assert [(r.release_id, r.arxiv_id) for r in new] == [tuple(e) for e in expected]
    assert all(r.status == "ok" for r in new)
    assert {s: report_keys(engine, s) for s in others} == others  # the other systems' rows untouched
    # ... then judged on the metrics the month's other systems were, and rolled into the month's board.
    wanted = _judged_pairs(engine, judged_like)
    _wait(lambda: _judged_pairs(engine, "extractive_tight") == wanted and _on_board(engine, month), airflow, 600,
          "the backfilled system on the board")
    _wait(lambda: not _unfinished_backfills(airflow), airflow, 180, "the backfill to end")
    counts_after = db.row_counts(engine)
    assert counts_after["reports"] == counts_before["reports"] + len(expected)
    # The month's board gained one version, the one that counts the new system.
    assert counts_after["board_versions"] == counts_before["board_versions"] + 1
    assert {k: v for k, v in counts_after.items() if k not in PRODUCED} == \
        {k: v for k, v in counts_before.items() if k not in PRODUCED}


def _on_board(engine, month: str) -> bool:
    with engine.connect() as conn:
        return bool(conn.execute(sa.text("SELECT count(*) FROM leaderboard WHERE release_id = :m AND "
                                         "system_id = 'extractive_tight'"), {"m": month}).scalar())


def _unfinished_backfills(airflow: LocalAirflow) -> list[dict]:
    return [b for b in airflow.api("GET", "/backfills", params={"dag_id": BENCHMARK_DAG_ID})["backfills"]
            if b["completed_at"] is None]


def backfill_of_a_month_never_released_fails_at_once(engine, airflow: LocalAirflow, month: str) -> None:
    """POST /api/v2/backfills (the UI's "Run Backfill") over a month with no release: the run fails within a
    minute, in wait_for_release, with one line saying how to build that release, and writes nothing else."""
    dag_id = BENCHMARK_DAG_ID
    # Airflow admits one unfinished backfill per DAG: the scheduler closes the last one once its runs ended.
    _wait(lambda: not _unfinished_backfills(airflow), airflow, 180, "the earlier backfill to close")
    counts_before = db.row_counts(engine)

    started = time.monotonic()
    airflow.api("POST", "/backfills", json={
        "dag_id": dag_id, "from_date": f"{month}-01T00:00:00Z", "to_date": f"{month}-01T00:00:00Z",
        "dag_run_conf": {"systems": ["extractive_tight"]}})
    while True:  # the schedule ends before this month: only the backfill creates its run
        runs = [r for r in airflow.dag_runs(dag_id) if (r["logical_date"] or "").startswith(f"{month}-01")]
        if runs and runs[0]["state"] in ("success", "failed"):
            break
        assert time.monotonic() - started < 60, f"backfill run still {runs}: {airflow.log_tail(5000)}"
        time.sleep(2)
    (run,) = runs
    assert (run["run_type"], run["state"]) == ("backfill", "failed")

    run_path = f"/dags/{dag_id}/dagRuns/{quote(run['dag_run_id'], safe='')}"
    tis = airflow.task_instances(dag_id, run["dag_run_id"])
    states = {t["task_id"]: t["state"] for t in tis}
    # wait_for_release failed on its first try (no retry, no reschedule); `finish` then says the run did nothing.
    assert {t for t, state in states.items() if state == "failed"} == {"wait_for_release", "finish"}, states
    assert states["plan"] == "upstream_failed"
    waited = next(t for t in tis if t["task_id"] == "wait_for_release")
    assert waited["try_number"] == 1
    log = airflow.api("GET", f"{run_path}/taskInstances/wait_for_release/logs/1",
                      params={"full_content": "true"})["content"]
    said = [json.dumps(event) for event in log if "was never started" in json.dumps(event)]
    assert len(said) == 1, log
    assert f"release {month} was never started: build it with `deepscholar release build {month}`" in said[0]
    assert not any("waiting:" in json.dumps(event) for event in log)

    # Nothing of the month was written but the run's own record, blocked with the same line.
    with engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT state, message FROM benchmark_runs WHERE release_id = :m"),
                            {"m": month}).all()
    assert [r.state for r in rows] == ["blocked"]
    assert rows[0].message.startswith(f"release {month} was never started: ")
    counts_after = db.row_counts(engine)
    assert counts_after["benchmark_runs"] == counts_before["benchmark_runs"] + 1
    assert {k: v for k, v in counts_after.items() if k != "benchmark_runs"} == \
        {k: v for k, v in counts_before.items() if k != "benchmark_runs"}
