"""The benchmark DAG on Airflow's distributed executor: CeleryExecutor, a Redis broker, two workers.

The deployment of docker-compose.yaml's `celery` profile as local processes (LocalAirflow with
executor="celery"): `airflow api-server`, `scheduler`, `dag-processor`, `triggerer` and two
`airflow celery worker`s, each standing for its own host, with Airflow's metadata and Celery's result
backend in PostgreSQL. The demo month's release is published beforehand; the benchmark run for it is
triggered through the REST API as an operator's backfill would be, and must generate, judge and publish
the leaderboard with task instances spread over both workers.

Redis: the server at 127.0.0.1:6379 when it answers, else a `redis-server` started here on a free port;
without either the test skips outside CI and fails on CI.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time

import pytest
import sqlalchemy as sa
from support.settings import replay_settings

from deepscholar.demo import demo_schedule_env, replay_endpoints
from deepscholar.local_airflow import LocalAirflow, drop_database, free_port, fresh_metadata_database
from deepscholar.orchestration import BENCHMARK_DAG_ID
from deepscholar.release.spec import ReleaseSpec
from deepscholar.release.steps import build_release
from deepscholar.replay.demo_snapshot import write_demo_snapshot
from deepscholar.replay.server import ReplayServer
from deepscholar.systems.registry import add_system

pytestmark = pytest.mark.slow

MONTH = "2025-06"
SYSTEMS = (("extractive", "extractive"), ("oracle", "oracle"), ("human_exemplar", "human_exemplar"))


def _redis_answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


@pytest.fixture
def broker_url(tmp_path):
    if _redis_answers("127.0.0.1", 6379):
        yield "redis://127.0.0.1:6379/0"
        return
    binary = shutil.which("redis-server")
    if binary is None:
        reason = "no Redis at 127.0.0.1:6379 and no redis-server to start: the Celery test needs a broker"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    port = free_port()
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--dir", str(tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        while not _redis_answers("127.0.0.1", port):
            assert proc.poll() is None and time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.2)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture
def metadata_url(db_url):
    name = f"{sa.engine.make_url(db_url).database}_airflow_celery"
    yield fresh_metadata_database(db_url, name)
    drop_database(db_url, name)


@pytest.fixture
def published_month(engine, tmp_path):
    snapshot = tmp_path / "snapshot"
    write_demo_snapshot(snapshot, month=MONTH)
    manifest = json.loads((snapshot / "manifest.json").read_text())
    server = ReplayServer(snapshot).start()
    try:
        spec = ReleaseSpec(categories=manifest["categories"], judge="local")
        assert build_release(engine, MONTH, spec, replay_settings(server))["gx_success"]
        for name, kind in SYSTEMS:
            add_system(engine, name, kind)
        yield server, manifest
    finally:
        server.stop()


def _task_instances(metadata_url: str, run_id: str) -> list[sa.Row]:
    engine = sa.create_engine(metadata_url)
    try:
        with engine.connect() as conn:
            return conn.execute(sa.text(
                "SELECT task_id, map_index, state, hostname, queue FROM task_instance "
                "WHERE dag_id = :d AND run_id = :r"), {"d": BENCHMARK_DAG_ID, "r": run_id}).all()
    finally:
        engine.dispose()


def test_benchmark_month_runs_on_two_celery_workers(engine, db_url, metadata_url, broker_url, published_month,
                                                    tmp_path):
    server, manifest = published_month
    # The scheduler itself starts the month's run once the DAG is unpaused (as the monthly cron tick does).
    env = replay_endpoints(server, manifest, db_url) | demo_schedule_env(MONTH)
    # A small drift slice: re-judging 40 items per metric with the local judge's model would double the month.
    env["DEEPSCHOLAR_CALIBRATION_ITEMS"] = "5"
    airflow = LocalAirflow(tmp_path / "home", metadata_url, env, executor="celery", broker_url=broker_url,
                           workers=2, worker_concurrency=2, parallelism=8)
    with airflow:
        airflow.wait_for_dags([BENCHMARK_DAG_ID])
        airflow.unpause(BENCHMARK_DAG_ID)
        deadline = time.monotonic() + 900
        runs: list[dict] = []
        while time.monotonic() < deadline:
            runs = airflow.dag_runs(BENCHMARK_DAG_ID)
            if runs and all(r["state"] in ("success", "failed") for r in runs):
                break
            time.sleep(5)
        assert len(runs) == 1, f"expected the month's one scheduled run, got {runs}: {airflow.log_tail(3000)}"
        run_id, state = runs[0]["dag_run_id"], runs[0]["state"]
        tasks = _task_instances(metadata_url, run_id)
        detail = "\n".join(f"{t.task_id}[{t.map_index}] {t.state} on {t.hostname} ({t.queue})" for t in tasks)
        assert state == "success", f"benchmark run ended {state}:\n{detail}\n{airflow.log_tail(4000)}"

    with engine.connect() as conn:
        board = conn.execute(sa.text("SELECT DISTINCT system_id FROM leaderboard WHERE release_id = :r"),
                             {"r": MONTH}).scalars().all()
    assert sorted(board) == sorted(name for name, _ in SYSTEMS)
    ran = [t for t in tasks if t.state == "success"]
    assert {t.queue for t in ran} == {airflow.queue}
    hosts = {t.hostname for t in ran}
    assert hosts == {"worker-1", "worker-2"}, f"tasks ran on {hosts}:\n{detail}"
