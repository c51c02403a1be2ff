"""A real Airflow on this machine for the demo and the end-to-end tests, driven through its REST API as an
operator would: `airflow standalone` (scheduler, dag-processor, triggerer, API server, LocalExecutor), or
with `executor="celery"` the same components as separate processes plus `airflow celery worker`s on a
Redis broker — the deployment of docker-compose.yaml's `celery` profile, with the same settings
(`celery_settings`), minus the containers.

`airflow dags test` runs one DAG in-process, one task after another; it cannot show what the scheduler
does when both monthly DAGs fire at the same tick. This module starts the real thing with its metadata
in PostgreSQL (SQLite locks under a running scheduler), waits until it answers and has parsed our DAGs,
and stops every process group it started afterwards.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import requests
import sqlalchemy as sa

from deepscholar.airflow_api import AirflowAPI, AirflowAPIError

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
        # The task and trigger log servers listen on fixed ports (8793, 8794) by default: two Airflows on
        # one machine (tests side by side, a demo beside a test) would collide.
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
    })
    env.update(extra or {})
    return env


def celery_settings(broker_url: str, metadata_url: str, *, concurrency: int = 4, queue: str = "default",
                    jwt_secret: str = "") -> dict[str, str]:
    """The Airflow settings that make a deployment run its tasks on Celery workers.

    docker-compose.yaml's `celery` profile sets the same variables (tests/unit/test_deploy_files.py checks
    it). Every component must share the JWT secret: the API server signs the token a worker's task
    process presents to the execution API with it.
    """
    url = metadata_url.split("://", 1)
    return {
        "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
        "AIRFLOW__CELERY__BROKER_URL": broker_url,
        # Celery's database result backend takes a SQLAlchemy URL behind "db+" (Airflow's metadata DB).
        "AIRFLOW__CELERY__RESULT_BACKEND": f"db+{url[0]}://{url[1]}",
        "AIRFLOW__CELERY__WORKER_CONCURRENCY": str(concurrency),
        "AIRFLOW__OPERATORS__DEFAULT_QUEUE": queue,
        "AIRFLOW__API_AUTH__JWT_SECRET": jwt_secret,
    }


def worker_hostname() -> str:
    """Airflow's `[core] hostname_callable` for the local Celery workers: each worker process stands for
    a machine (DEEPSCHOLAR_WORKER_HOSTNAME), so task instances record which worker ran them, as separate
    containers or hosts would."""
    from deepscholar.settings import current_settings

    return current_settings().worker_hostname or socket.getfqdn()


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
    """Airflow's processes, each in its own process group; use as a context manager or start()/stop().

    executor "local": `airflow standalone`. executor "celery": `airflow db migrate`, then api-server,
    scheduler, dag-processor, triggerer and `workers` Celery workers (hostnames `worker-1`, ...) on
    `broker_url`, consuming a queue of their own so two test runs never share a broker's tasks.
    """

    home: Path
    metadata_url: str
    extra_env: dict[str, str] = field(default_factory=dict)
    port: int = 0
    parallelism: int = 4
    log_path: Path | None = None
    executor: str = "local"
    broker_url: str | None = None
    workers: int = 2
    worker_concurrency: int = 2
    _procs: list[subprocess.Popen] = field(default_factory=list)
    _component_logs: list[Path] = field(default_factory=list)
    _client: AirflowAPI | None = None

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
        if self.executor == "celery":
            if not self.broker_url:
                raise ValueError("the celery executor needs a broker_url (redis://host:port/db)")
            self.queue = f"deepscholar-{uuid.uuid4().hex[:8]}"
            self.env.update(celery_settings(self.broker_url, self.metadata_url, concurrency=self.worker_concurrency,
                                            queue=self.queue, jwt_secret=secrets.token_urlsafe(32)))
        elif self.executor != "local":
            raise ValueError(f"executor must be 'local' or 'celery', not {self.executor!r}")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _spawn(self, args: list[str], env: dict[str, str] | None = None, name: str | None = None) -> subprocess.Popen:
        """One component in its own process group, logging to `log_path` (standalone) or to
        `<home>/logs/<name>.log` (a component of the celery deployment)."""
        path = self.log_path
        assert path is not None  # __post_init__ sets it
        if name:
            path = self.home / "logs" / f"{name}.log"
            path.parent.mkdir(parents=True, exist_ok=True)
            self._component_logs.append(path)
        log = path.open("a")
        try:
            proc = subprocess.Popen([airflow_bin(), *args], env=env or self.env, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        finally:
            log.close()
        self._procs.append(proc)
        return proc

    def start(self, timeout: float = 240) -> LocalAirflow:
        self.home.mkdir(parents=True, exist_ok=True)
        if self.executor == "local":
            self._spawn(["standalone"])
        else:
            self._start_celery_deployment(timeout)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for proc in self._procs:
                if proc.poll() is not None:
                    args = " ".join(cast("list[str]", proc.args)[1:])  # _spawn passes a list
                    self.stop()
                    raise RuntimeError(f"airflow {args} exited with {proc.returncode}: {self.log_tail()}")
            try:
                if requests.get(f"{self.url}/api/v2/monitor/health", timeout=2).ok:
                    return self
            except requests.RequestException:
                pass
            time.sleep(2)
        self.stop()
        raise TimeoutError(f"Airflow did not answer within {timeout:.0f} s: {self.log_tail()}")

    def _start_celery_deployment(self, timeout: float) -> None:
        migrate = subprocess.run([airflow_bin(), "db", "migrate"], env=self.env, capture_output=True, text=True,
                                 timeout=timeout)
        if migrate.returncode != 0:
            raise RuntimeError(f"airflow db migrate failed: {(migrate.stdout + migrate.stderr)[-3000:]}")
        for component in ("api-server", "scheduler", "dag-processor", "triggerer"):
            self._spawn([component], name=component)
        for n in range(1, self.workers + 1):
            name = f"worker-{n}"
            # Each worker serves its task logs to the API server on a port of its own (one per host when deployed).
            env = self.env | {"DEEPSCHOLAR_WORKER_HOSTNAME": name,
                              "AIRFLOW__CORE__HOSTNAME_CALLABLE": "deepscholar.local_airflow.worker_hostname",
                              "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port())}
            self._spawn(["celery", "worker", "--celery-hostname", f"{name}@%h", "--queues", self.queue,
                         "--concurrency", str(self.worker_concurrency), "--without-mingle", "--without-gossip"],
                        env, name=name)

    def stop(self) -> None:
        """SIGTERM to each whole process group (a parent alone would orphan its children), then SIGKILL."""
        for proc in self._procs:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for proc in self._procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait(10)
        self._procs = []

    def __enter__(self) -> LocalAirflow:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def log_tail(self, chars: int = 4000) -> str:
        """The end of the log (standalone), or of each component's log (celery deployment)."""
        assert self.log_path is not None  # __post_init__ sets it
        paths = self._component_logs or [self.log_path]
        share = max(500, chars // len(paths))
        out = []
        for path in paths:
            try:
                text = path.read_text(errors="replace")[-share:]
            except OSError:
                continue
            out.append(text if len(paths) == 1 else f"--- {path.name} ---\n{text}")
        return "\n".join(out)

    def failed_task_logs(self, dag_id: str, run_id: str, chars: int = 2000) -> str:
        """The end of each failed task's log of a run (read from the log folder): why a run failed, for a
        test's message, where the standalone's own log says only that it did."""
        out = []
        for t in self.task_instances(dag_id, run_id):
            if t["state"] != "failed":
                continue
            folder = self.home / "airflow" / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}" / f"task_id={t['task_id']}"
            if t.get("map_index", -1) >= 0:
                folder = folder / f"map_index={t['map_index']}"
            for path in sorted(folder.glob("attempt=*.log")):
                out.append(f"--- {t['task_id']} {path.name} ---\n{path.read_text(errors='replace')[-chars:]}")
        return "\n".join(out)

    # -- the REST API, as an operator would use it --

    def admin_password(self) -> str:
        return self.password_of("admin")

    def password_of(self, user: str) -> str:
        """The password the standalone generated for a user of its simple auth manager (AIRFLOW__CORE__
        SIMPLE_AUTH_MANAGER_USERS, e.g. "admin:admin,bob:user" in `extra_env`)."""
        generated = self.home / "airflow" / "simple_auth_manager_passwords.json.generated"
        return json.loads(generated.read_text())[user]

    def as_user(self, user: str) -> AirflowAPI:
        """The REST API signed in as another user of the standalone (with that user's role)."""
        return AirflowAPI(self.url, user, lambda: self.password_of(user))

    @property
    def client(self) -> AirflowAPI:
        """The REST API signed in as the standalone's admin (password read when first needed)."""
        if self._client is None:
            self._client = AirflowAPI(self.url, "admin", self.admin_password)
        return self._client

    def api(self, method: str, path: str, **kwargs) -> dict:
        return self.client.request(method, path, **kwargs)

    def wait_for_dags(self, dag_ids: list[str], timeout: float = 180) -> None:
        """Until the dag-processor has parsed and serialised every DAG (only then can it be unpaused)."""
        deadline = time.monotonic() + timeout
        missing = list(dag_ids)
        while time.monotonic() < deadline:
            missing = []
            for dag_id in dag_ids:
                try:
                    self.api("GET", f"/dags/{dag_id}")
                except AirflowAPIError:
                    missing.append(dag_id)
            if not missing:
                return
            time.sleep(3)
        raise TimeoutError(f"DAGs not parsed within {timeout:.0f} s: {missing}: {self.log_tail()}")

    def unpause(self, *dag_ids: str) -> None:
        for dag_id in dag_ids:
            self.api("PATCH", f"/dags/{dag_id}", json={"is_paused": False})

    def dag_runs(self, dag_id: str) -> list[dict]:
        return self.api("GET", f"/dags/{dag_id}/dagRuns", params={"order_by": "run_after", "limit": 100})[
            "dag_runs"]

    def task_instances(self, dag_id: str, run_id: str) -> list[dict]:
        """Every task instance of the run: the API answers at most its page limit (100) at a time."""
        found: list[dict] = []
        while True:
            page = self.api("GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances",
                            params={"limit": 100, "offset": len(found)})
            found += page["task_instances"]
            if not page["task_instances"] or len(found) >= page.get("total_entries", 0):
                return found
