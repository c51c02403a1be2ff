"""Monthly benchmark, generation half: every active system writes a report for every query of month M.

One mapped task per (system, query) pair still missing an ok report, so a scheduled run, a retry and a
backfill for a newly registered system (params.systems = ["name"]) all do only the missing work.
Wiring only: every task calls one function of deepscholar.systems.generation.
"""

from __future__ import annotations

import os
from datetime import timedelta

import pendulum
from airflow.sdk import CronDataIntervalTimetable, Param, dag, get_current_context, task

from deepscholar.orchestration import BENCHMARK_DAG_ID, MAX_MAPPED_TASKS, MONTHLY_CRON


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
    },
    doc_md=__doc__,
)
def deepscholar_benchmark():
    @task
    def plan() -> list[list[dict]]:
        from airflow.sdk.exceptions import AirflowFailException

        from deepscholar.db import get_engine
        from deepscholar.release.window import release_id_for
        from deepscholar.systems.generation import ReleaseNotPublished, batch_pairs, plan_pairs

        ctx = get_current_context()
        release_id = ctx["params"].get("month") or release_id_for(ctx["data_interval_start"])
        try:
            pairs = plan_pairs(get_engine(), release_id, ctx["params"].get("systems") or None)
        except ReleaseNotPublished as exc:
            raise AirflowFailException(str(exc)) from exc
        print(f"release {release_id}: {len(pairs)} (system, query) pairs without an ok report")
        return batch_pairs(pairs, MAX_MAPPED_TASKS)

    @task(max_active_tis_per_dagrun=int(os.environ.get("DEEPSCHOLAR_GENERATION_CONCURRENCY", "4")),
          pool=os.environ.get("DEEPSCHOLAR_GENERATION_POOL", "default_pool"))
    def generate_report(pairs: list[dict]) -> list[dict]:
        from deepscholar.db import get_engine
        from deepscholar.systems.generation import generate_batch

        return generate_batch(get_engine(), pairs)

    @task(retries=0, trigger_rule="all_done")
    def check_reports() -> dict:
        from airflow.sdk.exceptions import AirflowFailException

        from deepscholar.db import get_engine
        from deepscholar.release.window import release_id_for
        from deepscholar.systems.quality import run_reports_check

        ctx = get_current_context()
        release_id = ctx["params"].get("month") or release_id_for(ctx["data_interval_start"])
        result = run_reports_check(get_engine(), release_id)
        if not result.success:
            raise AirflowFailException(f"reports of {release_id} failed their check: {result.summary}")
        return {"summary": result.summary}

    generate_report.expand(pairs=plan()) >> check_reports()


deepscholar_benchmark()
