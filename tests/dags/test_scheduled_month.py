"""The monthly flow as deployed: the real scheduler fires both DAGs for month M at the same tick.

`airflow standalone` (scheduler, dag-processor, triggerer, API server, LocalExecutor; metadata in
PostgreSQL) runs the DAG files of this repository. Both DAGs are unpaused with their schedule bounded to
the demo month, so the scheduler itself creates both runs for the same logical date at the same moment,
as the cron tick on the 1st does. The release is made slower than the benchmark's start (the replay
server stalls arXiv's first answer), and nothing else is done by hand: the tests only wait and look.
"""

from __future__ import annotations

import json
import os
import time
from datetime import timedelta

import pytest
import sqlalchemy as sa
from support.backfill_checks import backfill_a_new_system, backfill_of_a_month_never_released_fails_at_once
from support.demo_month import write_unresolvable_snapshot
from support.judge_stub import scripted_judge
from support.notification_catchers import posted, smtp_inbox, webhook_connection
from support.polling import wait_until
from support.warehouse import ConnectionSampler, throwaway_warehouse

from deepscholar.airflow_api import AirflowAPIError
from deepscholar.demo import demo_schedule_env, replay_endpoints
from deepscholar.evaluation.metrics import registry
from deepscholar.evaluation.metrics.registry import annotatable_metric_names
from deepscholar.llm import prices
from deepscholar.local_airflow import LocalAirflow, drop_database, fresh_metadata_database
from deepscholar.orchestration import BENCHMARK_DAG_ID, RELEASE_DAG_ID
from deepscholar.replay.demo_snapshot import write_demo_snapshot
from deepscholar.replay.openai_batches import BatchStub
from deepscholar.replay.server import Delay, ReplayServer
from deepscholar.systems.registry import add_system

pytestmark = pytest.mark.slow

MONTH = "2025-06"
NEVER_RELEASED = "2025-07"  # after the schedule's end: only a backfill makes a run of it
RELEASE_STALL_SECONDS = 25  # longer than the benchmark run needs to start and look at the release
BATCH_SECONDS = 6  # how long the judge's batch API takes to answer a batch
BATCH_JUDGE = "openai/gpt-4o-mini"  # the third run's judge, through the batch API
REJECTED_JUDGE = "openai/gpt-4o"  # the second run's judge: priced, and over its budget
UNANSWERED_JUDGE = "openai/gpt-4.1"  # a run nobody approves: priced, over its budget
DIRECT_STOP_JUDGE = "openai/gpt-4.1-mini"  # approved, then its answers cost more than predicted (direct)
BATCH_STOP_JUDGE = "openai/gpt-4.1-nano"  # ... and through the batch API
BUDGET_USD = 1.0  # the operator's: the batch judge's core month fits in it, the other priced judges' do not
APPROVAL_HOURS = 0.015  # 54 s to answer an approval (the answered ones are answered in seconds)
USERS = "admin:admin,bob:user"  # bob may trigger runs and edit task instances (Airflow's User role)
MARGIN = 0.1  # DEEPSCHOLAR_JUDGE_BUDGET_MARGIN's default


@pytest.fixture
def snapshot(tmp_path):
    dest = tmp_path / "snapshot"
    write_demo_snapshot(dest, month=MONTH)
    return dest


@pytest.fixture
def metadata_url(db_url):
    name = f"{sa.engine.make_url(db_url).database}_airflow"
    yield fresh_metadata_database(db_url, name)
    drop_database(db_url, name)


def _systems(engine):
    for name, kind in (("oracle", "oracle"), ("human_exemplar", "human_exemplar")):
        add_system(engine, name, kind)


def _airflow(tmp_path, metadata_url, server, snapshot, db_url, extra: dict | None = None) -> LocalAirflow:
    manifest = json.loads((snapshot / "manifest.json").read_text())
    # Two extraction/resolution shards: still mapped tasks, half the task processes of the default four
    # (each one a process start on this 2-core machine; the demo month is small).
    # A 5-item drift slice: the drift check re-judges it with the judge's model (the local one: seconds per
    # metric at 40 items on 2 cores); tests/integration/test_judge_drift.py tests the check itself.
    env = replay_endpoints(server, manifest, db_url) | demo_schedule_env(MONTH) | {
        "DEEPSCHOLAR_TASK_RETRIES": "0", "DEEPSCHOLAR_RELEASE_SHARDS": "2",
        "DEEPSCHOLAR_CALIBRATION_ITEMS": "5"} | (extra or {})
    return LocalAirflow(tmp_path / "home", metadata_url, env)


# The warehouse of the first test: a server of its own that takes 40 connections. Four judge tasks at once
# with the pools of before (8 + 24 overflow each) could open 128; the bounded pools fit (connection_budget).
LIMITED_MAX_CONNECTIONS = 40
ORACLES = ("oracle", "oracle_b", "oracle_c")


@pytest.fixture
def limited_warehouse(monkeypatch):
    monkeypatch.setenv("DEEPSCHOLAR_EMBEDDED_MAX_CONNECTIONS", str(LIMITED_MAX_CONNECTIONS))
    with throwaway_warehouse("deepscholar_limited_", database="embedded") as (engine, _home):
        yield engine


@pytest.fixture
def judge_stub():
    """The benchmark's LLM judge: an OpenAI-compatible server answering every metric's prompt over HTTP, one
    by one and through its Files + Batches API (a batch ends BATCH_SECONDS after its creation)."""
    with BatchStub(answer=scripted_judge, delay=BATCH_SECONDS) as stub:
        stub.chat_delay = 0.2
        yield stub


def _overlap(task_instances: list[dict], task_id: str) -> int:
    """The most instances of a task that were running at the same moment."""
    edges = sorted((t[k], d) for t in task_instances if t["task_id"] == task_id and t["start_date"]
                   for k, d in (("start_date", 1), ("end_date", -1)))
    running = peak = 0
    for _, d in sorted(edges, key=lambda e: (e[0], e[1])):
        running += d
        peak = max(peak, running)
    return peak


def _wait(predicate, airflow: LocalAirflow, timeout: float, what: str):
    return wait_until(predicate, timeout, what, lambda: _diagnose(airflow))


def _diagnose(airflow: LocalAirflow) -> str:
    """Every run's state and its unfinished or failed tasks, the failed tasks' own logs, then the end of
    the standalone log."""
    lines, failed_logs = [], []
    for dag_id in (RELEASE_DAG_ID, BENCHMARK_DAG_ID):
        for run in airflow.dag_runs(dag_id):
            tasks = {t["task_id"]: t["state"] for t in airflow.task_instances(dag_id, run["dag_run_id"])}
            lines.append(f"{dag_id} {run['dag_run_id']} {run['state']}: "
                         + ", ".join(f"{k}={v}" for k, v in tasks.items() if v != "success"))
            failed_logs.append(airflow.failed_task_logs(dag_id, run["dag_run_id"]))
    return "\n".join(lines + failed_logs) + "\n" + airflow.log_tail(3000)


def _not_failed(airflow: LocalAirflow, dag_id: str) -> None:
    """Stop waiting at once when a run the test expects to succeed has failed (not after the timeout)."""
    failed = [r for r in airflow.dag_runs(dag_id) if r["state"] == "failed"]
    assert not failed, f"{dag_id} failed:\n{_diagnose(airflow)}"


def _leaderboard(engine) -> list[tuple]:
    with engine.connect() as conn:
        return conn.execute(sa.text("SELECT release_id, system_id FROM leaderboard ORDER BY 1, 2")).all()


def _runs(airflow: LocalAirflow, dag_id: str) -> list[dict]:
    return airflow.dag_runs(dag_id)


def _all_ended(airflow: LocalAirflow) -> bool:
    runs = _runs(airflow, RELEASE_DAG_ID) + _runs(airflow, BENCHMARK_DAG_ID)
    return bool(runs) and all(r["state"] in ("success", "failed") for r in runs)


def _benchmark_rows(engine) -> list[dict]:
    with engine.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(sa.text(
            "SELECT * FROM benchmark_runs ORDER BY started_at"))]


def _waiting_approvals(airflow: LocalAirflow) -> list[str]:
    """The runs whose budget approval waits for an answer."""
    waiting = []
    log = airflow.log_path.read_text(errors="replace") if airflow.log_path else ""
    for run in airflow.dag_runs(BENCHMARK_DAG_ID):
        for t in airflow.task_instances(BENCHMARK_DAG_ID, run["dag_run_id"]):
            # Only once the scheduler has taken in the paused process's end: an answer before that (seconds
            # after the pause, which no operator manages) races it in Airflow 3.3's LocalExecutor, which then
            # sees the resumed task queued under a finished process and marks it failed ("task state changed
            # externally"; CI hit it under load).
            paused = (f"Received executor event with state success for task instance TaskInstanceKey(dag_id="
                      f"'{BENCHMARK_DAG_ID}', task_id='approve_budget', run_id='{run['dag_run_id']}'")
            if t["task_id"] == "approve_budget" and t["state"] == "awaiting_input" and paused in log:
                waiting.append(run["dag_run_id"])
    return waiting


def _answer(api, run_id: str, choice: str) -> int:
    """Answer a run's budget approval (as an operator would in the UI, through the same REST API): the HTTP
    status Airflow answered."""
    try:
        api.request("PATCH", f"/dags/{BENCHMARK_DAG_ID}/dagRuns/{run_id}/taskInstances/approve_budget/-1/"
                             "hitlDetails", json={"chosen_options": [choice]})
    except AirflowAPIError as exc:
        return exc.status or 0
    return 200


class Approvals:
    """Answers the budget approvals as they appear: bob (a User-role account, not an approver) tries to
    approve each first, then admin gives the run's planned answer (None: nobody answers, it times out)."""

    def __init__(self, airflow: LocalAirflow, plan: dict[str, str | None], default: str | None = None) -> None:
        self.airflow, self.plan, self.default = airflow, plan, default
        self.bob = airflow.as_user("bob")
        self.by_bob: dict[str, int] = {}
        self.answered: dict[str, str] = {}

    def __call__(self) -> None:
        for run_id in _waiting_approvals(self.airflow):
            if run_id not in self.by_bob:
                self.by_bob[run_id] = _answer(self.bob, run_id, "Approve")
            choice = self.plan.get(run_id, self.default)
            if choice and run_id not in self.answered and _answer(self.airflow.client, run_id, choice) == 200:
                self.answered[run_id] = choice


def _first_running_batch(engine, timeout: float) -> str:
    """The provider's id of the first batch submitted and not ended yet (watched closely: it runs seconds)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with engine.connect() as conn:
            found = conn.execute(sa.text("SELECT provider_batch_id FROM llm_batches WHERE state = 'submitted' "
                                         "ORDER BY created_at LIMIT 1")).scalar()
        if found:
            return found
        time.sleep(0.3)
    raise AssertionError(f"no batch was submitted within {timeout:.0f} s")


def _budget_request(airflow: LocalAirflow, run_id: str) -> dict:
    return airflow.api("GET", f"/dags/{BENCHMARK_DAG_ID}/dagRuns/{run_id}/taskInstances/approve_budget/-1/"
                              "hitlDetails")


def _xcom(airflow, run_id: str, task_id: str, map_index: int):
    """A task's return value, through the REST API the UI reads it from."""
    entry = airflow.api("GET", f"/dags/{BENCHMARK_DAG_ID}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/"
                               "return_value", params={"map_index": map_index, "deserialize": "true"})
    value = entry["value"]
    while isinstance(value, str):  # JSON, possibly encoded twice; a plain string (a release id) stays as it is
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            break
    return value


def test_scheduled_month_goes_from_release_to_published_leaderboard_by_itself(
        limited_warehouse, db_url, metadata_url, snapshot, tmp_path, judge_stub, httpserver):
    """Also the month at the warehouse's connection limit: an LLM judge over real HTTP, four judge tasks at
    once with 16 requests in flight each, on a server that takes 40 connections. Every task succeeds at
    its first attempt (retries are off) and the peak stays under the limit.

    And the month's budget, the operator's $1 (issue 46): the stub judge has no price, so its cost is counted
    at the stated fallback price; the run asks for an approval and waits for it (awaiting_input); bob, a
    User-role account who is no approver, is refused (403); admin approves through the REST API, and the
    month is judged. Then bob starts a run under a priced judge with no budget of its own (null) and another
    asking for $1e9: the operator's budget holds for both, so both ask; the first is rejected, the second left
    unanswered times out, and neither sends anything. Two runs approved over a budget of $0.001 whose answers
    cost far more than predicted stop at the approved total plus the margin mid-run, directly and through
    the batch API."""
    engine = limited_warehouse
    warehouse_url = engine.url.render_as_string(hide_password=False)
    for name in ORACLES:
        add_system(engine, name, "oracle")
    add_system(engine, "human_exemplar", "human_exemplar")
    judge = {"DEEPSCHOLAR_RELEASE_JUDGE": "local", "DEEPSCHOLAR_JUDGE": "openai/stub-judge",
             "DEEPSCHOLAR_JUDGE_API_BASE": judge_stub.url, "OPENAI_API_KEY": "test",
             "DEEPSCHOLAR_JUDGE_TASKS": "4", "DEEPSCHOLAR_JUDGE_CONCURRENCY": "16",
             "DEEPSCHOLAR_JUDGE_JOB_REPORTS": "24", "DEEPSCHOLAR_TRACKS": ",".join(registry.tracks()),
             # The drift check re-judges a small calibration slice past the cache (the stub has no price).
             "DEEPSCHOLAR_CALIBRATION_ITEMS": "5", "DEEPSCHOLAR_CALIBRATION_MAX_COST_USD": "none",
             "DEEPSCHOLAR_JUDGE_BUDGET_USD": str(BUDGET_USD), "DEEPSCHOLAR_BATCH_POLL_SECONDS": "10",
             "DEEPSCHOLAR_JUDGE_BUDGET_APPROVAL_HOURS": str(APPROVAL_HOURS),
             "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": USERS,
             # What the operator is told: approval requests and failed tasks, to a webhook receiver.
             "AIRFLOW_CONN_HOOK_E2E": webhook_connection(httpserver.url_for("/hook")),
             "DEEPSCHOLAR_NOTIFY": "approval_asked,run_failed,board_published:hook_e2e"}
    httpserver.expect_request("/hook", method="POST").respond_with_data("ok")
    # Answers far dearer than the prediction's default tokens: the runs approved below pass what was approved.
    judge_stub.usage_by_model = {"gpt-4.1-mini": (100_000, 10), "gpt-4.1-nano": (1_000_000, 10)}
    with ReplayServer(snapshot) as server, ConnectionSampler(warehouse_url, interval=0.1) as connections:
        server.inject_failures("/api/query", [Delay(RELEASE_STALL_SECONDS)])
        with _airflow(tmp_path, metadata_url, server, snapshot, warehouse_url, judge) as airflow:
            airflow.wait_for_dags([RELEASE_DAG_ID, BENCHMARK_DAG_ID])
            airflow.unpause(RELEASE_DAG_ID, BENCHMARK_DAG_ID)  # the scheduler fires both: the cron tick

            first = Approvals(airflow, {}, default="Approve")

            def approving_until_the_board() -> list:
                first()
                _not_failed(airflow, BENCHMARK_DAG_ID)
                return _leaderboard(engine)

            board = _wait(approving_until_the_board, airflow, 600, "the leaderboard of the month")
            _wait(lambda: _all_ended(airflow), airflow, 180, "every DAG run to end")
            release_runs, benchmark_runs = _runs(airflow, RELEASE_DAG_ID), _runs(airflow, BENCHMARK_DAG_ID)
            approval = _budget_request(airflow, benchmark_runs[0]["dag_run_id"])

            # Five more runs of the month (the DAG runs two at a time, in the order they were made):
            # - bob, a User-role account, under another priced judge with no budget of its own (null): the
            #   operator's $1 still holds, so it is asked; bob cannot answer it; admin rejects it, nothing sent;
            # - under a third judge through its batch API (core metrics only): the sensor holds no slot
            #   between pokes; cleared while a batch runs (its state gone, as after a lost worker), it picks
            #   the same batch up again: nothing submitted twice;
            # - bob again, asking for a budget of $1e9: capped at the operator's, asked, and nobody answers:
            #   it times out, nothing sent;
            # - approved over a budget of $0.001, and then the answers cost far more than predicted: stopped at
            #   the approved total plus the margin mid-run, directly and through the batch API.
            bob = airflow.as_user("bob")
            rejected_run = bob.request("POST", f"/dags/{BENCHMARK_DAG_ID}/dagRuns", json={
                "logical_date": None, "conf": {"month": MONTH, "judge": REJECTED_JUDGE, "budget_usd": None}})
            batch_run = airflow.api("POST", f"/dags/{BENCHMARK_DAG_ID}/dagRuns", json={
                "logical_date": None, "conf": {"month": MONTH, "judge": BATCH_JUDGE, "judge_transport": "batch",
                                               "tracks": []}})["dag_run_id"]
            unanswered_run = bob.request("POST", f"/dags/{BENCHMARK_DAG_ID}/dagRuns", json={
                "logical_date": None, "conf": {"month": MONTH, "judge": UNANSWERED_JUDGE, "budget_usd": 1e9}})
            stopped_runs = {transport: airflow.api("POST", f"/dags/{BENCHMARK_DAG_ID}/dagRuns", json={
                "logical_date": None, "conf": {"month": MONTH, "judge": judge, "judge_transport": transport,
                                               "tracks": [], "budget_usd": 0.001}})["dag_run_id"]
                for transport, judge in (("direct", DIRECT_STOP_JUDGE), ("batch", BATCH_STOP_JUDGE))}
            later = Approvals(airflow, {rejected_run["dag_run_id"]: "Reject", unanswered_run["dag_run_id"]: None,
                                        **dict.fromkeys(stopped_runs.values(), "Approve")})
            running = _first_running_batch(engine, 300)
            airflow.api("POST", f"/dags/{BENCHMARK_DAG_ID}/clearTaskInstances", json={
                "dag_run_id": batch_run, "task_ids": ["judge_batches"], "only_failed": False, "dry_run": False,
                "reset_dag_runs": False})

            def answering_until_all_end() -> bool:
                later()
                return _all_ended(airflow)

            _wait(answering_until_all_end, airflow, 1500, "the five later runs to end")
            stop_logs = {transport: airflow.failed_task_logs(BENCHMARK_DAG_ID, run_id, chars=20_000)
                         for transport, run_id in stopped_runs.items()}
            unanswered = _budget_request(airflow, unanswered_run["dag_run_id"])
            states = {r["dag_run_id"]: r["state"] for r in _runs(airflow, BENCHMARK_DAG_ID)}
            batch_tasks = {t["task_id"]: t for t in airflow.task_instances(BENCHMARK_DAG_ID, batch_run)}
            batch_summary = _xcom(airflow, batch_run, "judge_batches", -1)
            batch_state = [r["state"] for r in _runs(airflow, BENCHMARK_DAG_ID) if r["dag_run_id"] == batch_run]
            second_tasks = {t["task_id"]: t["state"] for t in airflow.task_instances(
                BENCHMARK_DAG_ID, rejected_run["dag_run_id"])}
            tasks = airflow.task_instances(BENCHMARK_DAG_ID, benchmark_runs[0]["dag_run_id"])
            judge_timings = [_xcom(airflow, benchmark_runs[0]["dag_run_id"], "judge", t["map_index"])["timings"]
                             for t in tasks if t["task_id"] == "judge" and t["state"] == "success"]
            # The release version the sensor found is the run's release, which every later task reads.
            pinned = _xcom(airflow, benchmark_runs[0]["dag_run_id"], "wait_for_release", -1)

    assert board == sorted([(MONTH, "human_exemplar")] + [(MONTH, name) for name in ORACLES])
    # The operator was told: one approval request per run that asked (all but the batch run, within its
    # budget), to its approvers with the estimate; one message per failed approval; one per published board.
    told: dict[str, list[dict]] = {}
    for body in posted(httpserver, "/hook"):
        told.setdefault(body["event"], []).append(body)
    asked_runs = {benchmark_runs[0]["dag_run_id"], rejected_run["dag_run_id"], unanswered_run["dag_run_id"],
                  *stopped_runs.values()}
    assert len(told["approval_asked"]) == len(asked_runs), [b["subject"] for b in told["approval_asked"]]
    assert all(b["approvers"] == ["admin"] and b["month"] == MONTH for b in told["approval_asked"])
    assert all(any("| System | Calls | USD |" in line for line in b["lines"]) for b in told["approval_asked"])
    failed_approvals = [b for b in told.get("run_failed", []) if b["task"] == "approve_budget"]
    assert len(failed_approvals) == 2, [(b["task"], b["facts"].get("run")) for b in told.get("run_failed", [])]
    assert "finish" not in {b["task"] for b in told.get("run_failed", [])}
    assert len(told["board_published"]) == 2  # the scheduled run's board and the batch run's
    # The batch run: judged through batches only, resumed after the clear, published.
    assert batch_state == ["success"], {k: t["state"] for k, t in batch_tasks.items()}
    assert batch_tasks["judge"]["state"] == "skipped" and batch_tasks["judge_batches"]["state"] == "success"
    assert batch_tasks["judge_batches"]["try_number"] >= 2  # the clear made it start again from nothing
    assert batch_summary["reports_judged"] > 0, batch_summary
    with engine.connect() as conn:
        batches = conn.execute(sa.text("SELECT provider_batch_id, state, model FROM llm_batches ORDER BY created_at")
                               ).all()
        batched = set(conn.execute(sa.text(
            "SELECT request_hash FROM llm_calls WHERE transport = 'openai-batch' AND model = :m"),
            {"m": BATCH_JUDGE}).scalars())
    ours = [(b, state) for b, state, model in batches if model == BATCH_JUDGE]
    assert running in [b for b, _ in ours] and {s for _, s in ours} == {"collected"}
    assert judge_stub.creates == len(batches) and len(ours) >= 2  # one create per batch: none made again
    assert len(judge_stub.lines_answered) == len(set(judge_stub.lines_answered))
    assert batched <= set(judge_stub.lines_answered)
    # The budget: asked for the scheduled run (the stub judge has no price: counted at the stated fallback),
    # approved by admin, judged. bob (User role) could not answer any approval: he is not an approver.
    assert first.answered == {benchmark_runs[0]["dag_run_id"]: "Approve"} and set(first.by_bob.values()) == {403}
    assert approval["chosen_options"] == ["Approve"] and approval["responded_by_user"]["id"] == "admin"
    assert "has no price, so the $1.00 budget cannot be checked at its own price" in approval["body"]
    assert "counted at openai/stub-judge at openai's highest chat price in litellm's table" in approval["body"]
    assert "| System | Calls | USD |" in approval["body"] and "Only admin may answer" in approval["body"]
    assert approval["assigned_users"] == [{"id": "admin", "name": "admin"}]
    assert later.by_bob == dict.fromkeys(later.by_bob, 403) and len(later.by_bob) == 4, later.by_bob
    # The second run, bob's with no budget of its own: the operator's held; asked, rejected, nothing sent.
    rows_by_run = {r["run_id"]: r for r in _benchmark_rows(engine)}
    second = rows_by_run[rejected_run["dag_run_id"]]
    assert later.answered[rejected_run["dag_run_id"]] == "Reject" and states[rejected_run["dag_run_id"]] == "failed"
    assert second_tasks["approve_budget"] == "failed" and second_tasks["finish"] == "failed"
    assert second_tasks["roll_up"] == "upstream_failed"
    assert "failed: approve_budget; rejected by admin" in second["message"]
    assert "over the $1.00 budget; nothing was sent" in second["message"]
    # The fourth, bob's asking for $1e9: capped at the operator's $1, asked, unanswered: it timed out.
    fourth = rows_by_run[unanswered_run["dag_run_id"]]
    assert states[unanswered_run["dag_run_id"]] == "failed" and unanswered["chosen_options"] in (None, [])
    waited = timedelta(hours=APPROVAL_HOURS)  # 0:00:54
    assert f"failed: approve_budget; nobody answered within {waited}" in fourth["message"], fourth["message"]
    assert "over the $1.00 budget; nothing was sent" in fourth["message"]
    with engine.connect() as conn:
        asked = dict(conn.execute(sa.text("SELECT model, count(*) FROM llm_calls GROUP BY model")).all())
    for refused in (REJECTED_JUDGE, UNANSWERED_JUDGE):
        assert refused not in asked and refused.split("/")[1] not in judge_stub.models_asked
    # The two approved runs whose answers cost far more than predicted: each stopped at the total approved
    # (kept in the warehouse by the approval) plus the margin, mid-run; what passed it is the requests in
    # flight when it was crossed (four judge tasks of 16 each, direct), and the second batch round was never sent.
    with engine.connect() as conn:
        approved_usd = dict(conn.execute(sa.text(
            "SELECT judge_config, approved_usd::float8 FROM judging_estimates WHERE approved_by = 'admin'")).all())
        pending = conn.execute(sa.text("SELECT count(*) FROM llm_batch_requests WHERE model = :m AND "
                                       "state = 'pending'"), {"m": BATCH_STOP_JUDGE}).scalar_one()
    for transport, judge in (("direct", DIRECT_STOP_JUDGE), ("batch", BATCH_STOP_JUDGE)):
        run_id = stopped_runs[transport]
        assert later.answered[run_id] == "Approve" and states[run_id] == "failed", (transport, states[run_id])
        limit = approved_usd[f"llm:{judge}"] * (1 + MARGIN)
        assert f"of ${limit:,.4f}" in stop_logs[transport] or f"of ${limit:,.2f}" in stop_logs[transport], limit
        assert "stopped at $" in rows_by_run[run_id]["message"] or "stopped at $" in stop_logs[transport]
        name = judge.split("/")[1]
        per_call = (prices.batch_cost_usd if transport == "batch" else prices.cost_usd)(
            None, judge, *judge_stub.usage_by_model[name])
        paid = asked.get(judge, 0)
        assert 0 < paid < len(batched) and limit < paid * per_call, (transport, paid, limit / per_call)
    # Direct: past the limit by the requests in flight then at most (four tasks of 16, and one each).
    assert (asked[DIRECT_STOP_JUDGE] - 4 * 16 - 4) * prices.cost_usd(
        None, DIRECT_STOP_JUDGE, *judge_stub.usage_by_model["gpt-4.1-mini"]) <= approved_usd[
        f"llm:{DIRECT_STOP_JUDGE}"] * (1 + MARGIN)
    # Batch: the first round was submitted within the limit (predicted at the default tokens) and paid; the next
    # was never submitted: one batch, its requests waiting.
    assert "the next batch would cost about" in stop_logs["batch"] and pending > 0
    assert sum(1 for *_, model in batches if model == BATCH_STOP_JUDGE) == 1
    # One run per DAG, both created by the scheduler for the same logical date, both green.
    assert [(r["run_type"], r["state"]) for r in release_runs] == [("scheduled", "success")]
    assert [(r["run_type"], r["state"]) for r in benchmark_runs] == [("scheduled", "success")], (
        f'{ {t["task_id"]: t["state"] for t in tasks if t["state"] not in ("success", "skipped")} } '
        f'{[r["message"] for r in _benchmark_rows(engine)]}')
    assert release_runs[0]["logical_date"] == benchmark_runs[0]["logical_date"]
    assert pinned == MONTH
    # The benchmark started before the release was published, waited for it, and no second run was started.
    rows = [r for r in _benchmark_rows(engine) if r["run_type"] == "scheduled"]
    assert [(r["run_id"], r["state"]) for r in rows] == [(benchmark_runs[0]["dag_run_id"], "published")]
    with engine.connect() as conn:
        published_at = conn.execute(sa.text("SELECT published_at FROM releases WHERE release_id = :r"),
                                    {"r": MONTH}).scalar_one()
        judged_by = conn.execute(sa.text("SELECT DISTINCT judge_config FROM metric_scores")).scalars().all()
        # Every track (DEEPSCHOLAR_TRACKS, the DAG's `tracks` param default) was judged in the same jobs: the
        # release built RACE's rubrics and the claims ground truth after the nuggets and gated them, and every
        # track has a board of every system, with the agreement between the boards.
        artefacts = dict(conn.execute(sa.text(
            "SELECT track, gx_success FROM release_track_artefacts WHERE release_id = :m"), {"m": MONTH}).all())
        boards = dict(conn.execute(sa.text(
            "SELECT family, count(*) FROM track_boards WHERE release_id = :m GROUP BY family"), {"m": MONTH}).all())
        human_race = conn.execute(sa.text(
            "SELECT mean FROM track_board_metrics WHERE release_id = :m AND system_id = 'human_exemplar' "
            "AND metric = 'race_overall'"), {"m": MONTH}).scalar_one()
        n_pairs = conn.execute(sa.text("SELECT count(*) FROM board_agreement WHERE release_id = :m"),
                               {"m": MONTH}).scalar_one()
        # The run checked and published the board it rolled up: version 1, which never changes again.
        board_versions = conn.execute(sa.text(
            "SELECT judge_config, board_version, status FROM board_versions WHERE release_id = :m ORDER BY 1"),
            {"m": MONTH}).all()
        drift = conn.execute(sa.text("SELECT metric, status, tripped, agreement FROM judge_drift_checks "
                                     "WHERE release_id = :m"), {"m": MONTH}).all()
    assert board_versions == [(f"llm:{BATCH_JUDGE}", 1, "published"), ("llm:openai/stub-judge", 1, "published")]
    # The judge's calibration slice (its first answers on this, its first month) was asked again past the
    # cache before the board's check; the unchanged stub agrees with itself, so no alarm holds the board back.
    assert "relevance_rate" in {m for m, *_ in drift} <= set(annotatable_metric_names())
    assert all(status == "checked" and not tripped for _, status, tripped, _ in drift), drift
    assert artefacts == {"race": True, "claims": True}
    assert boards == dict.fromkeys(registry.tracks(), len(ORACLES) + 1)
    assert human_race == 0.5
    n_families = len(registry.tracks()) + 1
    assert n_pairs == n_families * (n_families - 1) // 2
    assert rows[0]["started_at"] < published_at
    # The arXiv search really was stalled: the release could not have been published before the stall ended.
    assert (published_at - rows[0]["started_at"]).total_seconds() > RELEASE_STALL_SECONDS / 2

    # At the connection limit: the LLM judge did the judging, three or four judge tasks ran at once (their
    # old pools could have opened 32 connections each against 40), no task attempt failed, and the
    # server never ran out (the sampler's own connection is the one more).
    # (The two runs stopped by their budget stored what they judged before the stop.)
    assert set(judged_by) - {f"llm:{DIRECT_STOP_JUDGE}", f"llm:{BATCH_STOP_JUDGE}"} == {
        f"llm:{BATCH_JUDGE}", "llm:openai/stub-judge"} and judge_stub.chat_requests > 0
    assert _overlap(tasks, "judge") >= 3, {t["map_index"]: (t["start_date"], t["end_date"]) for t in tasks
                                           if t["task_id"] == "judge"}
    assert [(t["task_id"], t["try_number"]) for t in tasks if t["try_number"] > 1 or t["state"] == "failed"] == []
    assert connections.max_connections == LIMITED_MAX_CONNECTIONS
    assert 0 < connections.peak < LIMITED_MAX_CONNECTIONS - 3
    # Each judge task says where its life went (start-up, first request, last answer), in its log and result.
    # (A job whose every question another job asked first makes no request: no first request then.)
    assert any(t["first_request_s"] is not None for t in judge_timings), judge_timings
    assert all(t["process_age_at_start_s"] is not None and t["job_s"] > 0 and (
        t["first_request_s"] is None or 0 <= t["first_request_s"] <= t["last_answer_s"] <= t["job_s"])
        for t in judge_timings), judge_timings


def test_failed_gate_blocks_the_month_cleanly_and_a_rebuild_publishes_it_by_itself(
        engine, db_url, metadata_url, snapshot, tmp_path, httpserver, monkeypatch, capsys):
    """Also what the operator is told, caught by a real SMTP server and a webhook receiver (every event routed
    to both): the failed gate once, naming its checks and the rebuild command; the publication once; a
    publication deadline of 72 s, which the blocked run passes, once per run at most. And the public site,
    published after the board.

    Then, on the published month, a system registered afterwards is backfilled through Airflow as an operator
    does it (`deepscholar systems backfill`), and a backfill of a month never released fails at once."""
    _systems(engine)
    corrupted = write_unresolvable_snapshot(snapshot, tmp_path / "corrupted", MONTH)
    server = ReplayServer(corrupted).start()
    port = server.port
    httpserver.expect_request("/hook", method="POST").respond_with_data("ok")
    site = tmp_path / "site"
    try:
        with smtp_inbox() as inbox, _airflow(tmp_path, metadata_url, server, snapshot, db_url, {
                "AIRFLOW_CONN_SMTP_E2E": inbox.connection(),
                "AIRFLOW_CONN_HOOK_E2E": webhook_connection(httpserver.url_for("/hook")),
                "DEEPSCHOLAR_NOTIFY": "*:smtp_e2e,hook_e2e", "DEEPSCHOLAR_PUBLICATION_DEADLINE_HOURS": "0.02",
                "DEEPSCHOLAR_SITE_URL": str(site)}) as airflow:
            airflow.wait_for_dags([RELEASE_DAG_ID, BENCHMARK_DAG_ID])
            airflow.unpause(RELEASE_DAG_ID, BENCHMARK_DAG_ID)
            _wait(lambda: _all_ended(airflow), airflow, 900, "both runs to end")
            release_runs, benchmark_runs = _runs(airflow, RELEASE_DAG_ID), _runs(airflow, BENCHMARK_DAG_ID)

            # A clear state: both runs red; the benchmark run says why and that it will start again.
            assert [r["state"] for r in release_runs] == ["failed"]
            assert [r["state"] for r in benchmark_runs] == ["failed"]
            rows = _benchmark_rows(engine)
            assert [r["state"] for r in rows] == ["blocked"]
            assert "failed its quality gate" in rows[0]["message"] or "failed" in rows[0]["message"]
            assert "starts by itself" in rows[0]["message"]
            states = {t["task_id"]: t["state"] for t in airflow.task_instances(
                BENCHMARK_DAG_ID, benchmark_runs[0]["dag_run_id"])}
            assert states["wait_for_release"] == "failed" and states["finish"] == "failed"
            assert states["plan"] == "upstream_failed"
            # The release failed its quality gate, says so in the failed task's log, and stays unpublished with
            # the gate's checks kept; nothing half-written.
            assert "failed its quality gate" in airflow.failed_task_logs(
                RELEASE_DAG_ID, release_runs[0]["dag_run_id"], chars=200_000)
            with engine.connect() as conn:
                release = conn.execute(sa.text("SELECT * FROM releases WHERE release_id = :r"),
                                       {"r": MONTH}).mappings().one()
                counts = {t: conn.execute(sa.text(f"SELECT count(*) FROM {t}")).scalar_one()
                          for t in ("reports", "judgments", "metric_scores", "leaderboard")}
            assert release["status"] == "failed" and release["published_at"] is None
            assert release["gx_success"] is False and release["gx_result"]["checks"]
            assert counts == dict.fromkeys(counts, 0)

            # The operator fixes the source and re-builds the month; nothing else is done by hand.
            server.stop()
            server = ReplayServer(snapshot, port=port).start()
            airflow.api("POST", f"/dags/{RELEASE_DAG_ID}/dagRuns", json={"logical_date": None,
                                                                        "conf": {"month": MONTH}})
            board = _wait(lambda: _leaderboard(engine), airflow, 600, "the leaderboard after the re-build")
            _wait(lambda: _all_ended(airflow), airflow, 180, "every DAG run to end")
            benchmark_runs = _runs(airflow, BENCHMARK_DAG_ID)
            published_run = [r for r in benchmark_runs if r["state"] == "success"][0]["dag_run_id"]
            site_task = {t["task_id"]: t["state"] for t in airflow.task_instances(BENCHMARK_DAG_ID, published_run)}
            time.sleep(5)  # a callback's message may still be on its way when its task has ended
            mails = [(m["Subject"], m.get_body(("html", "plain")) is not None) for m in inbox.received]
            hooks = posted(httpserver, "/hook")
            run_rows = [r["state"] for r in _benchmark_rows(engine)]
            with engine.connect() as conn:
                first_board = conn.execute(sa.text(
                    "SELECT board_version, (SELECT array_agg(system_id ORDER BY system_id) FROM leaderboard_systems l"
                    " WHERE l.release_id = b.release_id) FROM board_versions b WHERE release_id = :m"),
                    {"m": MONTH}).one()

            backfill_a_new_system(engine, airflow, MONTH, "oracle", monkeypatch, capsys)
            backfill_of_a_month_never_released_fails_at_once(engine, airflow, NEVER_RELEASED)
    finally:
        server.stop()
    by_event: dict[str, list[dict]] = {}
    for body in hooks:
        by_event.setdefault(body["event"], []).append(body)
    # Every message reached both media: the same subjects by mail and by webhook.
    assert sorted(subject for subject, _ in mails) == sorted(body["subject"] for body in hooks), (mails, hooks)
    assert all(has_body for _, has_body in mails), mails
    gate = by_event["release_failed"]
    assert len(gate) == 1 and gate[0]["month"] == MONTH and gate[0]["failing_checks"], gate
    assert f"deepscholar release build {MONTH}" in gate[0]["command"]
    version, systems = first_board
    published = by_event["board_published"]
    assert len(published) == 1 and published[0]["board_version"] == version, published
    assert sorted(published[0]["systems"]) == sorted(systems)
    # The blocked run waited past the 72 s deadline; no run is told twice.
    late = by_event.get("deadline_missed", [])
    assert late and all(body["waiting_on"] for body in late), by_event.keys()
    assert len({body["facts"]["run"] for body in late}) == len(late), late
    assert "run_failed" not in by_event or all(b["task"] != "finish" for b in by_event["run_failed"])
    # The public site: published after the board, one switch to a complete build.
    assert site_task["publish_site"] == "success"
    assert os.readlink(site / "current").startswith("builds/")
    assert json.loads((site / "current" / "api" / "leaderboard.json").read_bytes())["release_id"] == MONTH
    assert board == [(MONTH, "human_exemplar"), (MONTH, "oracle")]
    assert sorted(r["state"] for r in benchmark_runs) == ["failed", "success"]
    started = [r for r in benchmark_runs if r["state"] == "success"][0]
    assert started["dag_run_id"].startswith(f"release_published__{MONTH}")
    assert run_rows == ["blocked", "published"]

