"""The DAGs' notification callbacks: what an Airflow context and the warehouse say about an event, made a
Message and sent (notifiers.send). Each is safe to wire as on_failure_callback / on_success_callback: it
never raises (a notification that fails is logged, the task's outcome stands).

Design notes: docs/MODULE_NOTES.md, `deepscholar.notifications.callbacks`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from deepscholar.notifications import messages
from deepscholar.notifications.notifiers import send

log = logging.getLogger(__name__)
# Task states of a run that is not finished: the steps it is waiting on, in that order of interest.
WAITING_STATES = ("awaiting_input", "running", "deferred", "up_for_reschedule", "up_for_retry", "queued",
                  "scheduled")


def _guarded(name: str, fn, *args: Any) -> Any:
    """Run a callback's body; anything it raises is logged, never passed on to the task."""
    try:
        return fn(*args)
    except Exception as exc:
        log.warning("notification callback %s failed: %s", name, messages.one_line(exc))
        return None


def _month(context: Mapping[str, Any]) -> str | None:
    """The run's release: wait_for_release's XCom (the benchmark DAG) or open_release's (the release DAG),
    else the data interval's month."""
    ti = context.get("ti")
    for task_id in ("wait_for_release", "open_release"):
        try:
            found = ti.xcom_pull(task_ids=task_id) if ti is not None else None
        except Exception:
            found = None
        if isinstance(found, str) and found:
            return found
    from deepscholar.release.window import release_id_for

    start = context.get("data_interval_start")
    return release_id_for(start) if start is not None else None


def _base_url() -> str:
    from airflow.configuration import conf

    return conf.get("api", "base_url", fallback="http://localhost:8080/").rstrip("/")


def _error_line(context: Mapping[str, Any]) -> str:
    exc = context.get("exception")
    text = str(exc).strip() if exc is not None else ""
    return (text.splitlines() or [type(exc).__name__ if exc is not None else "unknown error"])[0]


def _release_gate_failed(context: Mapping[str, Any]) -> None:
    import sqlalchemy as sa

    from deepscholar.db import get_engine

    release_id = _month(context) or "?"
    with get_engine().connect() as conn:
        result = conn.execute(sa.text("SELECT gx_result FROM releases WHERE release_id = :r"),
                              {"r": release_id}).scalar() or {}
    failing = [f"{c.get('name')}: {c.get('summary') or c.get('detail') or 'failed'}"
               for c in result.get("checks", []) if not c.get("success")] or [_error_line(context)]
    from deepscholar.release.versions import base_of

    month = base_of(release_id)
    ti = context.get("ti")
    send(messages.release_failed(
        release_id, failing, f"fix the failing sources, then `deepscholar release build {month}` (or trigger "
        f"the release DAG with {{\"month\": \"{month}\"}})", getattr(ti, "log_url", None)), context)


def release_gate_failed(context: Mapping[str, Any]) -> None:
    _guarded("release_gate_failed", _release_gate_failed, context)


def _task_failed(context: Mapping[str, Any]) -> None:
    ti = context.get("ti")
    send(messages.run_failed(_month(context), getattr(ti, "dag_id", "?"), getattr(ti, "task_id", "?"),
                             _error_line(context), getattr(ti, "log_url", None), context.get("run_id")), context)


def task_failed(context: Mapping[str, Any]) -> None:
    _guarded("task_failed", _task_failed, context)


def _board_published(context: Mapping[str, Any], judge_config: str) -> None:
    import sqlalchemy as sa

    from deepscholar.db import get_engine
    from deepscholar.evaluation.money.costs import month_judge_spend
    from deepscholar.settings import current_settings

    release_id = _month(context) or "?"
    engine = get_engine()
    with engine.connect() as conn:
        version = conn.execute(sa.text(
            "SELECT max(board_version) FROM board_versions WHERE release_id = :r AND judge_config = :j "
            "AND status = 'published'"), {"r": release_id, "j": judge_config}).scalar()
        systems = conn.execute(sa.text(
            "SELECT system_id FROM leaderboard_systems WHERE release_id = :r AND judge_config = :j "
            "AND board_version = :v ORDER BY system_id"), {"r": release_id, "j": judge_config, "v": version}
        ).scalars().all()
    site = getattr(current_settings(), "site_url", None)  # declared by the public site's settings, when present
    send(messages.board_published(release_id, int(version or 0), judge_config, list(systems),
                                  month_judge_spend(engine, release_id, judge_config), site), context)


def board_published(judge_config_of) -> Any:
    """An on_success_callback for publish_leaderboard; `judge_config_of()` gives the run's judge config."""
    def callback(context: Mapping[str, Any]) -> None:
        _guarded("board_published", lambda: _board_published(context, judge_config_of()))

    return callback


def approval_asked(context: Mapping[str, Any], estimate: Mapping[str, Any], approvers: list[str]) -> None:
    """Called by BudgetApproval as it asks; never raises."""
    def build() -> None:
        detail = str(estimate.get("detail") or "")
        send(messages.approval_asked(
            str(estimate.get("release_id") or _month(context)), approvers, detail.splitlines(),
            estimate.get("month_total_usd"), estimate.get("budget_usd"), f"{_base_url()}/required_actions"),
            context, also_to=approvers)

    _guarded("approval_asked", build)


# --- the publication deadline (the triggerer runs it) ------------------------------------------------------

def waiting_on(dag_id: str, run_id: str, month: str) -> str:
    """Which step a late run is waiting on: its unfinished tasks from Airflow's REST API
    (DEEPSCHOLAR_AIRFLOW_API_URL), else what the warehouse says of the run and its release."""
    from urllib.parse import quote

    from deepscholar.airflow_api import AirflowAPI

    try:
        api = AirflowAPI.from_settings()
        tis = api.request("GET", f"/dags/{quote(dag_id)}/dagRuns/{quote(run_id, safe='')}/taskInstances",
                          params={"limit": 1000}).get("task_instances", [])
        by_state: dict[str, list[str]] = {}
        for ti in tis:
            by_state.setdefault(str(ti.get("state")), []).append(str(ti.get("task_id")))
        for state in WAITING_STATES:
            if by_state.get(state):
                return f"{', '.join(sorted(set(by_state[state]))[:5])} ({state})"
    except Exception as exc:
        log.info("the Airflow API could not say what %s waits on (%s): asking the warehouse", run_id, exc)
    return _waiting_in_warehouse(month, run_id)


def _waiting_in_warehouse(month: str, run_id: str) -> str:
    from deepscholar.db import get_engine
    from deepscholar.scheduling import current_release, release_state, run_state

    engine = get_engine()
    release_id = current_release(engine, month)
    state = release_state(engine, release_id)
    if not state.published:
        return f"wait_for_release ({state.describe()})"
    run = run_state(engine, release_id, run_id)
    return f"the run is {run[0]}: {run[1] or 'no message'}" if run else "the run has not recorded its state yet"


def board_is_published(month: str) -> bool:
    """Whether any version of month M has a published board (another run may have published it since)."""
    import sqlalchemy as sa

    from deepscholar.db import get_engine

    with get_engine().connect() as conn:
        return bool(conn.execute(sa.text(
            "SELECT EXISTS (SELECT 1 FROM board_versions b JOIN releases r ON r.release_id = b.release_id "
            "WHERE coalesce(r.base_id, r.release_id) = :m AND b.status = 'published')"), {"m": month}).scalar())


def _deadline_message(context: Mapping[str, Any], hours: float) -> messages.Message | None:
    """The deadline's message, or None when M's board was published meanwhile (by a later run)."""
    run = context.get("dag_run") or {}
    start = str(run.get("data_interval_start") or run.get("logical_date") or "")
    month = start[:7] or "?"
    if board_is_published(month):
        log.info("the board of %s is published: the deadline has nothing to report", month)
        return None
    # The triggerer sends the run as the REST API's DAGRunResponse: its id is `dag_run_id`.
    dag_id, run_id = str(run.get("dag_id") or "?"), str(run.get("dag_run_id") or "?")
    deadline = str((context.get("deadline") or {}).get("deadline_time") or "")
    return messages.deadline_missed(month, hours, deadline, waiting_on(dag_id, run_id, month), run_id,
                                    f"{_base_url()}/dags/{dag_id}/runs/{run_id}")


async def publication_deadline_missed(context: Mapping[str, Any] | None = None, hours: float = 0.0) -> None:
    """The benchmark DAG's DeadlineAlert callback: the board of the run's month is late; never raises."""
    def build_and_send() -> None:
        message = _deadline_message(context or {}, hours)
        if message is not None:
            send(message, {})

    await asyncio.to_thread(_guarded, "publication_deadline_missed", build_and_send)
