"""Monthly benchmark: every active system writes a report for every query of month M, every report is
judged on the seven metrics, and the month's leaderboard is rolled up, checked and published.

Generation maps one task per (system, query) pair still missing an ok report, in one lane per LLM
provider so each provider's Airflow pool bounds its requests. Judging maps one task per (metric,
system), each judging only the reports that lack a current score. So a scheduled run, a retry and a
backfill for a newly registered system (params.systems = ["name"]) all do only the missing work.
Wiring only: every task calls one function of the deepscholar library.
"""

from __future__ import annotations

import os
from datetime import timedelta

import pendulum
from airflow.sdk import Asset, CronDataIntervalTimetable, Metadata, Param, dag, get_current_context, task

from deepscholar.orchestration import (
    BENCHMARK_DAG_ID,
    GENERATION_LANES,
    LEADERBOARD_ASSET_NAME,
    LEADERBOARD_ASSET_URI,
    MAX_MAPPED_TASKS,
    MONTHLY_CRON,
    lane_pool,
)

LEADERBOARD_PUBLISHED = Asset(name=LEADERBOARD_ASSET_NAME, uri=LEADERBOARD_ASSET_URI)


def _month() -> str:
    from deepscholar.release.window import release_id_for

    ctx = get_current_context()
    return ctx["params"].get("month") or release_id_for(ctx["data_interval_start"])


def _judge() -> str:
    return get_current_context()["params"].get("judge") or "local"


@dag(
    dag_id=BENCHMARK_DAG_ID,
    # Time-based (not asset-triggered) so months can be backfilled from the UI, CLI or REST API.
    schedule=CronDataIntervalTimetable(MONTHLY_CRON, timezone="UTC"),
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=2,
    tags=["deepscholar", "benchmark"],
    default_args={
        "retries": int(os.environ.get("DEEPSCHOLAR_TASK_RETRIES", "2")),
        "retry_delay": timedelta(minutes=2),
        "retry_exponential_backoff": True,
    },
    params={
        "month": Param(None, type=["null", "string"], pattern=r"^\d{4}-\d{2}$",
                       description="Run this month instead of the run's data interval (YYYY-MM)."),
        "systems": Param([], type="array", items={"type": "string"},
                         description="Only these systems (e.g. a newly registered one); empty = all active."),
        "judge": Param(os.environ.get("DEEPSCHOLAR_JUDGE", "local"), type="string",
                       description="'local' (offline embedding judge) or a litellm model string."),
        "metrics": Param([], type="array", items={"type": "string"},
                         description="Only these metrics; empty = all seven."),
    },
    doc_md=__doc__,
)
def deepscholar_benchmark():
    # -- generation --

    @task
    def plan() -> dict[str, list[list[dict]]]:
        from airflow.sdk.exceptions import AirflowFailException

        from deepscholar.db import get_engine
        from deepscholar.systems.generation import ReleaseNotPublished, pairs_by_lane, plan_pairs

        release_id = _month()
        try:
            pairs = plan_pairs(get_engine(), release_id, get_current_context()["params"].get("systems") or None)
        except ReleaseNotPublished as exc:
            raise AirflowFailException(str(exc)) from exc
        lanes = pairs_by_lane(pairs, MAX_MAPPED_TASKS)
        print(f"release {release_id}: {len(pairs)} (system, query) pairs without an ok report; by lane: "
              + ", ".join(f"{lane}={sum(map(len, b))}" for lane, b in lanes.items()))
        return lanes

    @task
    def lane_batches(lanes: dict[str, list[list[dict]]], lane: str) -> list[list[dict]]:
        # Airflow maps only over a task's whole return value, so each lane gets its list from its own task.
        return lanes[lane]

    @task(max_active_tis_per_dagrun=int(os.environ.get("DEEPSCHOLAR_GENERATION_CONCURRENCY", "4")))
    def generate_report(pairs: list[dict]) -> list[dict]:
        from deepscholar.db import get_engine
        from deepscholar.systems.generation import generate_batch

        return generate_batch(get_engine(), pairs)

    @task(retries=0, trigger_rule="all_done")
    def check_reports() -> dict:
        from airflow.sdk.exceptions import AirflowFailException

        from deepscholar.db import get_engine
        from deepscholar.systems.quality import run_reports_check

        release_id = _month()
        result = run_reports_check(get_engine(), release_id)
        if not result.success:
            raise AirflowFailException(f"reports of {release_id} failed their check: {result.summary}")
        return {"summary": result.summary}

    # -- evaluation --

    @task
    def plan_judging() -> list[dict]:
        from deepscholar.db import get_engine
        from deepscholar.evaluation.runner import plan_judging as plan_tasks

        params = get_current_context()["params"]
        tasks = plan_tasks(get_engine(), _month(), params.get("systems") or None, params.get("metrics") or None)
        print(f"{len(tasks)} (metric, system) judge tasks")
        return tasks

    @task(max_active_tis_per_dagrun=int(os.environ.get("DEEPSCHOLAR_JUDGE_TASKS", "4")),
          pool=os.environ.get("DEEPSCHOLAR_JUDGE_POOL", "default_pool"))
    def judge_metric(job: dict) -> dict:
        from deepscholar.db import get_engine
        from deepscholar.evaluation.runner import judge_metric as judge

        return judge(get_engine(), job["release_id"], job["metric"], system_id=job["system_id"],
                     judge=_judge()).as_dict()

    @task
    def roll_up() -> dict:
        from deepscholar.db import get_engine
        from deepscholar.evaluation.judges import JudgeSpec
        from deepscholar.evaluation.rollup import roll_up as roll

        rows = roll(get_engine(), _month(), JudgeSpec.parse(_judge()).config_id)
        return {"systems": len(rows)}

    @task(retries=0)
    def check_leaderboard() -> dict:
        from airflow.sdk.exceptions import AirflowFailException

        from deepscholar.db import get_engine
        from deepscholar.evaluation.judges import JudgeSpec
        from deepscholar.evaluation.leaderboard_quality import check_leaderboard as check

        release_id = _month()
        result = check(get_engine(), release_id, JudgeSpec.parse(_judge()).config_id)
        if not result.success:
            raise AirflowFailException(f"leaderboard of {release_id} failed its check: {result.summary}")
        return {"summary": result.summary}

    @task(outlets=[LEADERBOARD_PUBLISHED])
    def publish_leaderboard():
        from deepscholar.db import get_engine
        from deepscholar.evaluation.judges import JudgeSpec
        from deepscholar.evaluation.leaderboard import format_leaderboard, load_leaderboard

        release_id, judge_config = _month(), JudgeSpec.parse(_judge()).config_id
        rows = load_leaderboard(get_engine(), release_id, judge_config)
        print(format_leaderboard(rows, "table"))
        top = rows[0]["system_id"] if rows else None
        yield Metadata(LEADERBOARD_PUBLISHED, {"release_id": release_id, "judge_config": judge_config,
                                               "systems": len(rows), "top_system": top})

    planned = plan()
    generated = [
        generate_report.override(task_id=f"generate_{lane}", pool=lane_pool(lane)).expand(
            pairs=lane_batches.override(task_id=f"plan_{lane}")(planned, lane))
        for lane in GENERATION_LANES
    ]
    checked = check_reports()
    generated >> checked
    jobs = plan_judging()
    checked >> jobs
    judged = judge_metric.expand(job=jobs)
    judged >> roll_up() >> check_leaderboard() >> publish_leaderboard()


deepscholar_benchmark()
