"""The benchmark sensor's decision (deepscholar.scheduling.decide_wait): run type + release state → start,
wait, or block with one line. The sensor itself runs under a real scheduler in
tests/dags/test_scheduled_month.py (its failed-gate run backfills a month never built).
"""

from __future__ import annotations

from enum import Enum

import pytest

from deepscholar.scheduling import FAIL_FAST_RUN_TYPES, ReleaseState, decide_wait

MONTH = "2025-07"
NEVER_STARTED = ReleaseState(MONTH, None)
ALL_RUN_TYPES = ("scheduled", "manual", "backfill", "asset_triggered", "operator_triggered")


@pytest.mark.parametrize("run_type", ["backfill", "manual"])
def test_a_backfill_or_manual_run_of_a_month_never_started_blocks_with_how_to_build_it(run_type):
    decision = decide_wait(NEVER_STARTED, run_type)
    assert decision.action == "block"
    assert "\n" not in decision.message  # one log line
    assert decision.message.startswith(f"release {MONTH} was never started: ")
    assert f"`deepscholar release build {MONTH}`" in decision.message
    assert f'deepscholar_release with {{"month": "{MONTH}"}}' in decision.message
    assert "clear this run" in decision.message
    assert f"This {run_type} run did not wait" in decision.message


class RunType(str, Enum):  # noqa: UP042 (StrEnum would change str(), the point here)
    """Like the task SDK's DagRunType (a str enum; str() of a member is not its value on every Python)."""

    BACKFILL = "backfill"
    SCHEDULED = "scheduled"
    MANUAL = "manual"
    OPERATOR_TRIGGERED = "operator_triggered"


def test_airflows_run_type_enum_is_understood_like_its_string():
    assert decide_wait(NEVER_STARTED, RunType.BACKFILL).action == "block"
    assert decide_wait(NEVER_STARTED, RunType.MANUAL).action == "block"
    assert decide_wait(NEVER_STARTED, RunType.SCHEDULED).action == "wait"
    # The release DAG's start_benchmark run comes only after a publish; unknown to the rule, it waits.
    assert decide_wait(NEVER_STARTED, RunType.OPERATOR_TRIGGERED).action == "wait"
    assert set(FAIL_FAST_RUN_TYPES) == {"backfill", "manual"}
    # ... and so is its str() on Python 3.11 ("DagRunType.BACKFILL"), which the DAG's BenchmarkRun carries.
    assert decide_wait(NEVER_STARTED, str(RunType.BACKFILL)).action == "block"
    assert decide_wait(NEVER_STARTED, str(RunType.SCHEDULED)).action == "wait"


@pytest.mark.parametrize("run_type", ["scheduled", "asset_triggered", None, "something_new"])
def test_a_scheduled_run_waits_for_a_release_not_started_yet(run_type):
    # At the cron tick the release run of the same month opens the release moments later.
    decision = decide_wait(NEVER_STARTED, run_type)
    assert (decision.action, decision.message) == ("wait", f"waiting: release {MONTH} has not been started yet")


@pytest.mark.parametrize("run_type", ["backfill", "manual"])
def test_a_backfill_waits_while_a_release_run_is_queued_or_running(run_type):
    # Both DAGs backfilled (or triggered) together: the release run may open the month any moment.
    assert decide_wait(NEVER_STARTED, run_type, release_run_active=True).action == "wait"


@pytest.mark.parametrize("status", ["building", "gated"])
@pytest.mark.parametrize("run_type", ALL_RUN_TYPES)
def test_a_release_started_but_not_published_keeps_every_run_waiting(status, run_type):
    decision = decide_wait(ReleaseState(MONTH, status), run_type)
    assert (decision.action, decision.message) == ("wait", f"waiting: release {MONTH} is {status}")


@pytest.mark.parametrize("run_type", ALL_RUN_TYPES)
def test_a_published_release_starts_every_run(run_type):
    assert decide_wait(ReleaseState(MONTH, "published"), run_type, release_run_active=True).action == "start"


@pytest.mark.parametrize("run_type", ALL_RUN_TYPES)
def test_a_failed_release_blocks_every_run_with_its_message(run_type):
    decision = decide_wait(ReleaseState(MONTH, "failed", "3 of 12 expectations failed"), run_type)
    assert decision.action == "block"
    assert decision.message.startswith(f"release {MONTH} is failed: 3 of 12 expectations failed. ")
    assert "starts by itself" in decision.message
