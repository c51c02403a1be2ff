"""How a benchmark run for month M is tied to release M when both are scheduled at the same cron tick.

Design notes: docs/MODULE_NOTES.md, `deepscholar.scheduling`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar import db
from deepscholar.orchestration import RELEASE_DAG_ID

log = logging.getLogger(__name__)

RUN_STATES = ("waiting", "running", "published", "blocked", "failed")
# A run in one of these states will still do the month's work; a publish needs no new run then.
ACTIVE_STATES = ("waiting", "running")

# Run types (Airflow's DagRun.run_type) that stop at once when their release was never started: they are
# started by a person for a month that should exist. Any other run (scheduled, asset-triggered) waits.
FAIL_FAST_RUN_TYPES = ("backfill", "manual")


class ReleaseBlocked(RuntimeError):
    """Release M failed its gate, or was never started for a backfill or manual run: the benchmark run for
    M stops here, having written nothing."""


@dataclass(frozen=True)
class BenchmarkRun:
    """The Airflow run a benchmark state row belongs to (run_type / triggered_by say how it started)."""

    release_id: str
    run_id: str
    run_type: str | None = None
    triggered_by: str | None = None
    judge_config: str | None = None


@dataclass(frozen=True)
class ReleaseState:
    release_id: str
    status: str | None  # None: no release row yet (the release run has not opened it)
    detail: str | None = None

    @property
    def published(self) -> bool:
        return self.status == "published"

    def describe(self) -> str:
        if self.status is None:
            return f"release {self.release_id} has not been started yet"
        text = f"release {self.release_id} is {self.status}"
        return f"{text}: {self.detail}" if self.detail else text


def current_release(engine: Engine, month: str) -> str:
    """The release a benchmark run for `month` works on: its current version, the latest published one
    (release/versions.py). While none is published it is the latest version (the one being built, which the
    sensor waits for), and with none at all the month itself, so the waiting logic is as it was."""
    from deepscholar.release.versions import resolve_release

    with engine.connect() as conn:
        return resolve_release(conn, month)


def release_state(engine: Engine, release_id: str) -> ReleaseState:
    with engine.connect() as conn:
        row = conn.execute(sa.text("SELECT status, error FROM releases WHERE release_id = :r"),
                           {"r": release_id}).first()
    if row is None:
        return ReleaseState(release_id, None)
    # `error` holds the gate's summary (or a failed step's error) while the release is failed.
    return ReleaseState(release_id, row.status, row.error if row.status == "failed" else None)


def record_run(engine: Engine, run: BenchmarkRun, state: str, message: str | None = None) -> None:
    """Upsert the run's state row (one row per Airflow run; a retried task rewrites the same row)."""
    if state not in RUN_STATES:
        raise ValueError(f"unknown benchmark run state {state!r}")
    row = {"release_id": run.release_id, "run_id": run.run_id, "run_type": run.run_type,
           "triggered_by": run.triggered_by, "judge_config": run.judge_config, "state": state,
           "message": message}
    with engine.begin() as conn:
        db.upsert(conn, "benchmark_runs", [row], key=["release_id", "run_id"])
        if state in ("published", "blocked", "failed"):
            conn.execute(sa.text("UPDATE benchmark_runs SET finished_at = now() "
                                 "WHERE release_id = :r AND run_id = :i"), {"r": run.release_id, "i": run.run_id})


def note_run_message(engine: Engine, release_id: str, run_id: str, message: str) -> None:
    """Set the message of a run's row, its state kept: a task's own reason (the budget approval's refusal),
    which the run's final verdict repeats (finish_run)."""
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE benchmark_runs SET message = :m WHERE release_id = :r AND run_id = :i"),
                     {"m": message, "r": release_id, "i": run_id})


def run_state(engine: Engine, release_id: str, run_id: str) -> tuple[str, str | None] | None:
    with engine.connect() as conn:
        row = conn.execute(sa.text("SELECT state, message FROM benchmark_runs WHERE release_id = :r AND run_id = :i"),
                           {"r": release_id, "i": run_id}).first()
    return (row.state, row.message) if row else None


@dataclass(frozen=True)
class WaitDecision:
    """What a benchmark run's sensor does after one look at its release."""

    action: str  # "start" (release published), "wait" or "block" (end the run now, failed)
    message: str


def run_type_name(run_type: object) -> str:
    """"backfill" for Airflow's DagRunType member, its value or its str(): the task SDK's DagRunType is a
    str enum whose str() on Python 3.11 is "DagRunType.BACKFILL", not the value."""
    text = str(getattr(run_type, "value", run_type) or "")
    return text.rpartition(".")[2].lower()


def decide_wait(state: ReleaseState, run_type: object, release_run_active: bool = False) -> WaitDecision:
    """The sensor's decision for one look at release M: start, wait, or block with a one-line message.

    `run_type` is the Airflow run's type ("scheduled", "manual", "backfill", ...); `release_run_active`
    says whether any run of the release DAG is queued or running (it may be about to open M).
    - published: start, in every run type;
    - failed (its gate or a step): block, with the failure and how to re-build;
    - never started (no row): a scheduled run waits (the release run of the same tick opens it soon); a
      backfill or manual run blocks at once, unless a release DAG run is active (M may be next in it);
    - started but not published (building, gated, ...): wait, in every run type.
    """
    month = state.release_id
    if state.published:
        return WaitDecision("start", f"release {month} is published")
    if state.status == "failed":
        return WaitDecision("block", (
            f"{state.describe()}. Nothing was generated for {month}. Fix and re-build the release (DAG "
            f"{RELEASE_DAG_ID}, month {month}); once it is published a new benchmark run for the month "
            "starts by itself."))
    kind = run_type_name(run_type)
    if state.status is None and kind in FAIL_FAST_RUN_TYPES and not release_run_active:
        return WaitDecision("block", (
            f"release {month} was never started: build it with `deepscholar release build {month}` and clear "
            f"this run, or trigger {RELEASE_DAG_ID} with {{\"month\": \"{month}\"}} (its publish starts a "
            f"benchmark run for {month} by itself). This {kind} run did not wait; nothing was generated."))
    return WaitDecision("wait", f"waiting: {state.describe()}")


def poke_release(engine: Engine, run: BenchmarkRun, release_run_active: bool = False) -> bool:
    """One look at release M from the benchmark run's sensor: True when the run may start.

    Raises ReleaseBlocked when `decide_wait` blocks the run (the release failed its gate, or a backfill or
    manual run found it never started), after recording the run as blocked, so the run ends at once with
    that message instead of waiting out its timeout.
    """
    decision = decide_wait(release_state(engine, run.release_id), run.run_type, release_run_active)
    if decision.action == "start":
        record_run(engine, run, "running", decision.message)
        log.info("release %s is published: the benchmark run starts", run.release_id)
        return True
    if decision.action == "block":
        record_run(engine, run, "blocked", decision.message)
        raise ReleaseBlocked(decision.message)
    record_run(engine, run, "waiting", decision.message)
    log.info("%s", decision.message)
    return False


def finish_run(engine: Engine, run: BenchmarkRun, failed_tasks: list[str], *,
               reason: str | None = None) -> tuple[bool, str]:
    """The run's final verdict: (ok, message). Only a run that published M's leaderboard is ok. `reason`: a
    failed task's own one line (the budget approval's refusal), added to the message."""
    current = run_state(engine, run.release_id, run.run_id)
    state, message = current if current else (None, None)
    if state == "published" and not failed_tasks:
        return True, message or f"leaderboard of {run.release_id} published"
    if state == "published":  # published, but an optional task after the roll-up (compare_judges) failed
        return False, (f"leaderboard of {run.release_id} published, but failed: {', '.join(sorted(failed_tasks))}")
    if state == "blocked":
        return False, message or f"release {run.release_id} failed its gate"
    if state in (None, "waiting"):
        # The sensor timed out, or failed reading the release: either way nothing was generated.
        message = (f"the run ended before release {run.release_id} was published "
                   f"({release_state(engine, run.release_id).describe()}; failed: "
                   f"{', '.join(sorted(failed_tasks)) or 'wait_for_release'}); nothing was generated. A new "
                   "benchmark run starts by itself when the release is published.")
        record_run(engine, run, "blocked", message)
        return False, message
    where = ", ".join(sorted(failed_tasks)) or "a task was skipped before the leaderboard was published"
    message = f"benchmark run for {run.release_id} did not publish its leaderboard: failed: {where}"
    if reason:
        message += f"; {reason}"
    if run.judge_config:  # the drift alarm blocked the board: the final state says which metric and how far
        from deepscholar.evaluation.judge_validation.drift import tripped_messages

        message += "".join(f"; {m}" for m in tripped_messages(engine, run.release_id, run.judge_config))
    record_run(engine, run, "failed", message)
    return False, message


def benchmark_start_needed(engine: Engine, release_id: str) -> tuple[bool, str]:
    """After release M is published: does a new benchmark run for M have to be started?

    Not when a run for M is waiting (its sensor will see the publish) or running; yes otherwise: the
    earlier run gave up (gate failed, waited too long, failed) or there was none (M built by hand).
    """
    with engine.connect() as conn:
        active = conn.execute(sa.text(
            "SELECT run_id, state FROM benchmark_runs WHERE release_id = :r AND state = ANY(:s) "
            "ORDER BY updated_at DESC LIMIT 1"), {"r": release_id, "s": list(ACTIVE_STATES)}).first()
    if active is not None:
        return False, f"benchmark run {active.run_id} for {release_id} is {active.state}; it carries on"
    return True, f"no benchmark run for {release_id} is waiting or running: starting one"


def benchmark_runs(engine: Engine, release_id: str | None = None) -> list[dict]:
    """The benchmark runs recorded for a month (all months when None), newest first."""
    query = "SELECT * FROM benchmark_runs" + (" WHERE release_id = :r" if release_id else "") + \
        " ORDER BY started_at DESC, run_id"
    with engine.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(sa.text(query), {"r": release_id})]
