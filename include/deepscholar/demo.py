"""The offline demo: the monthly flow run by Airflow itself against a local replay of arXiv and OpenAlex.

It writes the bundled demo snapshot, serves it over HTTP, points the pipeline's endpoints at it and runs
`airflow dags test` on the release DAG, so the real clients, the real DAG and the real warehouse are used.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from deepscholar import db
from deepscholar.config import deepscholar_home
from deepscholar.orchestration import BENCHMARK_DAG_ID, RELEASE_DAG_ID
from deepscholar.release.window import month_window

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def airflow_env(home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for an Airflow CLI subprocess with its own home and our DAG folder."""
    airflow_home = home / "airflow"
    airflow_home.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    # A test process's unit-test mode would make Airflow ignore the configuration given here.
    env.pop("AIRFLOW__CORE__UNIT_TEST_MODE", None)
    env.update({
        "AIRFLOW_HOME": str(airflow_home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(PROJECT_ROOT / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(PROJECT_ROOT / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": env.get("AIRFLOW__LOGGING__LOGGING_LEVEL", "INFO"),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
    })
    env.update(extra or {})
    return env


def airflow_bin() -> str:
    candidate = Path(sys.executable).parent / "airflow"
    return str(candidate) if candidate.exists() else "airflow"


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


def run_benchmark_dag(release_id: str, endpoints: dict[str, str], home: Path, log_file: Path,
                      systems: list[str] | None = None) -> int:
    env = airflow_env(home, endpoints)
    args = ["dags", "test", BENCHMARK_DAG_ID, logical_date_for(release_id)]
    if systems:
        args += ["--conf", json.dumps({"systems": systems})]
    return run_airflow(args, env, log_file)


# The offline systems of the demo: (name, kind, config).
DEMO_SYSTEMS = [("extractive", "extractive", {}), ("oracle", "oracle", {}), ("human_exemplar", "human_exemplar", {})]
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
                   round(avg((SELECT count(*) FROM report_sources x WHERE x.report_id = r.report_id)), 1) AS sources,
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
        "DEEPSCHOLAR_OPENALEX_URL": server.openalex_url,
        "DEEPSCHOLAR_ARXIV_DELAY_SECONDS": "0",
        "DEEPSCHOLAR_CATEGORIES": ",".join(manifest["categories"]),
        "DEEPSCHOLAR_JUDGE": "local",
    }


def run_demo(month: str = "2025-06") -> int:
    from deepscholar.replay.demo_snapshot import write_demo_snapshot
    from deepscholar.replay.server import ReplayServer
    from deepscholar.reporting import print_release_summary

    home = deepscholar_home()
    home.mkdir(parents=True, exist_ok=True)
    log_file = home / "demo.log"
    log_file.write_text("")
    started = time.monotonic()
    snapshot = home / "snapshot"
    write_demo_snapshot(snapshot, month=month)
    manifest = json.loads((snapshot / "manifest.json").read_text())
    engine = db.get_engine()
    db.init_db(engine)
    db_url = engine.url.render_as_string(hide_password=False)
    print(f"warehouse: {db.describe_url(engine)}")
    print(f"snapshot:  {snapshot} ({month}, categories {', '.join(manifest['categories'])})")
    with ReplayServer(snapshot) as server:
        print(f"replay:    {server.url} (arXiv API, e-prints, OpenAlex)")
        endpoints = replay_endpoints(server, manifest, db_url)
        print(f"airflow:   dags test {RELEASE_DAG_ID} {logical_date_for(month)} (log: {log_file})")
        rc = run_release_dag(month, endpoints, home, log_file)
        release_time = time.monotonic() - started
        print_release_summary(engine, month)
        print(f"demo release wall time: {release_time:.1f} s; airflow exit code {rc}")
        if rc != 0:
            print(f"the release DAG run failed; see {log_file}", file=sys.stderr)
            return rc
        register_demo_systems(engine, snapshot, home, month)
        print(f"\nairflow:   dags test {BENCHMARK_DAG_ID} {logical_date_for(month)} "
              f"(systems: {', '.join(n for n, _, _ in DEMO_SYSTEMS)}; {DEMO_EXTERNAL_SYSTEM} imported from JSONL)")
        started = time.monotonic()
        rc = run_benchmark_dag(month, endpoints, home, log_file)
        benchmark_time = time.monotonic() - started
    print_reports_table(engine, month)
    print(f"benchmark wall time (generation + judging + roll-up): {benchmark_time:.1f} s; airflow exit code {rc}")
    if rc != 0:
        print(f"the benchmark DAG run failed; see {log_file}", file=sys.stderr)
        return rc
    print_leaderboard(engine, month)
    return rc


def print_leaderboard(engine, release_id: str) -> None:
    from deepscholar.evaluation.judges import JudgeSpec
    from deepscholar.evaluation.leaderboard import format_leaderboard, load_leaderboard

    judge_config = JudgeSpec.parse("local").config_id
    print(f"\nLeaderboard of {release_id} (judge {judge_config}: the offline embedding judge, for demos and CI)")
    print(format_leaderboard(load_leaderboard(engine, release_id, judge_config), "table"))
    print("\nSQL:  SELECT * FROM deepscholar.leaderboard_latest;   CLI: deepscholar leaderboard --format markdown")
    print("Page: deepscholar web (http://127.0.0.1:8050/), or in the Airflow UI under "
          "'DeepScholar leaderboard' (plugins/deepscholar_leaderboard.py, mounted at /deepscholar/)")
