"""The deployment's warehouse connections in the worst case, derived from the settings an operator sets.

Design notes: docs/MODULE_NOTES.md, `deepscholar.connection_budget`.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar.orchestration import BENCHMARK_MAX_ACTIVE_RUNS
from deepscholar.settings import Settings, current_settings

__all__ = ["LOCK_CONNECTIONS_PER_PROCESS", "Budget", "compute_budget", "server_limit", "describe_budget", "log_budget"]

log = logging.getLogger(__name__)

# Airflow's defaults for the variables read below (airflow/config_templates/config.yml, Airflow 3.3).
AIRFLOW_DEFAULTS = {
    "AIRFLOW__CORE__PARALLELISM": 32,
    "AIRFLOW__API__WORKERS": 1,
    "AIRFLOW__DATABASE__SQL_ALCHEMY_POOL_SIZE": 5,
    "AIRFLOW__DATABASE__SQL_ALCHEMY_MAX_OVERFLOW": 10,
}
AIRFLOW_COMPONENTS = ("scheduler", "dag-processor", "triggerer")  # plus the API server's workers
# Connections outside the pool a judging process may hold beside it: the advisory lock of document
# importance's cited-by freeze (source_counts._session_lock on db.dedicated_connection).
LOCK_CONNECTIONS_PER_PROCESS = 1


def _airflow_int(environ: Mapping[str, str], name: str) -> int:
    """The variable's value, else (inside an Airflow process, which has already loaded it) Airflow's own
    configuration, e.g. airflow.cfg, else Airflow's default."""
    raw = environ.get(name, "").strip()
    if not raw and environ is os.environ and "airflow.configuration" in sys.modules:
        _, section, key = name.lower().split("__", 2)
        try:
            raw = str(sys.modules["airflow.configuration"].conf.get(section, key, fallback="") or "")
        except Exception:  # an older or partial configuration: the default below
            raw = ""
    try:
        return max(0, int(raw)) if raw else AIRFLOW_DEFAULTS[name]
    except ValueError:
        return AIRFLOW_DEFAULTS[name]


@dataclass(frozen=True)
class Budget:
    parallelism: int
    judge_processes: int
    judge_pool: int
    task_pool: int
    api_workers: int
    airflow_same_server: bool | None  # None: Airflow's metadata URL is not known to this process
    airflow_per_component: int
    airflow_components: int

    @property
    def warehouse(self) -> int:
        other_tasks = self.parallelism - self.judge_processes
        return (self.judge_processes * (self.judge_pool + LOCK_CONNECTIONS_PER_PROCESS)
                + other_tasks * self.task_pool
                + (self.api_workers + 1) * self.task_pool + LOCK_CONNECTIONS_PER_PROCESS)

    @property
    def airflow(self) -> int:
        return self.airflow_components * self.airflow_per_component if self.airflow_same_server else 0

    @property
    def worst_case(self) -> int:
        return self.warehouse + self.airflow

    def lines(self) -> list[str]:
        other = self.parallelism - self.judge_processes
        out = [
            f"judge tasks:        {self.judge_processes} x ({self.judge_pool} + {LOCK_CONNECTIONS_PER_PROCESS} lock) = "
            f"{self.judge_processes * (self.judge_pool + LOCK_CONNECTIONS_PER_PROCESS)}",
            f"other tasks:        {other} x {self.task_pool} = {other * self.task_pool} "
            f"(Airflow parallelism {self.parallelism})",
            f"page and CLI:       {self.api_workers + 1} x {self.task_pool} + {LOCK_CONNECTIONS_PER_PROCESS} lock = "
            f"{(self.api_workers + 1) * self.task_pool + LOCK_CONNECTIONS_PER_PROCESS}",
        ]
        if self.airflow_same_server is None:
            out.append("Airflow metadata:   not counted (AIRFLOW__DATABASE__SQL_ALCHEMY_CONN is not set here; "
                       f"on the same server it adds {self.airflow_components} x {self.airflow_per_component})")
        elif self.airflow_same_server:
            out.append(f"Airflow metadata:   {self.airflow_components} x {self.airflow_per_component} = {self.airflow} "
                       "(same server)")
        else:
            out.append("Airflow metadata:   0 (another server)")
        out.append(f"worst case:         {self.worst_case}")
        return out


def _same_server(warehouse_url: str | None, environ: Mapping[str, str]) -> bool | None:
    metadata = environ.get("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN")
    if not metadata or not warehouse_url:
        return None
    try:
        a, b = sa.engine.make_url(warehouse_url), sa.engine.make_url(metadata)
    except Exception:
        return None
    if not b.drivername.startswith("postgres"):
        return False

    def where(url: sa.engine.URL) -> tuple:
        # A socket connection (the embedded server) names its directory in the query's host.
        return (url.host or str(url.query.get("host", "")), url.port or 5432)

    return where(a) == where(b)


def compute_budget(settings: Settings | None = None, environ: Mapping[str, str] | None = None,
                   warehouse_url: str | None = None) -> Budget:
    """The worst case of the deployment this process belongs to (see the module's formula)."""
    settings = settings or current_settings()
    environ = os.environ if environ is None else environ
    parallelism = max(1, _airflow_int(environ, "AIRFLOW__CORE__PARALLELISM"))
    api_workers = max(1, _airflow_int(environ, "AIRFLOW__API__WORKERS"))
    return Budget(
        parallelism=parallelism,
        judge_processes=min(parallelism, settings.judge_tasks * BENCHMARK_MAX_ACTIVE_RUNS),
        judge_pool=settings.judge_db_pool_size,
        task_pool=settings.db_pool_size,
        api_workers=api_workers,
        airflow_same_server=_same_server(warehouse_url, environ),
        airflow_per_component=(_airflow_int(environ, "AIRFLOW__DATABASE__SQL_ALCHEMY_POOL_SIZE")
                               + _airflow_int(environ, "AIRFLOW__DATABASE__SQL_ALCHEMY_MAX_OVERFLOW")),
        airflow_components=len(AIRFLOW_COMPONENTS) + api_workers,
    )


def server_limit(engine: Engine) -> int:
    """Connections the server gives ordinary users: max_connections minus the superuser reserve."""
    with engine.connect() as conn:
        total = int(conn.execute(sa.text("SHOW max_connections")).scalar_one())
        reserved = int(conn.execute(sa.text("SHOW superuser_reserved_connections")).scalar_one())
    return total - reserved


def describe_budget(engine: Engine | None, settings: Settings | None = None,
                    environ: Mapping[str, str] | None = None) -> tuple[Budget, int | None, list[str]]:
    """(budget, the server's limit or None when unreachable, lines to print, a warning last if it can exceed)."""
    url = engine.url.render_as_string(hide_password=False) if engine is not None else None
    budget = compute_budget(settings, environ, url)
    limit = None
    if engine is not None:
        try:
            limit = server_limit(engine)
        except Exception as exc:  # the budget is still worth printing without the server
            log.debug("max_connections not readable: %s", exc)
    lines = budget.lines()
    if limit is None:
        lines.append("server limit:       unknown (the warehouse did not answer)")
    else:
        lines.append(f"server limit:       {limit} (max_connections minus the superuser reserve)")
        if budget.worst_case > limit:
            lines.append(f"WARNING: this configuration can open {budget.worst_case} connections, {budget.worst_case - limit} "
                         f"more than the server's {limit}: lower DEEPSCHOLAR_DB_POOL_SIZE, "
                         "DEEPSCHOLAR_JUDGE_DB_POOL_SIZE, DEEPSCHOLAR_JUDGE_TASKS or Airflow's parallelism, or raise "
                         "max_connections (DEEPSCHOLAR_EMBEDDED_MAX_CONNECTIONS for the embedded server)")
    return budget, limit, lines


def log_budget(engine: Engine) -> Budget:
    """Log the budget (a warning when it can exceed the server's limit), e.g. in a task's log."""
    budget, limit, lines = describe_budget(engine)
    over = limit is not None and budget.worst_case > limit
    (log.warning if over else log.info)("warehouse connections:\n  %s", "\n  ".join(lines))
    return budget
