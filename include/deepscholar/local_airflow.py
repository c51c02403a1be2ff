"""A real Airflow on this machine (`airflow standalone`: scheduler, dag-processor, triggerer, API server,
LocalExecutor) for the demo and the end-to-end tests, driven through its REST API as an operator would.

`airflow dags test` runs one DAG in-process, one task after another; it cannot show what the scheduler
does when both monthly DAGs fire at the same tick. This module starts the real thing with its metadata
in PostgreSQL (SQLite locks under a running scheduler), waits until it answers and has parsed our DAGs,
and stops its whole process group afterwards.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import requests
import sqlalchemy as sa

PROJECT_ROOT = Path(__file__).resolve().parents[2]
TERMINAL_RUN_STATES = ("success", "failed")


def airflow_bin() -> str:
    candidate = Path(sys.executable).parent / "airflow"
    return str(candidate) if candidate.exists() else "airflow"


def airflow_env(home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for an Airflow process with its own home and our DAG and plugin folders."""
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
        # standalone starts its components by running `airflow` from PATH.
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
    })
    env.update(extra or {})
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _on_server(server_url: str, *statements: str) -> None:
    """Run statements that cannot run in a transaction (CREATE/DROP DATABASE) on the server's postgres DB."""
    admin = sa.create_engine(sa.engine.make_url(server_url).set(database="postgres"), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            for statement in statements:
                conn.execute(sa.text(statement))
    finally:
        admin.dispose()


def fresh_metadata_database(server_url: str, name: str) -> str:
    """(Re)create an empty database for Airflow's metadata on the given PostgreSQL server; returns its URL."""
    _on_server(server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', f'CREATE DATABASE "{name}"')
    return sa.engine.make_url(server_url).set(database=name).render_as_string(hide_password=False)


def drop_database(server_url: str, name: str) -> None:
    _on_server(server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@dataclass
class LocalAirflow:
    """`airflow standalone` in its own process group; use as a context manager or start()/stop()."""

    home: Path
    metadata_url: str
    extra_env: dict[str, str] = field(default_factory=dict)
    port: int = 0
    parallelism: int = 4
    log_path: Path | None = None
    _proc: subprocess.Popen | None = None
    _token: str | None = None

    def __post_init__(self) -> None:
        self.port = self.port or free_port()
        self.log_path = self.log_path or self.home / "standalone.log"
        self.env = airflow_env(self.home, {
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": self.metadata_url,
            "AIRFLOW__CORE__PARALLELISM": str(self.parallelism),
            "AIRFLOW__API__PORT": str(self.port),
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{self.port}/execution/",
            "AIRFLOW__SCHEDULER__DAG_DIR_LIST_INTERVAL": "5",
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            **self.extra_env,
        })

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 240) -> LocalAirflow:
        self.home.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("a")
        self._proc = subprocess.Popen([airflow_bin(), "standalone"], env=self.env, stdout=log,
                                      stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"airflow standalone exited with {self._proc.returncode}: {self.log_tail()}")
            try:
                if requests.get(f"{self.url}/api/v2/monitor/health", timeout=2).ok:
                    return self
            except requests.RequestException:
                pass
            time.sleep(2)
        self.stop()
        raise TimeoutError(f"airflow standalone did not answer within {timeout:.0f} s: {self.log_tail()}")

    def stop(self) -> None:
        """SIGTERM to the whole process group (the parent alone would orphan its children), then SIGKILL."""
        if self._proc is None:
            return
        try:
            os.killpg(self._proc.pid, signal.SIGTERM)
            self._proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait(10)
        except ProcessLookupError:
            pass
        self._proc = None

    def __enter__(self) -> LocalAirflow:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    # -- the REST API, as an operator would use it --

    def admin_password(self) -> str:
        generated = self.home / "airflow" / "simple_auth_manager_passwords.json.generated"
        return json.loads(generated.read_text())["admin"]

    def _headers(self) -> dict[str, str]:
        if self._token is None:
            resp = requests.post(f"{self.url}/auth/token",
                                 json={"username": "admin", "password": self.admin_password()}, timeout=30)
            resp.raise_for_status()
            self._token = resp.json()["access_token"]
        return {"Authorization": f"Bearer {self._token}"}

    def api(self, method: str, path: str, **kwargs) -> dict:
        resp = requests.request(method, f"{self.url}/api/v2{path}", headers=self._headers(), timeout=60, **kwargs)
        if not resp.ok:
            raise RuntimeError(f"{method} {path}: HTTP {resp.status_code}: {resp.text[:500]}")
        return resp.json() if resp.content else {}

    def wait_for_dags(self, dag_ids: list[str], timeout: float = 180) -> None:
        """Until the dag-processor has parsed and serialised every DAG (only then can it be unpaused)."""
        deadline = time.monotonic() + timeout
        missing = list(dag_ids)
        while time.monotonic() < deadline:
            missing = []
            for dag_id in dag_ids:
                try:
                    self.api("GET", f"/dags/{dag_id}")
                except RuntimeError:
                    missing.append(dag_id)
            if not missing:
                return
            time.sleep(3)
        raise TimeoutError(f"DAGs not parsed within {timeout:.0f} s: {missing}: {self.log_tail()}")

    def unpause(self, *dag_ids: str) -> None:
        for dag_id in dag_ids:
            self.api("PATCH", f"/dags/{dag_id}", json={"is_paused": False})

    def trigger(self, dag_id: str, logical_date: str | None, conf: dict | None = None) -> dict:
        return self.api("POST", f"/dags/{dag_id}/dagRuns", json={"logical_date": logical_date, "conf": conf or {}})

    def dag_runs(self, dag_id: str) -> list[dict]:
        return self.api("GET", f"/dags/{dag_id}/dagRuns", params={"order_by": "run_after", "limit": 100})[
            "dag_runs"]

    def task_instances(self, dag_id: str, run_id: str) -> list[dict]:
        return self.api("GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances", params={"limit": 1000})[
            "task_instances"]
