"""The offline demo: the monthly flow as it runs deployed, under the real Airflow scheduler.

It writes the bundled demo snapshot, serves it over HTTP (arXiv API, e-prints, OpenAlex, and the demo's
external system), points the pipeline's endpoints at it, starts `airflow standalone` (metadata in
PostgreSQL) and unpauses both monthly DAGs with their schedule bounded to the demo month, so the
scheduler fires the release and the benchmark for that month at the same moment, as the cron tick on the
1st does. The benchmark run waits for the release and goes on by itself once it is published. The demo
prints which DAG runs ran, how each was triggered and how it ended, then the month's leaderboard.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from deepscholar import db
from deepscholar.local_airflow import airflow_bin, airflow_env
from deepscholar.orchestration import BENCHMARK_DAG_ID, RELEASE_DAG_ID
from deepscholar.release.window import month_window
from deepscholar.settings import current_settings

PROJECT_ROOT = Path(__file__).resolve().parents[2]
__all__ = ["airflow_bin", "airflow_env", "run_demo", "replay_endpoints", "run_release_dag"]


def run_airflow(args: list[str], env: dict[str, str], log_file: Path | None = None) -> int:
    """Run an Airflow CLI command, streaming its output to a log file (and the terminal when none)."""
    cmd = [airflow_bin(), *args]
    if log_file is None:
        return subprocess.run(cmd, env=env, check=False).returncode
    with log_file.open("a") as out:
        out.write(f"\n$ {' '.join(cmd)}\n")
        out.flush()
        return subprocess.run(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, check=False).returncode


def ensure_airflow_db(env: dict[str, str], log_file: Path | None = None) -> None:
    if run_airflow(["db", "migrate"], env, log_file) != 0:
        raise RuntimeError(f"airflow db migrate failed (see {log_file})")


def logical_date_for(release_id: str) -> str:
    """A cron data-interval timetable's manual run at the END of month M gets M as its data interval."""
    _, end = month_window(release_id)
    return end.strftime("%Y-%m-%dT%H:%M:%S+00:00")


def run_release_dag(release_id: str, endpoints: dict[str, str], home: Path, log_file: Path) -> int:
    env = airflow_env(home, endpoints)
    ensure_airflow_db(env, log_file)
    return run_airflow(["dags", "test", RELEASE_DAG_ID, logical_date_for(release_id)], env, log_file)


# The offline systems of the demo: (name, kind, config).
DEMO_SYSTEMS: list[tuple[str, str, dict]] = [
    ("extractive", "extractive", {}), ("oracle", "oracle", {}), ("human_exemplar", "human_exemplar", {})]
DEMO_EXTERNAL_SYSTEM = "external_jsonl_demo"


def register_demo_systems(engine, snapshot: Path, home: Path, release_id: str) -> None:
    from deepscholar.replay.demo_external import write_external_reports
    from deepscholar.systems.external.importer import import_reports
    from deepscholar.systems.registry import add_system

    for name, kind, config in DEMO_SYSTEMS:
        add_system(engine, name, kind, config)
    jsonl = write_external_reports(snapshot, home / "external" / "reports.jsonl")
    import_reports(engine, DEMO_EXTERNAL_SYSTEM, jsonl, release_id, fmt="jsonl")


def print_reports_table(engine, release_id: str) -> None:
    import sqlalchemy as sa
    from tabulate import tabulate

    with engine.connect() as conn:
        rows = conn.execute(sa.text("""
            SELECT r.system_id, s.kind, count(*) FILTER (WHERE r.status = 'ok') AS ok,
                   count(*) FILTER (WHERE r.status = 'system_error') AS errors,
                   round(avg((SELECT count(*) FROM report_sources x WHERE x.report_id = r.report_id AND x.cited)), 1) AS sources,
                   round(avg(r.n_citations), 1) AS citations, sum(r.n_unresolved_citations) AS unresolved,
                   sum(r.n_leaked_sources) AS leaked, sum(r.n_llm_calls) AS llm_calls
            FROM reports r JOIN systems s USING (system_id) WHERE r.release_id = :r
            GROUP BY 1, 2 ORDER BY 1"""), {"r": release_id}).all()
    print(f"\nReports of {release_id} per system")
    print(tabulate(rows, headers=["system", "kind", "ok", "system_error", "avg sources", "avg citations",
                                  "unresolved", "leaked sources", "LLM calls"]))


def replay_endpoints(server, manifest: dict, db_url: str) -> dict[str, str]:
    """Environment that points the pipeline at a replay server, with the local judge and no rate limit."""
    return {
        "DEEPSCHOLAR_DB_URL": db_url,
        "DEEPSCHOLAR_ARXIV_API_URL": server.arxiv_api_url,
        "DEEPSCHOLAR_ARXIV_EPRINT_URL": server.eprint_url,
        "DEEPSCHOLAR_ARXIV_OAI_URL": server.oai_url,
        "DEEPSCHOLAR_OPENALEX_URL": server.openalex_url,
        "DEEPSCHOLAR_ARXIV_DELAY_SECONDS": "0",
        "DEEPSCHOLAR_OPENALEX_INTERVAL_SECONDS": "0",
        "DEEPSCHOLAR_CATEGORIES": ",".join(manifest["categories"]),
        "DEEPSCHOLAR_JUDGE": "local",
    }


DEMO_HTTP_SYSTEM = "external_http_demo"
DEMO_METADATA_DATABASE = "deepscholar_airflow_demo"


def register_scheduled_demo_systems(engine, demo_system_url: str) -> list[str]:
    """The systems the scheduled demo runs: the offline ones, plus an external system reached over HTTP
    (a third-party service answering each query), all generated by the benchmark DAG itself."""
    from deepscholar.systems.registry import add_system

    for name, kind, config in DEMO_SYSTEMS:
        add_system(engine, name, kind, config)
    add_system(engine, DEMO_HTTP_SYSTEM, "external", {"endpoint": demo_system_url, "timeout": 30})
    return [name for name, _, _ in DEMO_SYSTEMS] + [DEMO_HTTP_SYSTEM]


def demo_schedule_env(month: str) -> dict[str, str]:
    """Bound both DAGs' schedule to the demo month with catchup, so unpausing them makes the scheduler fire
    exactly that month's runs of both DAGs at once: what the cron tick on the 1st of the next month does.

    The sensor pokes every 15 s here: with a reschedule interval of a few seconds, LocalExecutor's report
    of the previous poke can reach the scheduler after the next poke started, and the scheduler then
    fails the sensor ("task state changed externally")."""
    return {"DEEPSCHOLAR_SCHEDULE_START": month, "DEEPSCHOLAR_SCHEDULE_END": month, "DEEPSCHOLAR_CATCHUP": "true",
            "DEEPSCHOLAR_RELEASE_POKE_SECONDS": "15", "DEEPSCHOLAR_TASK_RETRIES": "1"}


def demo_tracks_env() -> dict[str, str]:
    """Every evaluation track on (unless DEEPSCHOLAR_TRACKS says otherwise): the demo builds their release
    artefacts and boards offline with the local judge, so a newcomer sees every board of the month."""
    from deepscholar.evaluation.metrics import registry

    return {"DEEPSCHOLAR_TRACKS": ",".join(current_settings().tracks or registry.tracks())}


def wait_for_month(airflow, engine, month: str, timeout: float, progress=print) -> list[dict]:
    """Until a benchmark run for the month has ended and no run of either DAG is still going, printing
    each change: a DAG run's state, its tasks done so far, and the benchmark run's own state row.

    Returns every DAG run of both DAGs (dicts from the REST API, with `dag_id`)."""
    from deepscholar.scheduling import benchmark_runs

    deadline = time.monotonic() + timeout
    seen: dict[str, object] = {}

    def say(key: str, value, text: str) -> None:
        if seen.get(key) != value:
            seen[key] = value
            progress(f"  {time.strftime('%H:%M:%S')}  {text}")

    while True:
        runs = [r | {"dag_id": dag_id} for dag_id in (RELEASE_DAG_ID, BENCHMARK_DAG_ID)
                for r in airflow.dag_runs(dag_id)]
        for r in runs:
            tasks = airflow.task_instances(r["dag_id"], r["dag_run_id"])
            done = sum(t["state"] in ("success", "skipped", "failed", "upstream_failed") for t in tasks)
            say(f"{r['dag_id']} {r['dag_run_id']}", (r["state"], done),
                f"{r['dag_id']:<22} {r['dag_run_id'][:40]:<40} {r['state']:<8} {done}/{len(tasks)} tasks done")
        ended = False
        current = {r["dag_run_id"] for r in runs if r["dag_id"] == BENCHMARK_DAG_ID}
        for b in (b for b in benchmark_runs(engine, month) if b["run_id"] in current):
            say(f"row {b['run_id']}", (b["state"], b["message"]),
                f"benchmark_runs: {b['state']:<9} {(b['message'] or '')[:100]}")
            ended = ended or b["state"] in ("published", "blocked", "failed")
        if ended and runs and all(r["state"] in ("success", "failed") for r in runs):
            return runs
        if time.monotonic() > deadline:
            raise TimeoutError(f"the month {month} did not finish within {timeout:.0f} s")
        time.sleep(5)


def print_runs(runs: list[dict], engine, month: str) -> None:
    from tabulate import tabulate

    from deepscholar.scheduling import benchmark_runs

    def seconds(r):
        if not (r.get("start_date") and r.get("end_date")):
            return None
        from datetime import datetime

        return round((datetime.fromisoformat(r["end_date"]) - datetime.fromisoformat(r["start_date"]))
                     .total_seconds(), 1)

    print("\nDAG runs (Airflow's own records)")
    print(tabulate([(r["dag_id"], r["dag_run_id"], r.get("run_type"), r.get("triggered_by"), r["state"],
                     seconds(r)) for r in sorted(runs, key=lambda r: (r.get("start_date") or "", r["dag_id"]))],
                   headers=["DAG", "run", "run type", "triggered by", "state", "seconds"]))
    print(f"\nBenchmark runs for {month} (deepscholar.benchmark_runs)")
    print(tabulate([(b["run_id"], b["state"], b["message"]) for b in benchmark_runs(engine, month)],
                   headers=["run", "state", "message"], maxcolwidths=[45, 10, 70]))


def run_demo(month: str = "2025-06", keep_running: bool = False) -> int:
    from deepscholar.local_airflow import LocalAirflow, fresh_metadata_database
    from deepscholar.replay.demo_snapshot import write_demo_snapshot
    from deepscholar.replay.server import ReplayServer
    from deepscholar.reporting import print_release_summary

    started = time.monotonic()
    home = current_settings().home.resolve()
    home.mkdir(parents=True, exist_ok=True)
    snapshot = home / "snapshot"
    write_demo_snapshot(snapshot, month=month)
    manifest = json.loads((snapshot / "manifest.json").read_text())
    engine = db.get_engine()
    db.init_db(engine)
    db_url = engine.url.render_as_string(hide_password=False)
    print(f"warehouse: {db.describe_url(engine)}")
    print(f"snapshot:  {snapshot} ({month}, categories {', '.join(manifest['categories'])})")
    # Airflow's metadata: a fresh database on the warehouse's server for every demo (a scheduler next to
    # SQLite locks); the benchmark data stays in its own database.
    metadata_url = fresh_metadata_database(db_url, DEMO_METADATA_DATABASE)
    from deepscholar.scheduling import release_state

    if release_state(engine, month).published:
        print(f"note:      release {month} is already published (an earlier demo): the benchmark run will not "
              "need to wait for it; `make clean` starts from scratch")
    with ReplayServer(snapshot) as server:
        print(f"replay:    {server.url} (arXiv API, e-prints, OpenAlex, the demo's external system)")
        systems = register_scheduled_demo_systems(engine, server.demo_system_url)
        print(f"systems:   {', '.join(systems)}")
        env = replay_endpoints(server, manifest, db_url) | demo_schedule_env(month) | demo_tracks_env()
        port = current_settings().demo_port
        airflow = LocalAirflow(home / "airflow_demo", metadata_url, env, port=port)
        print(f"airflow:   starting `airflow standalone` on {airflow.url} (log: {airflow.log_path})")
        with airflow:
            airflow.wait_for_dags([RELEASE_DAG_ID, BENCHMARK_DAG_ID])
            print(f"airflow:   unpausing {RELEASE_DAG_ID} and {BENCHMARK_DAG_ID}, scheduled for {month} only: "
                  "the scheduler fires both at once, as the monthly cron tick does")
            airflow.unpause(RELEASE_DAG_ID, BENCHMARK_DAG_ID)
            runs = wait_for_month(airflow, engine, month, timeout=current_settings().demo_timeout_seconds)
            print_release_summary(engine, month)
            print_runs(runs, engine, month)
            print_reports_table(engine, month)
            print_leaderboard(engine, month)
            ok = all(r["state"] == "success" for r in runs if r["dag_id"] == RELEASE_DAG_ID) and any(
                r["state"] == "success" for r in runs if r["dag_id"] == BENCHMARK_DAG_ID)
            print(f"\ndemo wall time: {time.monotonic() - started:.0f} s")
            if keep_running:
                _serve_until_interrupted(airflow)
    if not ok:
        print(f"a DAG run of the demo failed; see {airflow.log_path} and the task logs under "
              f"{home / 'airflow_demo' / 'airflow' / 'logs'}", file=sys.stderr)
        return 1
    return 0


def _serve_until_interrupted(airflow) -> None:
    print(f"\nAirflow keeps running: {airflow.url}  (user admin, password {airflow.admin_password()})")
    print(f"  DAG runs:    {airflow.url}/dags/{BENCHMARK_DAG_ID}")
    print(f"  leaderboard: {airflow.url}/deepscholar/")
    print("Press Ctrl-C to stop Airflow and the replay server.")
    def interrupted(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupted)  # a plain kill also stops Airflow's whole process group
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        print("stopping Airflow ...")


def print_leaderboard(engine, release_id: str) -> None:
    from deepscholar.evaluation.boards.leaderboard import format_leaderboard, load_leaderboard
    from deepscholar.evaluation.judge_spec import JudgeSpec

    judge_config = JudgeSpec.parse("local").config_id
    print(f"\nLeaderboard of {release_id} (judge {judge_config}: the offline embedding judge, for demos and CI)")
    print(format_leaderboard(load_leaderboard(engine, release_id, judge_config), "table"))
    from deepscholar.evaluation.boards.rank_agreement import format_agreement, load_agreement
    from deepscholar.evaluation.metrics import registry

    for track in registry.tracks():
        rows = load_leaderboard(engine, release_id, judge_config, track=track)
        if rows:
            print()
            print(format_leaderboard(rows, "table"))
    agreement = load_agreement(engine, release_id, judge_config)
    if agreement:
        print()
        print(format_agreement(agreement))
    print("\nSQL:  SELECT * FROM deepscholar.leaderboard_latest;   CLI: deepscholar leaderboard --format markdown "
          "(--track NAME for a track's board, --agreement for the table above)")
    print("Page: deepscholar web (http://127.0.0.1:8050/), or in the Airflow UI under "
          "'DeepScholar leaderboard' (plugins/deepscholar_leaderboard.py, mounted at /deepscholar/)")
    print("The embedded PostgreSQL keeps running for the next command; `deepscholar db stop` (or `make stop-db`) "
          "stops it, its data stays under DEEPSCHOLAR_HOME.")
