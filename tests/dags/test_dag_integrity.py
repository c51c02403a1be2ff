"""Every DAG file imports cleanly, is cheap to parse, and follows the project's conventions."""

import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # imports the DAGs in Airflow

DAGS_FOLDER = Path(__file__).resolve().parents[2] / "dags"
# A failure of a check is a verdict on the data, not a transient error. A verdict is not retried: a gate, a check, the final state, and an operator's answer on the budget (a retry
# would ask again, or turn a rejection into a second question).
VERDICT_TASKS = {"quality_gate", "check_reports", "check_leaderboard", "finish", "approve_budget"}


@pytest.fixture(scope="module")
def dagbag():
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(DAGS_FOLDER))


def test_no_import_errors(dagbag):
    assert dagbag.import_errors == {}
    assert {"deepscholar_release", "deepscholar_benchmark"} <= set(dagbag.dags)


def test_every_dag_has_tags_retries_and_a_time_based_schedule(dagbag):
    for dag_id, dag in dagbag.dags.items():
        assert dag.tags, f"{dag_id} has no tags"
        for t in dag.tasks:
            if t.task_id in VERDICT_TASKS:
                assert t.retries == 0, f"{dag_id}.{t.task_id}: a verdict must not be retried"
                continue
            assert t.retries >= 1, f"{dag_id}.{t.task_id} has no retries"
        # Backfills need a time-based schedule; month M must be the data interval, not a zero-length one.
        assert "CronDataIntervalTimetable" in type(dag.timetable).__name__, dag_id


def test_release_dag_data_interval_is_the_whole_month(dagbag):
    import pendulum
    from airflow.serialization.encoders import coerce_to_core_timetable

    timetable = coerce_to_core_timetable(dagbag.dags["deepscholar_release"].timetable)
    interval = timetable.infer_manual_data_interval(run_after=pendulum.datetime(2025, 7, 1, tz="UTC"))
    assert (interval.start.date().isoformat(), interval.end.date().isoformat()) == ("2025-06-01", "2025-07-01")


def test_dag_files_do_no_heavy_work_at_import():
    """The dag-processor re-parses files often: heavy libraries must be imported inside tasks."""
    import subprocess
    import sys

    code = (
        "import sys, runpy; runpy.run_path(sys.argv[1]);"
        "heavy = [m for m in ('great_expectations', 'litellm', 'torch', 'sentence_transformers', 'pandas',"
        " 'pgserver') if m in sys.modules]; print('HEAVY=' + ','.join(heavy))"
    )
    for path in DAGS_FOLDER.glob("*.py"):
        start = time.monotonic()
        out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True)
        heavy = [line for line in out.stdout.splitlines() if line.startswith("HEAVY=")][-1][len("HEAVY="):]
        assert heavy == "", f"{path.name} imports {heavy} at parse time"
        assert time.monotonic() - start < 60


def test_benchmark_dag_runs_generation_lanes_in_their_provider_pools_then_judges(dagbag):
    from deepscholar.orchestration import GENERATION_LANES

    dag = dagbag.dags["deepscholar_benchmark"]
    pools = {t.task_id: t.pool for t in dag.tasks}
    assert {f"generate_{lane}" for lane in GENERATION_LANES} <= set(pools)
    assert pools["generate_offline"] == "default_pool"
    assert pools["generate_openai"] == "llm_openai" and pools["generate_anthropic"] == "llm_anthropic"
    # Judging starts only once every lane is generated and the reports passed their check.
    assert dag.get_task("check_reports").upstream_task_ids == {f"generate_{lane}" for lane in GENERATION_LANES}
    assert "check_reports" in dag.get_task("plan_judging").upstream_task_ids
    assert dag.get_task("roll_up").upstream_task_ids == {"judge", "judge_batches"}
    # One transport per run: the branch after the budget's approval picks the direct judge tasks or the
    # batch sensor, which waits between pokes in reschedule mode (no worker slot while the provider works).
    assert dag.get_task("choose_transport").upstream_task_ids == {"approve_budget"}
    assert dag.get_task("choose_transport").downstream_task_ids == {"judge", "judge_batches"}
    batches = dag.get_task("judge_batches")
    assert batches.mode == "reschedule" and batches.timeout >= 24 * 3600 and batches.pool == pools["judge"]
    # The judge drift check runs on the rolled-up month, before the board's check that it can fail.
    assert dag.get_task("check_judge_drift").upstream_task_ids == {"roll_up"}
    assert dag.get_task("check_leaderboard").upstream_task_ids == {"check_judge_drift"}
    assert dag.get_task("publish_leaderboard").upstream_task_ids == {"check_leaderboard"}
    assert [a.uri for a in dag.get_task("publish_leaderboard").outlets] == [
        "postgres://warehouse:5432/deepscholar/deepscholar/leaderboard"]


def test_benchmark_run_waits_for_its_release_and_its_final_state_tells_the_truth(dagbag):
    dag = dagbag.dags["deepscholar_benchmark"]
    sensor = dag.get_task("wait_for_release")
    # Deployed, both DAGs fire at the same tick: the benchmark waits without holding a worker slot.
    assert sensor.mode == "reschedule" and sensor.timeout >= 24 * 3600
    assert dag.get_task("plan").upstream_task_ids == {"wait_for_release"}
    # Lanes or judge tasks with nothing to do are skipped; that must not skip the month's leaderboard...
    assert dag.get_task("check_reports").trigger_rule == "none_failed"
    assert dag.get_task("roll_up").trigger_rule == "none_failed"
    assert dag.get_task("check_leaderboard").trigger_rule == "none_failed"  # a drift check switched off is skipped
    # ... and whatever happened, `finish` runs last and is the run's only leaf.
    finish = dag.get_task("finish")
    assert finish.trigger_rule == "all_done"
    assert finish.upstream_task_ids == {"publish_leaderboard", "compare_judges", "back_up_warehouse"}
    assert dag.get_task("back_up_warehouse").upstream_task_ids == {"publish_leaderboard"}  # after publication
    # Judge vs judge is optional: after the roll-up, beside publication, skipped when M has one judge's boards.
    assert dag.get_task("compare_judges").upstream_task_ids == {"roll_up"}
    assert not dag.get_task("compare_judges").downstream_task_ids - {"finish"}
    assert [t.task_id for t in dag.tasks if not t.downstream_task_ids] == ["finish"]


def test_release_dag_starts_a_benchmark_run_only_after_publishing(dagbag):
    dag = dagbag.dags["deepscholar_release"]
    start = dag.get_task("start_benchmark")
    assert start.trigger_dag_id == "deepscholar_benchmark"
    assert start.upstream_task_ids == {"benchmark_start_needed"}
    assert "publish" in dag.get_task("benchmark_start_needed").upstream_task_ids
    assert start.skip_when_already_exists  # a retried task never starts a second run


def test_the_dags_tell_the_operator(dagbag):
    """Issue 49: a failed task (once, retries spent) and a publication are notified; `finish` and the sensor
    are not (a consequence, and the release DAG's own news); the release gate's failure is `release_failed`."""
    dag = dagbag.dags["deepscholar_benchmark"]
    def names(callbacks) -> list[str]:  # one callable or a list of them
        return [getattr(c, "__name__", "") for c in ([callbacks] if callable(callbacks) else callbacks or [])]

    for t in dag.tasks:
        expected = [] if t.task_id in ("finish", "wait_for_release") else ["_notify_task_failed"]
        assert names(t.on_failure_callback) == expected, t.task_id
    assert names(dag.get_task("publish_leaderboard").on_success_callback) == ["_notify_board_published"]
    gate = dagbag.dags["deepscholar_release"].get_task("quality_gate")
    assert names(gate.on_failure_callback) == ["_notify_gate_failed"]
