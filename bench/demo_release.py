"""Wall time of the demo release: through Airflow (`airflow dags test`) and through the library alone.

Usage: .venv/bin/python bench/demo_release.py [--library-only]   (a throwaway DEEPSCHOLAR_HOME and warehouse)

`--library-only` leaves out the two Airflow runs: its test runs that way, because
tests/dags/test_release_dag_e2e.py already runs the release DAG twice through the same `run_release_dag`,
and running it twice more cost the test suite about two minutes.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.warehouse import throwaway_warehouse  # noqa: E402


def main() -> int:
    library_only = "--library-only" in sys.argv[1:]
    with throwaway_warehouse("deepscholar_bench_") as (engine, home):
        return _run(engine, home, library_only)


def _run(engine, home: Path, library_only: bool) -> int:
    from deepscholar import db
    from deepscholar.demo import replay_endpoints, run_release_dag
    from deepscholar.release.spec import ReleaseSpec
    from deepscholar.release.steps import build_release
    from deepscholar.replay.demo_snapshot import write_demo_snapshot
    from deepscholar.replay.server import ReplayServer

    month = "2025-06"
    snapshot = home / "snapshot"
    t0 = time.monotonic()
    write_demo_snapshot(snapshot, month=month)
    t_snapshot = time.monotonic() - t0
    manifest = json.loads((snapshot / "manifest.json").read_text())
    url = engine.url.render_as_string(hide_password=False)
    with ReplayServer(snapshot) as server:
        endpoints = replay_endpoints(server, manifest, url)
        rc = rc2 = 0
        t_dag = t_rerun = float("nan")
        if not library_only:
            t0 = time.monotonic()
            rc = run_release_dag(month, endpoints, home, home / "dag.log")
            t_dag = time.monotonic() - t0
            t0 = time.monotonic()
            rc2 = run_release_dag(month, endpoints, home, home / "dag.log")
            t_rerun = time.monotonic() - t0
        # The same steps without Airflow, into a second database-free release id is not possible
        # (months are natural keys), so time the library on a fresh schema instead.
        with engine.begin() as conn:
            conn.exec_driver_sql("DROP SCHEMA deepscholar CASCADE")
        db.init_db(engine)
        os.environ.update(endpoints)
        t0 = time.monotonic()
        build_release(engine, month, ReleaseSpec.from_env())
        t_lib = time.monotonic() - t0
    print(f"snapshot generation:               {t_snapshot:6.2f} s")
    if not library_only:
        print(f"release DAG via airflow dags test: {t_dag:6.2f} s (exit {rc})")
        print(f"re-run of the same month:          {t_rerun:6.2f} s (exit {rc2})")
    print(f"release via the library only:      {t_lib:6.2f} s")
    return 0 if rc == rc2 == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
