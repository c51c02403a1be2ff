"""The warehouse: engine resolution, schema upgrades (deepscholar.migrations) and upserts on natural keys.

Engine resolution order: an explicit URL, `DEEPSCHOLAR_DB_URL`, the Airflow connection `deepscholar_db`,
else an embedded PostgreSQL (pgserver) under `$DEEPSCHOLAR_HOME/pgdata`. The benchmark data always lives
in its own database, apart from Airflow's metadata.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.engine import Engine

from deepscholar.settings import current_settings

log = logging.getLogger(__name__)
# pgserver logs every handle at INFO, including from atexit after pytest closed its streams.
logging.getLogger("pgserver").setLevel(logging.WARNING)

SCHEMA = "deepscholar"
EMBEDDED_DATABASE = "deepscholar"
AIRFLOW_CONN_ID = "deepscholar_db"
SQL_DIR = current_settings().sql_dir or Path(__file__).resolve().parents[2] / "sql"


def _normalise_url(url: str) -> str:
    """Airflow-style `postgres://` and bare `postgresql://` URLs both map to the psycopg2 driver."""
    if url.startswith("postgres://"):
        url = "postgresql://" + url[len("postgres://"):]
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg2://" + url[len("postgresql://"):]
    return url


def _airflow_connection_url() -> str | None:
    """The Airflow connection, when we run inside Airflow or it is given as an env var."""
    env_uri = os.environ.get(f"AIRFLOW_CONN_{AIRFLOW_CONN_ID.upper()}")
    if env_uri:
        return env_uri
    if "airflow.sdk" not in sys.modules:  # never pay Airflow's import cost from the plain CLI
        return None
    try:
        from airflow.sdk import Connection

        return Connection.get(AIRFLOW_CONN_ID).get_uri()
    except Exception:  # connection not defined: fall through to the embedded database
        return None


def embedded_server_uri(home: Path | None = None) -> str:
    """Start (or reuse) the project's embedded PostgreSQL and return a URL to its benchmark database."""
    home = home or current_settings().home.resolve()
    home.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver

        # cleanup_mode=None: the server outlives this process, so the CLI, Airflow tasks and the demo share it.
        server = pgserver.get_server(home / "pgdata", cleanup_mode=None)
    exists = server.psql(f"SELECT 1 FROM pg_database WHERE datname = '{EMBEDDED_DATABASE}';")
    if "(1 row)" not in exists:
        server.psql(f"CREATE DATABASE {EMBEDDED_DATABASE};")
    return server.get_uri(EMBEDDED_DATABASE)


def stop_embedded_server(home: Path | None = None) -> bool:
    """Stop the embedded PostgreSQL under `home` if it runs; its data stays on disk."""
    pgdata = (home or current_settings().home.resolve()) / "pgdata"
    if not (pgdata / "postmaster.pid").exists():
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver
        from pgserver._commands import pg_ctl  # type: ignore[attr-defined]  # made by setattr at import

        server = pgserver.get_server(pgdata, cleanup_mode=None)
        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=pgdata, user=server.system_user)
    _engine_for.cache_clear()
    return True


def resolve_db_url(url: str | None = None) -> str:
    url = url or current_settings().db_url or _airflow_connection_url()
    return _normalise_url(url or embedded_server_uri())


@cache
def _engine_for(url: str) -> Engine:
    return sa.create_engine(
        url,
        pool_pre_ping=True,
        # Judge tasks run many LLM calls at once, each touching the llm_calls cache briefly.
        pool_size=8,
        max_overflow=24,
        connect_args={"options": f"-csearch_path={SCHEMA},public"},
    )


def get_engine(url: str | None = None) -> Engine:
    """One engine per URL per process (the pool is shared by everything in the process)."""
    return _engine_for(resolve_db_url(url))


def describe_url(engine: Engine) -> str:
    return engine.url.render_as_string(hide_password=True)


def init_db(engine: Engine) -> list[str]:
    """Upgrade the warehouse to the newest schema revision, keeping every row (deepscholar.migrations).

    Returns the revision ids applied, empty when already at head (then it costs one SELECT). An
    advisory lock serialises concurrent callers (mapped tasks may all call it at start-up).
    """
    from deepscholar import migrations

    applied = migrations.upgrade(engine)
    _tables.cache_clear()
    return applied


@cache
def _tables(engine: Engine) -> Mapping[str, sa.Table]:
    meta = sa.MetaData()
    meta.reflect(bind=engine, schema=SCHEMA)
    return {t.name: t for t in meta.tables.values()}


def table(engine_or_conn: Engine | sa.Connection, name: str) -> sa.Table:
    engine = engine_or_conn.engine if isinstance(engine_or_conn, sa.Connection) else engine_or_conn
    tables = _tables(engine)
    if name not in tables:
        _tables.cache_clear()
        tables = _tables(engine)
    try:
        return tables[name]
    except KeyError:
        raise LookupError(f"table {SCHEMA}.{name} does not exist: run `deepscholar db init`") from None


def upsert(
    conn: sa.Connection,
    table_name: str,
    rows: Sequence[Mapping] | Iterable[Mapping],
    key: Sequence[str],
    update: Sequence[str] | None = None,
) -> int:
    """Insert rows, or update the given columns of rows whose natural key exists.

    `update=None` updates every non-key column supplied; `update=[]` keeps existing rows untouched
    (first write wins, e.g. for data frozen at release time).
    """
    rows = [dict(r) for r in rows]
    if not rows:
        return 0
    columns = list(rows[0].keys())
    if any(r.keys() != rows[0].keys() for r in rows):
        # A missing key would be bound as NULL for some rows and not others: refuse rather than guess.
        raise ValueError(f"upsert into {table_name}: every row must have the same columns")
    tbl = table(conn, table_name)
    stmt = pg_insert(tbl)
    to_update = [c for c in columns if c not in key] if update is None else list(update)
    if "updated_at" in tbl.c and to_update and "updated_at" not in to_update:
        stmt_set = {c: stmt.excluded[c] for c in to_update} | {"updated_at": sa.func.now()}
    else:
        stmt_set = {c: stmt.excluded[c] for c in to_update}
    stmt = stmt.on_conflict_do_update(index_elements=list(key), set_=stmt_set) if stmt_set else (
        stmt.on_conflict_do_nothing(index_elements=list(key))
    )
    total = 0
    for start in range(0, len(rows), 1000):
        total += conn.execute(stmt, rows[start:start + 1000]).rowcount or 0
    return total


def row_counts(engine: Engine) -> dict[str, int]:
    """Row count of every table in the schema; used to show that re-runs change nothing."""
    with engine.connect() as conn:
        names = conn.execute(sa.text(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = :s AND table_type = 'BASE TABLE' "
            "ORDER BY table_name"), {"s": SCHEMA}).scalars().all()
        return {n: conn.execute(sa.text(f'SELECT count(*) FROM {SCHEMA}."{n}"')).scalar_one() for n in names}
