"""A system registered after two months were published is backfilled through Airflow for both months.

Runs a real `airflow standalone` (scheduler, dag-processor, API server, LocalExecutor) and queues the
backfill with `deepscholar systems backfill` (the plan and its estimate, then Airflow's REST API), exactly as
an operator would; only the new system's missing reports may
appear and nothing else may change. Then a backfill of a month that has no release, created through the
REST API the UI's "Run Backfill" uses, must fail at once in `wait_for_release` with one line saying how to
build the month, instead of waiting days for a release nobody is building (issue 22).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from urllib.parse import quote

import pytest
import requests
import sqlalchemy as sa
from support.settings import replay_settings

from deepscholar import cli, db
from deepscholar.local_airflow import airflow_bin, airflow_env
from deepscholar.release.spec import ReleaseSpec
from deepscholar.release.steps import build_release
from deepscholar.replay.demo_snapshot import write_demo_snapshot
from deepscholar.replay.server import ReplayServer
from deepscholar.systems.generation import generate_release
from deepscholar.systems.registry import add_system

pytestmark = pytest.mark.slow  # real Airflow processes: minutes, not seconds

MONTHS = ("2025-05", "2025-06")
UNRELEASED = "2025-07"  # no release was ever started for it


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def two_published_months(engine, tmp_path):
    for month in MONTHS:
        snapshot = tmp_path / f"snapshot_{month}"
        write_demo_snapshot(snapshot, month=month)
        categories = json.loads((snapshot / "manifest.json").read_text())["categories"]
        with ReplayServer(snapshot) as server:
            spec = ReleaseSpec(categories=categories, judge="local")
            assert build_release(engine, month, spec, replay_settings(server))["gx_success"]
    add_system(engine, "extractive", "extractive")
    for month in MONTHS:
        generate_release(engine, month)
    return engine


@pytest.fixture
def airflow_metadata_url(db_url):
    """Airflow's own metadata in a separate PostgreSQL database (SQLite locks under a running scheduler)."""
    url = sa.engine.make_url(db_url)
    name = f"{url.database}_airflow"
    admin = sa.create_engine(url.set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    yield url.set(database=name).render_as_string(hide_password=False)
    with admin.connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture
def openalex_replay(two_published_months, tmp_path):
    """Judging freezes the cited-by counts of the papers reports cite: OpenAlex must answer (replayed)."""
    with ReplayServer(tmp_path / f"snapshot_{MONTHS[-1]}") as server:
        yield server.openalex_url


@pytest.fixture
def standalone(tmp_path, db_url, airflow_metadata_url, openalex_replay):
    home = tmp_path / "home"
    port = _free_port()
    env = airflow_env(home, {
        "DEEPSCHOLAR_OPENALEX_URL": openalex_replay,
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": airflow_metadata_url,
        "DEEPSCHOLAR_DB_URL": db_url,
        "DEEPSCHOLAR_TASK_RETRIES": "0",
        # The drift check re-judges its calibration slice with the local judge's model: a small slice keeps
        # the step (tests/integration/test_judge_drift.py tests it) from doubling the month's judging time.
        "DEEPSCHOLAR_CALIBRATION_ITEMS": "5",
        # Only the two past months exist: no automatic run for the current month may start on unpause.
        "DEEPSCHOLAR_SCHEDULE_START": MONTHS[0], "DEEPSCHOLAR_SCHEDULE_END": MONTHS[-1],
        "AIRFLOW__CORE__PARALLELISM": "4",
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
        "AIRFLOW__SCHEDULER__DAG_DIR_LIST_INTERVAL": "5",
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
    })
    log = (tmp_path / "standalone.log").open("w")
    proc = subprocess.Popen([airflow_bin(), "standalone"], env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            try:
                if requests.get(f"http://127.0.0.1:{port}/api/v2/monitor/health", timeout=2).ok:
                    break
            except requests.RequestException:
                pass
            time.sleep(2)
        else:
            pytest.fail("airflow standalone did not answer: " + (tmp_path / "standalone.log").read_text()[-3000:])
        yield env, tmp_path / "standalone.log"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


def _leaderboard_systems(engine) -> set[tuple[str, str]]:
    with engine.connect() as conn:
        return {tuple(r) for r in conn.execute(sa.text("SELECT release_id, system_id FROM leaderboard"))}


def _airflow(env, *args) -> subprocess.CompletedProcess:
    return subprocess.run([airflow_bin(), *args], env=env, capture_output=True, text=True, timeout=120)


def _serialized(metadata_url: str, dag_id: str) -> bool:
    engine = sa.create_engine(metadata_url)
    try:
        with engine.connect() as conn:
            return bool(conn.execute(sa.text("SELECT count(*) FROM serialized_dag WHERE dag_id = :d"),
                                     {"d": dag_id}).scalar())
    except sa.exc.ProgrammingError:  # tables not migrated yet
        return False
    finally:
        engine.dispose()


def _api(env, method: str, path: str, **kwargs):
    """Airflow's REST API (/api/v2), as the UI calls it, signed in as the standalone's admin (the client
    `deepscholar systems backfill` queues with)."""
    from deepscholar.airflow_api import AirflowAPI

    passwords = os.path.join(env["AIRFLOW_HOME"], "simple_auth_manager_passwords.json.generated")
    with open(passwords) as f:
        password = json.load(f)["admin"]
    return AirflowAPI(f"http://127.0.0.1:{env['AIRFLOW__API__PORT']}", "admin", password).request(method, path, **kwargs)


def _backfill_of_a_month_never_released_fails_at_once(engine, env, log_path):
    """POST /api/v2/backfills (the UI's "Run Backfill") over a month with no release: the run fails within a
    minute, in wait_for_release, with one line saying how to build that release, and writes nothing else."""
    dag_id = "deepscholar_benchmark"
    # Airflow admits one unfinished backfill per DAG: the scheduler closes the first once its runs ended.
    deadline = time.monotonic() + 180
    while any(b["completed_at"] is None
              for b in _api(env, "GET", "/backfills", params={"dag_id": dag_id})["backfills"]):
        assert time.monotonic() < deadline, log_path.read_text()[-5000:]
        time.sleep(2)
    counts_before = db.row_counts(engine)

    started = time.monotonic()
    _api(env, "POST", "/backfills", json={
        "dag_id": dag_id, "from_date": f"{UNRELEASED}-01T00:00:00Z", "to_date": f"{UNRELEASED}-01T00:00:00Z",
        "dag_run_conf": {"systems": ["extractive_tight"]}})
    while True:  # the schedule ends with the last published month: only the backfill creates this run
        runs = [r for r in _api(env, "GET", f"/dags/{dag_id}/dagRuns", params={"limit": 100})["dag_runs"]
                if (r["logical_date"] or "").startswith(f"{UNRELEASED}-01")]
        if runs and runs[0]["state"] in ("success", "failed"):
            break
        assert time.monotonic() - started < 60, f"backfill run still {runs}: {log_path.read_text()[-5000:]}"
        time.sleep(2)
    (run,) = runs
    assert (run["run_type"], run["state"]) == ("backfill", "failed")

    tis = _api(env, "GET", f"/dags/{dag_id}/dagRuns/{quote(run['dag_run_id'], safe='')}/taskInstances",
               params={"limit": 100})["task_instances"]
    states = {t["task_id"]: t["state"] for t in tis}
    # wait_for_release failed on its first try (no retry, no reschedule); `finish` then says the run did nothing.
    assert {t for t, state in states.items() if state == "failed"} == {"wait_for_release", "finish"}, states
    assert states["plan"] == "upstream_failed"
    waited = next(t for t in tis if t["task_id"] == "wait_for_release")
    assert waited["try_number"] == 1
    log = _api(env, "GET", f"/dags/{dag_id}/dagRuns/{quote(run['dag_run_id'], safe='')}/taskInstances/"
                           f"wait_for_release/logs/1", params={"full_content": "true"})["content"]
    said = [json.dumps(event) for event in log if "was never started" in json.dumps(event)]
    assert len(said) == 1, log
    assert f"release {UNRELEASED} was never started: build it with `deepscholar release build {UNRELEASED}`" \
        in said[0]
    assert not any("waiting:" in json.dumps(event) for event in log)

    # Nothing of the month was written but the run's own record, blocked with the same line.
    with engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT state, message FROM benchmark_runs WHERE release_id = :m"),
                            {"m": UNRELEASED}).all()
    assert [r.state for r in rows] == ["blocked"]
    assert rows[0].message.startswith(f"release {UNRELEASED} was never started: ")
    counts_after = db.row_counts(engine)
    assert counts_after["benchmark_runs"] == counts_before["benchmark_runs"] + 1
    assert {k: v for k, v in counts_after.items() if k != "benchmark_runs"} == \
        {k: v for k, v in counts_before.items() if k != "benchmark_runs"}


def _report_keys(engine, system_id):
    with engine.connect() as conn:
        return conn.execute(sa.text(
            "SELECT release_id, arxiv_id, status, updated_at FROM reports WHERE system_id = :s "
            "ORDER BY release_id, arxiv_id"), {"s": system_id}).all()


def test_backfill_produces_exactly_the_new_systems_missing_reports(two_published_months, standalone, db_url,
                                                                   monkeypatch, capsys):
    engine = two_published_months
    env, log_path = standalone
    before = _report_keys(engine, "extractive")
    with engine.connect() as conn:
        expected = conn.execute(sa.text(
            "SELECT release_id, arxiv_id FROM release_queries ORDER BY release_id, arxiv_id")).all()
    assert {r.release_id for r in expected} == set(MONTHS)
    counts_before = db.row_counts(engine)

    add_system(engine, "extractive_tight", "extractive", {"top_k": 6})

    # The DAG must be parsed by the dag-processor before a backfill can be created for it.
    metadata = env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]
    deadline = time.monotonic() + 120
    while not _serialized(metadata, "deepscholar_benchmark"):
        assert time.monotonic() < deadline, log_path.read_text()[-3000:]
        time.sleep(3)
    _airflow(env, "dags", "unpause", "deepscholar_benchmark")
    # Queued as an operator registering a system does: `deepscholar systems backfill` prints the plan and its
    # estimate, then creates the backfill through Airflow's REST API (every month: a model-free kind).
    monkeypatch.setenv("DEEPSCHOLAR_DB_URL", db_url)
    monkeypatch.setenv("DEEPSCHOLAR_AIRFLOW_API_URL", f"http://127.0.0.1:{env['AIRFLOW__API__PORT']}")
    with open(os.path.join(env["AIRFLOW_HOME"], "simple_auth_manager_passwords.json.generated")) as f:
        monkeypatch.setenv("AIRFLOW_API_PASSWORD", json.load(f)["admin"])
    capsys.readouterr()
    assert cli.main(["systems", "backfill", "extractive_tight"]) == 0
    queued = capsys.readouterr().out
    assert "Estimate: judging $0.00" in queued and "queued backfill" in queued and "2025-05..2025-06" in queued

    deadline = time.monotonic() + 400
    while len(_report_keys(engine, "extractive_tight")) < len(expected):
        assert time.monotonic() < deadline, log_path.read_text()[-5000:]
        time.sleep(5)
    time.sleep(5)  # let the runs finish their last check task

    new = _report_keys(engine, "extractive_tight")
    assert [(r.release_id, r.arxiv_id) for r in new] == [tuple(e) for e in expected]
    assert all(r.status == "ok" for r in new)
    # Nothing else was touched: the existing system's reports keep their exact rows.
    assert _report_keys(engine, "extractive") == before
    # ... then judged on all seven metrics (its reports only) and rolled into each month's leaderboard.
    deadline = time.monotonic() + 600
    while _leaderboard_systems(engine) != {(m, "extractive_tight") for m in MONTHS}:
        assert time.monotonic() < deadline, log_path.read_text()[-5000:]
        time.sleep(5)
    with engine.connect() as conn:
        scored = conn.execute(sa.text("""
            SELECT r.system_id, count(DISTINCT (m.report_id, m.metric)) FROM metric_scores m
            JOIN reports r USING (report_id) GROUP BY 1""")).all()
    assert dict(scored) == {"extractive_tight": len(expected) * 7}
    counts_after = db.row_counts(engine)
    assert counts_after["reports"] == counts_before["reports"] + len(expected)
    produced = ("reports", "report_sources", "systems", "llm_calls", "judgments", "metric_scores",
                "source_cited_by", "leaderboard_systems", "leaderboard_metrics", "benchmark_runs", "judge_configs",
                "board_versions", "month_costs", "calibration_items", "judge_drift_checks",  # + the monthly drift check
                "board_queries", "board_query_scores",  # the per-query scores kept with each board version
                "month_judge_requests")  # the month's judge requests as the roll-up counted them
    assert {k: v for k, v in counts_after.items() if k not in produced} == \
        {k: v for k, v in counts_before.items() if k not in produced}

    _backfill_of_a_month_never_released_fails_at_once(engine, env, log_path)
