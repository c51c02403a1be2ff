"""Processes killed mid-work and evaluations racing each other: the real CLI, real HTTP, real PostgreSQL.

A worker can die at any instruction (OOM killer, node loss, `kill -9`): Airflow then runs the task again.
Each kill case runs a `deepscholar` command as a subprocess with its external service slowed down
so it is surely mid-way, SIGKILLs it once the warehouse shows part of its work, runs the same command
again to the end, and checks that nothing stored before the kill was lost, no natural key is doubled,
and the result is what an uninterrupted run stores. The concurrency case starts two evaluations of the same
month at the same moment, as two Airflow judge tasks or two operators would, and counts what the provider
is asked.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import sqlalchemy as sa
from support.openai_stub import OpenAIStub
from support.settings import replay_settings
from support.warehouse import empty_warehouse

from deepscholar import db
from deepscholar.demo import DEMO_HTTP_SYSTEM, register_scheduled_demo_systems, replay_endpoints
from deepscholar.release.spec import ReleaseSpec
from deepscholar.release.steps import build_release, release_counts
from deepscholar.replay.demo_snapshot import write_demo_snapshot
from deepscholar.replay.server import DEMO_SYSTEM_PATH, Delay, ReplayServer
from faults.conftest import assert_no_loss, warehouse_fingerprint

pytestmark = pytest.mark.slow  # kills CLI subprocesses mid-run, minutes

MONTH = "2025-06"
JUDGE = "openai/interrupted-judge"
CLI = [sys.executable, "-m", "deepscholar.cli"]
LEASE = 3.0  # seconds of a judge's claims (DEEPSCHOLAR_JUDGE_CLAIM_LEASE_SECONDS)
KILLED_LEASE = 15.0  # the killed-holder case: outlives the next `deepscholar evaluate`'s start (imports)


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory):
    root = tmp_path_factory.mktemp("snapshot")
    write_demo_snapshot(root, month=MONTH)
    return root


@pytest.fixture(scope="module")
def warehouse(db_url):
    return db.get_engine(db_url)


def _env(server: ReplayServer, snapshot: Path, db_url: str, **extra: str) -> dict[str, str]:
    manifest = json.loads((snapshot / "manifest.json").read_text())
    env = dict(os.environ) | replay_endpoints(server, manifest, db_url)
    env.update({"DEEPSCHOLAR_HOME": tempfile.mkdtemp(prefix="deepscholar_kill_"), "OPENAI_API_KEY": "sk-test-kill",
                "DEEPSCHOLAR_LLM_BACKOFF_SECONDS": "0.05", **extra})
    return env


def _count(engine, sql: str, **params) -> int:
    with engine.connect() as conn:
        return conn.execute(sa.text(sql), params).scalar_one()


def _run_and_kill(cmd: list[str], env: dict[str, str], engine, progress_sql: str, at_least: int,
                  timeout: float = 120, also=lambda: True) -> tuple[int, str]:
    """Start the command, SIGKILL it once `progress_sql` counts at least `at_least` (and `also()` holds);
    the count at the kill."""
    log = tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False)
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + timeout
    try:
        while True:
            done = _count(engine, progress_sql)
            if done >= at_least and also():
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
                return done, Path(log.name).read_text()
            assert proc.poll() is None, f"{cmd} ended ({proc.returncode}) before it could be killed:\n" + \
                Path(log.name).read_text()[-3000:]
            assert time.monotonic() < deadline, f"no progress to kill at: {Path(log.name).read_text()[-3000:]}"
            time.sleep(0.1)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def _run(cmd: list[str], env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess:
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{cmd} exited {done.returncode}:\n{(done.stdout + done.stderr)[-3000:]}"
    return done


def _release_keys(engine) -> dict:
    with engine.connect() as conn:
        return {
            "counts": {k: v for k, v in release_counts(conn, MONTH).items()},
            "queries": set(conn.execute(sa.text("SELECT arxiv_id FROM release_queries")).scalars()),
            "references": {tuple(r) for r in conn.execute(sa.text(
                "SELECT arxiv_id, cite_key, resolved_arxiv_id, openalex_id, cited_by_count, is_important "
                "FROM exemplar_references"))},
            "nuggets": {tuple(r) for r in conn.execute(sa.text(
                "SELECT arxiv_id, nugget_idx, text, importance FROM nuggets"))},
            "status": conn.execute(sa.text("SELECT status FROM releases WHERE release_id = :r"),
                                   {"r": MONTH}).scalar(),
        }


def _publish(engine, server: ReplayServer, snapshot: Path) -> None:
    categories = json.loads((snapshot / "manifest.json").read_text())["categories"]
    spec = ReleaseSpec(categories=categories, judge="local")
    assert build_release(engine, MONTH, spec, replay_settings(server))["gx_success"]


# --- SIGKILL, then the same command again ----------------------------------------------------------------

def test_killed_mid_release_then_rerun(warehouse, db_url, snapshot):
    engine = warehouse
    empty_warehouse(engine)
    with ReplayServer(snapshot) as server:
        _publish(engine, server, snapshot)
        undisturbed = _release_keys(engine)
        empty_warehouse(engine)

        n_papers = len(undisturbed["queries"])
        server.inject_failures("/e-print/", [Delay(0.7)] * 100)  # ~0.7 s per paper: surely mid-extraction
        env = _env(server, snapshot, db_url)
        cmd = [*CLI, "release", "build", MONTH]
        done, _ = _run_and_kill(cmd, env, engine, "SELECT count(*) FROM release_queries", at_least=2)
        assert 2 <= done < n_papers, "the kill did not land mid-extraction"
        after_kill = warehouse_fingerprint(engine)
        assert _count(engine, "SELECT count(*) FROM releases WHERE status = 'building'") == 1

        server.clear_failures()
        _run(cmd, env)
    assert_no_loss(after_kill, warehouse_fingerprint(engine), allowed_to_change=list(after_kill))
    final = _release_keys(engine)
    assert final == undisturbed


def test_killed_mid_generation_then_rerun(warehouse, db_url, snapshot):
    engine = warehouse
    empty_warehouse(engine)
    with ReplayServer(snapshot) as server:
        _publish(engine, server, snapshot)
        register_scheduled_demo_systems(engine, server.demo_system_url)
        n_queries = _count(engine, "SELECT count(*) FROM release_queries")
        # The external HTTP system answers in 0.8 s per query: the offline systems finish, it is mid-way.
        server.inject_failures(DEMO_SYSTEM_PATH, [Delay(0.8)] * 100)
        env = _env(server, snapshot, db_url)
        cmd = [*CLI, "generate", "--release", MONTH]
        progress = f"SELECT count(*) FROM reports WHERE system_id = '{DEMO_HTTP_SYSTEM}'"
        done, _ = _run_and_kill(cmd, env, engine, progress, at_least=2)
        assert 2 <= done < n_queries, "the kill did not land mid-generation"
        after_kill = warehouse_fingerprint(engine)

        server.clear_failures()
        _run(cmd, env)
    assert_no_loss(after_kill, warehouse_fingerprint(engine), ["reports", "report_sources", "llm_calls"])
    with engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT system_id, count(*), count(DISTINCT arxiv_id), "
                                    "count(*) FILTER (WHERE status <> 'ok') FROM reports GROUP BY 1")).all()
    systems = _count(engine, "SELECT count(*) FROM systems WHERE active")
    assert len(rows) == systems
    assert all((n, distinct, failed) == (n_queries, n_queries, 0) for _, n, distinct, failed in rows), rows


def _evaluate_cmd() -> list[str]:
    return [*CLI, "evaluate", "--release", MONTH, "--judge", JUDGE, "--metrics", "organization",
            "--concurrency", "2", "--json"]


def _verdict(body: dict) -> str:
    return json.dumps({"decision": "B", "explanation": "grouped by theme"})


def _judged_month(engine, server, snapshot) -> int:
    """The published demo month with its offline systems' reports; returns the number of ok reports."""
    from deepscholar.systems.generation import generate_release

    empty_warehouse(engine)
    _publish(engine, server, snapshot)
    register_scheduled_demo_systems(engine, server.demo_system_url)
    generate_release(engine, MONTH)
    return _count(engine, "SELECT count(*) FROM reports WHERE status = 'ok'")


def _scores_once(engine, n_reports: int) -> None:
    with engine.connect() as conn:
        total, distinct, unscored, reports = conn.execute(sa.text(
            "SELECT count(*), count(DISTINCT (report_id, variant)), count(*) FILTER (WHERE unscored_reason "
            "IS NOT NULL), count(DISTINCT report_id) FROM metric_scores WHERE judge_config = :j"),
            {"j": f"llm:{JUDGE}"}).one()
    assert total == distinct and unscored == 0 and reports == n_reports


@contextlib.contextmanager
def _judging(engine, db_url, snapshot, delay: float):
    """The month with its reports, a judge answering after `delay` s, and the CLI's environment for it."""
    with ReplayServer(snapshot) as server, OpenAIStub() as stub:
        n_reports = _judged_month(engine, server, snapshot)
        stub.default = _verdict
        stub.delay = delay
        # Short claim leases: a killed judge's claims hold the next run back for seconds, not minutes.
        yield stub, n_reports, _env(server, snapshot, db_url, DEEPSCHOLAR_JUDGE_API_BASE=stub.url,
                                    DEEPSCHOLAR_JUDGE_CLAIM_LEASE_SECONDS=str(LEASE))


def test_killed_mid_judging_then_rerun_pays_only_for_what_was_not_answered(warehouse, db_url, snapshot):
    engine = warehouse
    with _judging(engine, db_url, snapshot, delay=0.25) as (stub, n_reports, env):
        progress = f"SELECT count(DISTINCT report_id) FROM metric_scores WHERE judge_config = 'llm:{JUDGE}'"
        # Some reports need no request (organization of the exemplar against itself): wait for answers too.
        done, _ = _run_and_kill(_evaluate_cmd(), env, engine, progress, at_least=3, also=lambda: stub.requests >= 6)
        assert 3 <= done < n_reports, "the kill did not land mid-judging"
        answered_before_kill = stub.requests
        after_kill = warehouse_fingerprint(engine)
        after_kill.pop("judge_claims")  # work in progress of the killed run: the next run deletes them

        stub.delay = 0
        _run(_evaluate_cmd(), env)
        total = stub.requests
    assert_no_loss(after_kill, warehouse_fingerprint(engine),
                   ["metric_scores", "judgments", "llm_calls", "leaderboard_systems", "leaderboard_metrics",
                    "board_versions", "month_costs", "month_judging_spend", "judging_estimates", "board_queries",
                    "board_query_scores", "month_judge_requests"])
    # (the roll-up stores the month's costs beside its board; the finished run, what it predicted)
    _scores_once(engine, n_reports)
    # What the killed run was answered is replayed from llm_calls: only the requests in flight at the
    # kill (concurrency 2) are paid twice.
    needed = _count(engine, "SELECT count(*) FROM llm_calls WHERE model = :m", m=JUDGE)
    assert answered_before_kill >= 6 and needed <= total <= needed + 2, (total, answered_before_kill, needed)
    print(f"killed mid-judging after {answered_before_kill} answers: {total} provider requests in all for "
          f"{needed} distinct requests needed")


def _forget_judging(engine) -> None:
    """The month as before its first evaluation by JUDGE: no judgment, score or cached answer of it."""
    with engine.begin() as conn:
        for table in ("judgments", "metric_scores"):
            conn.execute(sa.text(f"DELETE FROM {table} WHERE judge_config = :j"), {"j": f"llm:{JUDGE}"})
        conn.execute(sa.text("DELETE FROM llm_calls WHERE model = :m"), {"m": JUDGE})


def _leaderboard_complete(engine) -> None:
    with engine.connect() as conn:
        rows, distinct, systems = conn.execute(sa.text(
            "SELECT count(*), count(DISTINCT (system_id, metric)), count(DISTINCT system_id) FROM leaderboard_metrics "
            "WHERE release_id = :r AND judge_config = :j"), {"r": MONTH, "j": f"llm:{JUDGE}"}).one()
        judged = conn.execute(sa.text("SELECT count(DISTINCT system_id) FROM reports WHERE status = 'ok'")).scalar()
        claims = conn.execute(sa.text("SELECT count(*) FROM judge_claims")).scalar()
    assert rows == distinct and systems == judged > 0
    assert claims == 0, "claims left behind"


def test_two_evaluations_of_the_same_month_at_once_pay_once(warehouse, db_url, snapshot):
    """Two `deepscholar evaluate` processes started together (a judge task cleared in the UI while the
    scheduled run still judges, or an operator's command beside the DAG) send exactly the provider requests
    one evaluation alone sends: every judgment is leased (evaluation/judging/_leases.py) before its LLM work."""
    engine = warehouse
    with _judging(engine, db_url, snapshot, delay=0.2) as (stub, n_reports, env):
        alone = json.loads(_run(_evaluate_cmd(), env).stdout)["llm_requests"]
        assert stub.requests == alone > 0
        _scores_once(engine, n_reports)

        _forget_judging(engine)
        stub.bodies.clear()
        stub.max_in_flight = 0
        logs = [tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False) for _ in range(2)]
        procs = [subprocess.Popen(_evaluate_cmd(), env=env, stdout=subprocess.PIPE, stderr=log, text=True)
                 for log in logs]
        outs = [p.communicate(timeout=300)[0] for p in procs]
        together = stub.requests
    errors = [Path(log.name).read_text() for log in logs]
    for proc, err in zip(procs, errors, strict=True):
        assert proc.returncode == 0, err[-3000:]
    paid = [json.loads(out)["llm_requests"] for out in outs]
    # They truly ran at once: one found the other's live claims and waited for them.
    assert any("waiting for" in err and "judged by another process" in err for err in errors), errors
    assert together == alone == sum(paid), (together, alone, paid)
    _scores_once(engine, n_reports)
    _leaderboard_complete(engine)
    print(f"one evaluation alone: {alone} provider requests; two at once: {together} ({paid[0]} + {paid[1]})")


def test_a_judge_killed_holding_claims_delays_the_next_run_by_one_lease_at_most(warehouse, db_url, snapshot):
    """A judge SIGKILLed mid-run leaves its claims behind; the next run judges what is free, waits for the dead
    holder's reports until their lease runs out, then judges them itself: the board is complete."""
    engine = warehouse
    with _judging(engine, db_url, snapshot, delay=0.3) as (stub, n_reports, env):
        # Longer than the next command takes to start: it must find the dead holder's leases still live.
        env["DEEPSCHOLAR_JUDGE_CLAIM_LEASE_SECONDS"] = str(KILLED_LEASE)
        _run_and_kill(_evaluate_cmd(), env, engine, "SELECT count(*) FROM judge_claims", at_least=1,
                      also=lambda: stub.requests >= 4)
        left = _count(engine, "SELECT count(*) FROM judge_claims")
        scored = _count(engine, "SELECT count(DISTINCT report_id) FROM metric_scores")
        assert left > 0 and scored < n_reports, (left, scored)
        answered_before_kill = stub.requests

        stub.delay = 0
        started = time.monotonic()
        done = _run(_evaluate_cmd(), env)
        took = time.monotonic() - started
        total = stub.requests
    assert "waiting for" in done.stderr and "judged by another process" in done.stderr, done.stderr[-3000:]
    _scores_once(engine, n_reports)
    _leaderboard_complete(engine)
    # Answers the killed run received come from llm_calls; only its requests in flight are paid twice.
    needed = _count(engine, "SELECT count(*) FROM llm_calls WHERE model = :m", m=JUDGE)
    assert needed <= total <= needed + 2, (total, answered_before_kill, needed)
    print(f"killed holding {left} claims after {answered_before_kill} answers; the next run finished in "
          f"{took:.1f} s: {total} provider requests in all for {needed} needed")
