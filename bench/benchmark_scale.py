"""The benchmark half at scale, through the real scheduler: N systems x Q queries judged on the seven metrics.

A month of Q queries is built with the library from a generated month (replay/scale_snapshot.py; release
judge `local`), N offline systems are registered (--kind oracle, the fast one, by default: oracle_1..N;
extractive: one per `top_k`, its local search takes ~5 s of CPU per report over a real month's corpus), and the
benchmark DAG runs that month under Airflow's own processes (api-server, scheduler with LocalExecutor,
dag-processor, triggerer: what `airflow standalone` starts) with an LLM judge served by the
OpenAI-compatible stub in its own process at --latency per request. Prints one JSON object:

  {"systems", "queries", "reports", "task_instances": {task: n}, "judge_calls", "wall_seconds",
   "judge_floor_seconds", "judge_wall_seconds", "judge_wall_vs_floor", "scheduler": {...},
   "judge_task_peak_rss_mb": {"median", "max"}, "judge_task_timings", "judge_jobs", "run_state", "failed_attempts": {task: n},
   "peak_connections", "peak_connections_by_database", "max_connections", "connection_budget", ...}

failed_attempts counts task attempts that failed (earlier tries from task_instance_history, and last tries
that failed); peak_connections is the server's client connections sampled from pg_stat_activity every
0.25 s during the run (the sampler's own excluded), against its max_connections and the worst case
connection_budget.py derives from the run's settings.

judge_floor_seconds = judge calls x latency / (DEEPSCHOLAR_JUDGE_CONCURRENCY x DEEPSCHOLAR_JUDGE_TASKS),
what the provider's latency alone forces at the run's configured parallelism; judge_wall_seconds runs from
the first judge task's start to the last one's end. scheduler: per task instance, seconds from being
scheduled to queued and from queued to running (the executor's start-up), medians and 90th percentiles.

--batch judges the month through the stub's batch API instead (DEEPSCHOLAR_JUDGE_TRANSPORT=batch: the DAG's
`judge_batches` sensor in reschedule mode), the stub ending each batch --batch-delay s after its creation, and
adds {"batch": {"requests", "batches", "sent_one_by_one", "pokes", "working_pokes", "slot_seconds_working",
"waiting_pokes", "slot_seconds_waiting", "provider_seconds", "judging_wall_seconds"}}: a poke is working when
a batch was submitted or collected during it (or it judged the last round), waiting when it only asked the
provider; provider_seconds sums the batches' submitted-to-ended spans. The goal: the slot is held for the
working pokes and for nothing but short polls while the provider works.

Usage: .venv/bin/python bench/benchmark_scale.py [--systems 20] [--queries 200] [--latency 0.2] [--batch]
(embedded PostgreSQL in a throwaway DEEPSCHOLAR_HOME unless --db-url; ~12 min on 2 cores at the defaults;
`--systems 2 --queries 20` checks the set-up in a few minutes).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from evaluation import RemoteStub  # noqa: E402  (bench/evaluation.py: the scripted judge in its own process)
from support.warehouse import ConnectionSampler, throwaway_warehouse  # noqa: E402


def _seconds(a: str | None, b: str | None) -> float | None:
    if not (a and b):
        return None
    return (datetime.fromisoformat(b) - datetime.fromisoformat(a)).total_seconds()


def _spread(values: list[float]) -> dict:
    values = sorted(v for v in values if v is not None)
    if not values:
        return {}
    return {"median": round(statistics.median(values), 2), "p90": round(values[int(0.9 * (len(values) - 1))], 2),
            "max": round(values[-1], 2)}


def _metadata_rows(metadata_url: str, sql: str, run_id: str) -> list[dict]:
    import sqlalchemy as sa

    from deepscholar.orchestration import BENCHMARK_DAG_ID

    engine = sa.create_engine(metadata_url)
    try:
        with engine.connect() as conn:
            return [dict(r) for r in conn.execute(sa.text(sql), {"d": BENCHMARK_DAG_ID, "r": run_id}).mappings()]
    finally:
        engine.dispose()


def _task_instances(metadata_url: str, run_id: str) -> list[dict]:
    """Every task instance of the run, from Airflow's metadata database (the REST API pages by 100)."""
    rows = _metadata_rows(metadata_url, "SELECT task_id, map_index, state, scheduled_dttm, queued_dttm, start_date, "
                                        "end_date, duration FROM task_instance WHERE dag_id = :d AND run_id = :r",
                          run_id)
    return [{**r, **{k: r[k].isoformat() if r[k] else None
                     for k in ("scheduled_dttm", "queued_dttm", "start_date", "end_date")}} for r in rows]


def _failed_attempts(metadata_url: str, run_id: str) -> dict[str, int]:
    """Task attempts of the run that failed, by task: earlier tries (task_instance_history) that ended failed
    or up for retry, and task instances whose last try failed."""
    rows = _metadata_rows(metadata_url, """
        SELECT task_id, count(*) AS n FROM (
            SELECT task_id FROM task_instance_history WHERE dag_id = :d AND run_id = :r
              AND state IN ('failed', 'up_for_retry')
            UNION ALL
            SELECT task_id FROM task_instance WHERE dag_id = :d AND run_id = :r AND state = 'failed') t
        GROUP BY task_id ORDER BY task_id""", run_id)
    return {r["task_id"]: int(r["n"]) for r in rows}


def _judge_results(metadata_url: str, run_id: str) -> list[dict]:
    """What each judge task returned (its XCom), e.g. its process's peak RSS."""
    rows = _metadata_rows(metadata_url, "SELECT value FROM xcom WHERE dag_id = :d AND run_id = :r "
                                        "AND task_id = 'judge' AND key = 'return_value'", run_id)
    out = []
    for row in rows:
        value = row["value"]
        while isinstance(value, str):
            value = json.loads(value)
        if isinstance(value, dict):
            out.append(value)
    return out


def _batch_figures(metadata_url: str, run_id: str, engine, stub_stats: tuple) -> dict:
    """The batch run's pokes, each working or waiting (see the module's docstring), against the batches' own
    spans (llm_batches) and the stub's counts. A poke's span is from its task's "running" event to the state
    it ended in, in Airflow's event log (`log`): task_reschedule keeps only each poke's end (3.3 stamps its
    start at the reschedule request) and task_instance only the last poke's start."""
    events = _metadata_rows(metadata_url, """
        SELECT dttm, event FROM log WHERE dag_id = :d AND run_id = :r AND task_id = 'judge_batches'
        AND event IN ('running', 'up_for_reschedule', 'success', 'failed', 'up_for_retry') ORDER BY dttm""", run_id)
    pokes, started = [], None
    for e in events:
        if e["event"] == "running":
            started = e["dttm"]
        elif started is not None:
            pokes.append({"start_date": started, "end_date": e["dttm"]})
            started = None
    with engine.connect() as conn:
        batches = conn.exec_driver_sql(
            "SELECT submitted_at, finished_at, collected_at FROM llm_batches").all()
    moments = [t for b in batches for t in (b.submitted_at, b.collected_at) if t is not None]
    working = [p for i, p in enumerate(pokes) if i == len(pokes) - 1
               or any(p["start_date"] <= m <= p["end_date"] for m in moments)]
    waiting = [p for p in pokes if p not in working]
    seconds = lambda ps: round(sum((p["end_date"] - p["start_date"]).total_seconds() for p in ps), 2)  # noqa: E731
    chat, answered, creates, errors = stub_stats
    return {"requests": answered, "batches": creates, "sent_one_by_one": chat, "stub_errors": errors,
            "pokes": len(pokes), "working_pokes": len(working), "slot_seconds_working": seconds(working),
            "waiting_pokes": len(waiting), "slot_seconds_waiting": seconds(waiting),
            "provider_seconds": round(sum((b.finished_at - b.submitted_at).total_seconds() for b in batches
                                          if b.submitted_at and b.finished_at), 1),
            "judging_wall_seconds": round((pokes[-1]["end_date"] - pokes[0]["start_date"]).total_seconds(), 1)
            if pokes else None}


def _reports_by_metric(runs: list[dict]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in runs:
        out[r["metric"]] = out.get(r["metric"], 0) + int(r.get("reports") or 0)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--systems", type=int, default=20)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--candidates", type=int, default=None, help="default: 12 x queries")
    parser.add_argument("--kind", choices=["oracle", "extractive"], default="oracle")
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--judge-concurrency", type=int, default=16)
    parser.add_argument("--judge-tasks", type=int, default=4)
    parser.add_argument("--parallelism", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=4 * 3600)
    parser.add_argument("--db-url", help="a PostgreSQL URL (default: embedded PostgreSQL, throwaway)")
    parser.add_argument("--batch", action="store_true", help="judge through the stub's batch API")
    parser.add_argument("--batch-delay", type=float, default=60.0, help="seconds the stub takes to end a batch")
    parser.add_argument("--batch-poll", type=float, default=10.0, help="DEEPSCHOLAR_BATCH_POLL_SECONDS")
    args = parser.parse_args(argv)
    database = args.db_url or os.environ.get("DEEPSCHOLAR_DB_URL") or "embedded"
    with throwaway_warehouse("deepscholar_bench_scale_", database=database) as (engine, home):
        return _run(args, engine, home)


def _run(args, engine, home: Path) -> int:
    from support.settings import replay_settings

    from deepscholar.demo import demo_schedule_env, replay_endpoints, wait_for_month
    from deepscholar.local_airflow import LocalAirflow, drop_database, fresh_metadata_database
    from deepscholar.orchestration import BENCHMARK_DAG_ID
    from deepscholar.release.spec import ReleaseSpec
    from deepscholar.release.steps import build_release
    from deepscholar.replay.scale_snapshot import ScaleSpec, write_scale_snapshot
    from deepscholar.replay.server import ReplayServer
    from deepscholar.systems.registry import add_system

    db_url = engine.url.render_as_string(hide_password=False)
    metadata = f"{engine.url.database}_bench_scale_airflow"
    say = lambda text: print(f"# {time.strftime('%H:%M:%S')} {text}", file=sys.stderr, flush=True)  # noqa: E731
    t = time.monotonic()
    manifest = write_scale_snapshot(home / "snapshot", ScaleSpec(candidates=args.candidates or 12 * args.queries))
    month = manifest["month"]
    with ReplayServer(home / "snapshot") as replay:
        spec = ReleaseSpec(categories=manifest["categories"], max_queries=args.queries, judge="local")
        os.environ["DEEPSCHOLAR_OPENALEX_INTERVAL_SECONDS"] = "0"
        built = build_release(engine, month, spec, replay_settings(replay))
        if not built["gx_success"] or built["queries"] < args.queries:
            raise SystemExit(f"the month did not build as needed: {built}")
        release_seconds = time.monotonic() - t
        say(f"release {month}: {built['queries']} queries in {release_seconds:.0f} s")
        for i in range(args.systems):
            if args.kind == "extractive":
                add_system(engine, f"extractive_k{6 + i}", "extractive", {"top_k": 6 + i})
            else:
                add_system(engine, f"oracle_{i + 1}", "oracle")

        stub = RemoteStub(args.latency, batch_delay=args.batch_delay if args.batch else None)
        env = replay_endpoints(replay, manifest, db_url) | demo_schedule_env(month) | {
            "DEEPSCHOLAR_OPENALEX_INTERVAL_SECONDS": "0",
            "DEEPSCHOLAR_JUDGE": "openai/bench-judge", "DEEPSCHOLAR_JUDGE_API_BASE": stub.url,
            "OPENAI_API_KEY": "bench", "DEEPSCHOLAR_JUDGE_CONCURRENCY": str(args.judge_concurrency),
            "DEEPSCHOLAR_JUDGE_TASKS": str(args.judge_tasks)} | ({
                "DEEPSCHOLAR_JUDGE_TRANSPORT": "batch", "DEEPSCHOLAR_BATCH_POLL_SECONDS": str(args.batch_poll)}
                if args.batch else {})
        metadata_url = fresh_metadata_database(db_url, metadata)
        from deepscholar.connection_budget import compute_budget
        from deepscholar.settings import Settings

        budget = compute_budget(Settings.from_env({**os.environ, **env}), environ={"AIRFLOW__CORE__PARALLELISM": str(args.parallelism),
                                         "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": metadata_url}, warehouse_url=db_url)
        try:
            with LocalAirflow(home / "airflow", metadata_url, env, parallelism=args.parallelism) as airflow:
                airflow.wait_for_dags([BENCHMARK_DAG_ID])
                calls_before = stub.requests
                t = time.monotonic()
                with ConnectionSampler(db_url) as connections:
                    airflow.unpause(BENCHMARK_DAG_ID)  # the scheduler starts the month's run, as on the 1st
                    runs = wait_for_month(airflow, engine, month, args.timeout, progress=say)
                    wall = time.monotonic() - t
                calls = stub.requests - calls_before
                stub_stats = stub.stats()
                run = next(r for r in runs if r["dag_id"] == BENCHMARK_DAG_ID)
                batch = _batch_figures(metadata_url, run["dag_run_id"], engine, stub_stats) if args.batch else None
                tis = _task_instances(metadata_url, run["dag_run_id"])
                failed = _failed_attempts(metadata_url, run["dag_run_id"])
                judge_results = _judge_results(metadata_url, run["dag_run_id"])
                judge_rss = [v["peak_rss_mb"] for v in judge_results if v.get("peak_rss_mb")]
                # Where each judge task's life went (runner.judge_job): start-up before the job, first
                # request and last answer counted from the job's start.
                judge_timings = {key: _spread([(v.get("timings") or {}).get(key) for v in judge_results])
                                 for key in ("process_age_at_start_s", "first_request_s", "last_answer_s", "job_s")}
                # Per job, what it judged and how long it took: where an imbalance between jobs comes from.
                judge_jobs = sorted(({
                    "job_s": (v.get("timings") or {}).get("job_s"), "requests": v.get("llm_requests"),
                    "reports_by_metric": _reports_by_metric(v.get("runs") or [])} for v in judge_results),
                    key=lambda j: -(j["job_s"] or 0))
        finally:
            stub.close()
            drop_database(db_url, metadata)
    with engine.connect() as conn:
        reports = conn.exec_driver_sql(
            "SELECT count(*) FROM reports WHERE release_id = %(m)s", {"m": month}).scalar()
    by_task: dict[str, int] = {}
    for ti in tis:
        by_task[ti["task_id"]] = by_task.get(ti["task_id"], 0) + 1
    judges = [ti for ti in tis if ti["task_id"] == "judge" and ti.get("start_date")]
    judge_wall = _seconds(min(ti["start_date"] for ti in judges), max(ti["end_date"] for ti in judges)) \
        if judges else None
    floor = calls * args.latency / (args.judge_concurrency * args.judge_tasks)
    print(json.dumps({
        "systems": args.systems, "kind": args.kind, "queries": built["queries"], "reports": reports,
        "task_instances": by_task, "task_instances_total": len(tis), "run_state": run["state"],
        "judge_calls": calls, "judge_calls_per_report": round(calls / max(reports, 1), 1),
        "latency_ms": args.latency * 1000, "judge_concurrency": args.judge_concurrency,
        "judge_tasks": args.judge_tasks, "parallelism": args.parallelism,
        "wall_seconds": round(wall, 1), "release_seconds": round(release_seconds, 1),
        "judge_floor_seconds": round(floor, 1), "judge_wall_seconds": judge_wall and round(judge_wall, 1),
        "judge_wall_vs_floor": round(judge_wall / floor, 2) if judge_wall and floor else None,
        "scheduler": {
            "scheduled_to_queued_s": _spread([_seconds(t["scheduled_dttm"], t["queued_dttm"]) for t in tis]),
            "queued_to_running_s": _spread([_seconds(t["queued_dttm"], t["start_date"]) for t in tis]),
            "task_seconds": _spread([t["duration"] for t in tis]),
        },
        "judge_task_peak_rss_mb": _spread(judge_rss),
        "judge_task_timings": judge_timings, "judge_jobs": judge_jobs,
        "failed_attempts": failed, "failed_attempts_total": sum(failed.values()),
        "peak_connections": connections.peak, "peak_connections_by_database": connections.peak_by_database,
        "max_connections": connections.max_connections, "connection_samples": connections.samples,
        "connection_budget": budget.worst_case,
        "transport": "batch" if args.batch else "direct", "batch": batch,
    }), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
