"""The test warehouse's clean start, shared by the per-test `engine` fixture and module-scoped seeds, and
the throwaway warehouse that the session fixture and the bench scripts (bench/*.py) create and remove."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import tempfile
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Engine

# Bookkeeping of the migration tool, not data: emptying it would make the next init_db re-run everything.
MIGRATION_TABLES = ("schema_files", "alembic_version")
# The local PostgreSQL server (as on CI) that throwaway databases are created on when it answers.
SERVER_ADMIN_URL = os.environ.get("DEEPSCHOLAR_TEST_ADMIN_URL", "postgresql+psycopg2://postgres@127.0.0.1:5432/postgres")


def empty_warehouse(engine: Engine) -> Engine:
    """Empty every data table of the deepscholar schema (the schema itself stays at its revision).

    One query finds the tables holding rows, and only those are emptied: with DELETE, as a replica session, so
    neither the foreign keys' nor the sealed releases' triggers fire (TRUNCATE skips them too). TRUNCATE ...
    CASCADE of every table writes a new file for each of 66 tables and their indexes: 88 ms a test on 2 cores,
    where most of the 468 tests that ask for an empty warehouse fill a few tables. A role that is not a
    superuser may not act as a replica: it truncates every table as before."""
    with engine.begin() as conn:
        names = conn.execute(sa.text(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'deepscholar' "
            "AND table_type = 'BASE TABLE' AND NOT (table_name = ANY(:keep))"),
            {"keep": list(MIGRATION_TABLES)}).scalars().all()
        if not names:
            return engine
        if not conn.execute(sa.text("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")).scalar():
            conn.execute(sa.text("TRUNCATE " + ", ".join(f'deepscholar."{n}"' for n in names) + " CASCADE"))
            return engine
        probe = " UNION ALL ".join(f"SELECT '{n}' WHERE EXISTS (SELECT 1 FROM deepscholar.\"{n}\")" for n in names)
        holding = conn.execute(sa.text(probe)).scalars().all()
        conn.execute(sa.text("SET LOCAL session_replication_role = replica"))
        for name in holding:
            conn.execute(sa.text(f'DELETE FROM deepscholar."{name}"'))
    return engine


def one_query_release(conn, release_id: str, arxiv_id: str) -> None:
    """A published release with one minimal query, for tests about what hangs off a query."""
    from deepscholar import db

    db.upsert(conn, "releases", [{"release_id": release_id, "status": "published"}], key=["release_id"])
    db.upsert(conn, "release_queries", [{
        "release_id": release_id, "arxiv_id": arxiv_id, "title": "Q", "abstract": "A", "section_raw_latex": "x",
        "section_text": "x", "word_count": 1}], key=["release_id", "arxiv_id"])


def server_answers(admin_url: str = SERVER_ADMIN_URL) -> bool:
    """Whether the local server takes connections (a closed port fails fast, without a driver timeout)."""
    url = sa.engine.make_url(admin_url)
    try:
        with socket.create_connection((url.host or "127.0.0.1", url.port or 5432), timeout=0.5):
            pass
    except OSError:
        return False
    try:
        engine = sa.create_engine(admin_url, connect_args={"connect_timeout": 2})
        with engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
        engine.dispose()
        return True
    except Exception:
        return False


@contextlib.contextmanager
def environment(**values: str | None) -> Iterator[None]:
    """Set (a str) or remove (None) environment variables for the block; the previous values come back."""
    before = {name: os.environ.get(name) for name in values}
    try:
        for name, value in values.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def throwaway_warehouse(prefix: str = "deepscholar_tmp_", *, database: str = "embedded", set_home: bool = True,
                        keep_home: bool = False, revision: str | None = None) -> Iterator[tuple[Engine, Path]]:
    """A fresh home directory and an empty warehouse with the schema applied, gone afterwards: (engine, home).

    database: "embedded" (the project's embedded PostgreSQL under home/pgdata, stopped afterwards),
    "server" (a new database on SERVER_ADMIN_URL's server, dropped afterwards), "auto" (server when it
    answers, else embedded) or a PostgreSQL URL (used as it is and left in place).
    set_home: inside the block DEEPSCHOLAR_HOME is the new home and DEEPSCHOLAR_DB_URL is unset, so
    `db.get_engine()`, the CLI and subprocesses find this warehouse; both come back afterwards.
    keep_home: leave the home directory (snapshots, logs) on disk; otherwise it is removed.
    revision: the schema at that migration revision instead of the head (bench/history.py times the upgrade).
    """
    from deepscholar import db

    home = Path(tempfile.mkdtemp(prefix=prefix))
    env = environment(DEEPSCHOLAR_HOME=str(home), DEEPSCHOLAR_DB_URL=None) if set_home else contextlib.nullcontext()
    created = None
    embedded = False
    engine = None
    try:
        with env:
            if database == "auto":
                database = "server" if server_answers() else "embedded"
            if database == "server":
                created = f"{prefix.strip('_')}_{uuid.uuid4().hex[:8]}".lower()
                admin = sa.create_engine(SERVER_ADMIN_URL, isolation_level="AUTOCOMMIT")
                with admin.connect() as conn:
                    conn.execute(sa.text(f'CREATE DATABASE "{created}"'))
                admin.dispose()
                url = sa.engine.make_url(SERVER_ADMIN_URL).set(database=created).render_as_string(
                    hide_password=False)
            elif database == "embedded":
                embedded = True
                url = db.embedded_server_uri(home)
            elif database.startswith("postgres"):
                url = database
            else:
                raise ValueError(f"database: 'embedded', 'server', 'auto' or a PostgreSQL URL, not {database!r}")
            # Keyed by the URL as the engine renders it, so `db.get_engine(str(engine.url))` (what a
            # fixture hands out) is this very engine.
            first = db.get_engine(url)
            engine = db.get_engine(first.url.render_as_string(hide_password=False))
            if engine is not first:
                first.dispose()
            if revision is None:
                db.init_db(engine)
            else:
                from deepscholar import migrations

                migrations.upgrade(engine, revision)
            yield engine, home
    finally:
        if engine is not None:
            engine.dispose()
        if created:
            admin = sa.create_engine(SERVER_ADMIN_URL, isolation_level="AUTOCOMMIT")
            with admin.connect() as conn:
                conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{created}" WITH (FORCE)'))
            admin.dispose()
        if embedded:
            db.stop_embedded_server(home)
        if not keep_home:
            shutil.rmtree(home, ignore_errors=True)


class ConnectionSampler:
    """The server's client connections sampled from pg_stat_activity in a thread (every `interval` s) on one
    connection of its own: the peak in all and per database, to set against max_connections.

    Usage: with ConnectionSampler(url) as sampler: ...; sampler.peak, sampler.peak_by_database
    """

    def __init__(self, url: str, interval: float = 0.25) -> None:
        import threading

        self.url, self.interval = url, interval
        self.peak = 0
        self.peak_by_database: dict[str, int] = {}
        self.samples = 0
        self.max_connections: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="connection-sampler", daemon=True)

    def _run(self) -> None:
        engine = sa.create_engine(self.url, poolclass=sa.pool.NullPool, isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as conn:
                self.max_connections = int(conn.execute(sa.text("SHOW max_connections")).scalar_one())
                while not self._stop.is_set():
                    rows = conn.execute(sa.text(
                        "SELECT coalesce(datname, '?'), count(*) FROM pg_stat_activity "
                        "WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() GROUP BY 1")).all()
                    self.samples += 1
                    self.peak = max(self.peak, sum(n for _, n in rows))
                    for name, n in rows:
                        self.peak_by_database[name] = max(self.peak_by_database.get(name, 0), n)
                    self._stop.wait(self.interval)
        finally:
            engine.dispose()

    def __enter__(self) -> ConnectionSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(10)


def store_board(conn, rows: list[dict], metric_rows: list[dict], metric_names, *, version: int = 1,
                status: str = "published") -> None:
    """Store a board as the roll-up does: its board_versions row, leaderboard_systems (the wide `leaderboard`
    is a view over it) and the means in leaderboard_metrics, all as board version `version`."""
    from deepscholar import db

    boards = sorted({(r["release_id"], r["judge_config"]) for r in rows})
    db.upsert(conn, "board_versions", [
        {"release_id": r, "judge_config": j, "board_version": version, "status": status,
         "published_at": datetime.now(UTC) if status == "published" else None, "n_systems": 0} for r, j in boards],
        key=["release_id", "judge_config", "board_version"])
    key = ["release_id", "judge_config", "board_version", "system_id"]
    db.upsert(conn, "leaderboard_systems", [{k: v for k, v in r.items() if k not in metric_names}
                                            | {"board_version": version} for r in rows], key=key)
    db.upsert(conn, "leaderboard_metrics", [m | {"board_version": version} for m in metric_rows], key=[*key, "metric"])
