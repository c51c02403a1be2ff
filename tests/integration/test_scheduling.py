"""How a benchmark run for month M waits for release M and ends with the truth (real PostgreSQL).

The Airflow side (the sensor, the final `finish` task, the release DAG starting a run) is exercised
end to end under `airflow standalone` in tests/dags/test_scheduled_month.py; these tests pin each
decision those tasks delegate to deepscholar.scheduling.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from deepscholar import db
from deepscholar.scheduling import (
    BenchmarkRun,
    ReleaseBlocked,
    benchmark_runs,
    benchmark_start_needed,
    finish_run,
    poke_release,
    record_run,
)

MONTH = "2025-06"


def _release(engine, status: str | None, error: str | None = None) -> None:
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM releases WHERE release_id = :r"), {"r": MONTH})
        if status:
            db.upsert(conn, "releases", [{"release_id": MONTH, "status": status, "error": error}],
                      key=["release_id"])


def _run(run_id="scheduled__2025-07-01T00:00:00+00:00") -> BenchmarkRun:
    return BenchmarkRun(MONTH, run_id, run_type="scheduled", triggered_by="timetable", judge_config="local")


def test_a_waiting_run_goes_on_once_the_release_is_published(engine):
    run = _run()
    _release(engine, None)
    assert poke_release(engine, run) is False
    _release(engine, "building")
    assert poke_release(engine, run) is False
    (row,) = benchmark_runs(engine, MONTH)
    assert row["state"] == "waiting" and "building" in row["message"]
    # While it waits, a publish needs no second run: the sensor will see it.
    assert benchmark_start_needed(engine, MONTH)[0] is False
    _release(engine, "published")
    assert poke_release(engine, run) is True
    (row,) = benchmark_runs(engine, MONTH)
    assert (row["state"], row["run_type"], row["triggered_by"]) == ("running", "scheduled", "timetable")


def test_a_failed_gate_blocks_the_run_at_once_with_the_gates_message(engine):
    run = _run()
    _release(engine, "failed", "3 of 12 expectations failed: important_arxiv_reference_per_query")
    with pytest.raises(ReleaseBlocked, match="important_arxiv_reference_per_query") as caught:
        poke_release(engine, run)
    assert "starts by itself" in str(caught.value)
    ok, message = finish_run(engine, run, ["wait_for_release"])
    assert not ok and "important_arxiv_reference_per_query" in message
    (row,) = benchmark_runs(engine, MONTH)
    assert row["state"] == "blocked" and row["finished_at"] is not None
    # Re-built and published: nothing is waiting for it any more, so a new run must be started.
    _release(engine, "published")
    assert benchmark_start_needed(engine, MONTH)[0] is True


def test_only_a_run_that_published_the_leaderboard_ends_green(engine):
    _release(engine, "published")
    done, broken, gave_up = _run("a"), _run("b"), _run("c")
    for run in (done, broken):
        assert poke_release(engine, run)
    record_run(engine, done, "published", "leaderboard of 2025-06 published (4 systems, judge local)")
    assert finish_run(engine, done, []) == (True, "leaderboard of 2025-06 published (4 systems, judge local)")
    # An optional task after the roll-up that failed (judge vs judge) fails the run, saying it did publish.
    assert finish_run(engine, done, ["compare_judges"]) == (
        False, "leaderboard of 2025-06 published, but failed: compare_judges")

    ok, message = finish_run(engine, broken, ["generate_openai_3"])
    assert not ok and "generate_openai_3" in message
    # A run that skipped its way to the end without publishing is not a success either.
    ok, message = finish_run(engine, _run("d"), [])
    assert not ok
    # A sensor that timed out (or could not read the release) leaves the run blocked, not silently green.
    _release(engine, "building")
    ok, message = finish_run(engine, gave_up, ["wait_for_release"])
    assert not ok and "before release 2025-06 was published" in message
    states = {r["run_id"]: r["state"] for r in benchmark_runs(engine, MONTH)}
    assert states == {"a": "published", "b": "failed", "c": "blocked", "d": "blocked"}


def test_a_publish_starts_a_run_only_when_none_is_waiting_or_running(engine):
    _release(engine, "published")
    assert benchmark_start_needed(engine, MONTH) == (
        True, "no benchmark run for 2025-06 is waiting or running: starting one")
    run = _run()
    record_run(engine, run, "running")
    needed, reason = benchmark_start_needed(engine, MONTH)
    assert not needed and run.run_id in reason
    record_run(engine, run, "published")
    assert benchmark_start_needed(engine, MONTH)[0] is True  # a re-publish re-runs the month (only what is missing)


def test_record_run_is_an_idempotent_upsert_and_refuses_unknown_states(engine):
    run = _run()
    for _ in range(3):
        record_run(engine, run, "waiting", "waiting: release 2025-06 is building")
    assert len(benchmark_runs(engine, MONTH)) == 1
    with pytest.raises(ValueError, match="unknown benchmark run state"):
        record_run(engine, run, "done")
