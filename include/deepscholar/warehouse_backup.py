"""Backups of the warehouse that restore: PostgreSQL's own pg_dump / pg_restore, custom format.

What a backup holds: the `deepscholar` schema (every table, view and the migration record
`alembic_version`), nothing of Airflow's metadata. The embedded warehouse and an external one
(DEEPSCHOLAR_DB_URL, the Airflow connection) are backed up alike; the tools are the embedded server's own
(pgserver ships PostgreSQL 16's), else the ones on PATH, so the same dump restores on either.

The schema revision travels inside the dump (the `alembic_version` row) and is read back from it before
anything is touched: a backup made by newer code (a revision this code does not know) is refused in one
line, an older one is restored and then upgraded by the migrations as `db init` would.

The target must be empty: no table holds a row (a fresh warehouse, or one where `db init` only built the
schema). A warehouse with data is refused unless `clean=True` (`--clean`), which drops its whole
`deepscholar` schema first. Restore runs in one transaction: a failure leaves the schema absent, never half
restored (`db init` then rebuilds an empty one).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar import db, migrations
from deepscholar.errors import InvalidInput, NotFound, UserError
from deepscholar.migrations import SCHEMA, VERSION_TABLE

BACKUP_SUFFIX = ".dump"
# What a scheduled backup folder keeps: the newest few. Each backup is whole (every month so far), so older
# ones only guard against a fault that got into the newest; three months of that is enough.
BACKUPS_KEPT = 3


class BackupRefused(UserError):
    """A restore that would lose data or run a schema this code does not know (CLI: one line, exit 2)."""


@dataclass(frozen=True)
class BackupResult:
    path: Path
    revision: str
    bytes: int
    seconds: float


def pg_tool(name: str) -> str:
    """The path of PostgreSQL's `name` (pg_dump, pg_restore): the embedded server's, else the one on PATH."""
    try:
        import pgserver

        bundled = Path(pgserver.__file__).parent / "pginstall" / "bin" / name
        if bundled.exists():
            return str(bundled)
    except ImportError:
        pass
    found = shutil.which(name)
    if not found:
        raise NotFound(f"{name} not found: install PostgreSQL's client tools (or pgserver) to back up the warehouse")
    return found


def libpq_target(engine: Engine) -> tuple[str, dict[str, str] | None]:
    """A libpq connection string for `engine`'s database (the password goes in PGPASSWORD, not argv)."""
    url = engine.url
    parts: dict[str, str | None] = {"dbname": url.database, "user": url.username,
                                    "host": url.host or _query(url.query, "host"), "port": str(url.port or "") or None}
    quote = lambda v: "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"  # noqa: E731
    conninfo = " ".join(f"{k}={quote(v)}" for k, v in parts.items() if v)
    env = {**os.environ, "PGPASSWORD": str(url.password)} if url.password else None
    return conninfo, env


def _query(query: Mapping[str, str | tuple[str, ...]], key: str) -> str | None:
    value = query.get(key)
    return value[0] if isinstance(value, tuple) else value


def _run(argv: list[str], env: dict[str, str] | None, what: str) -> str:
    """Run a PostgreSQL tool; its first error line becomes a one-line failure."""
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
        first = next((ln for ln in lines if "error" in ln.lower()), lines[0] if lines else f"exit {done.returncode}")
        raise UserError(f"{what} failed: {first.strip()}")
    return done.stdout


def current_revision(engine: Engine) -> str:
    """The warehouse's schema revision; refuses one that is not a plain versioned deepscholar warehouse."""
    with engine.connect() as conn:
        state = migrations.inspect_state(conn)
    if state["state"] != "versioned":
        raise BackupRefused(f"the warehouse is {state['state']} ({state['detail'] or 'no schema revision'}): "
                            "run `deepscholar db init` before backing it up")
    return str(state["current"])


def backup(engine: Engine, out: Path) -> BackupResult:
    """Dump the warehouse's schema and rows to `out` (custom format), written whole or not at all."""
    revision = current_revision(engine)
    out = out.expanduser().resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    conninfo, env = libpq_target(engine)
    started = time.perf_counter()
    _run([pg_tool("pg_dump"), "--format=custom", f"--schema={SCHEMA}", "--no-owner", "--no-privileges",
          f"--file={partial}", f"--dbname={conninfo}"], env, "pg_dump")
    partial.replace(out)
    return BackupResult(out, revision, out.stat().st_size, time.perf_counter() - started)


def backup_revision(path: Path) -> str:
    """The schema revision a backup was made at, read from the dump's own `alembic_version` rows."""
    if not path.is_file():
        raise NotFound(f"no backup at {path}")
    listing = _run([pg_tool("pg_restore"), "--list", str(path)], None, f"reading {path}")
    if f"TABLE DATA {SCHEMA} {VERSION_TABLE}" not in listing:
        raise InvalidInput(f"{path} is not a deepscholar warehouse backup (it holds no {SCHEMA}.{VERSION_TABLE})")
    copy = _run([pg_tool("pg_restore"), "--data-only", f"--schema={SCHEMA}", f"--table={VERSION_TABLE}",
                 "--file=-", str(path)], None, f"reading {path}")
    lines = copy.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith(f"COPY {SCHEMA}.{VERSION_TABLE}"))
    rows = lines[start + 1:lines.index("\\.", start)]
    if len(rows) != 1:
        raise InvalidInput(f"{path} records {len(rows)} schema revisions ({', '.join(rows)}); expected one")
    return rows[0].strip()


def check_revision(revision: str, path: Path) -> None:
    """Refuse a backup whose revision this code does not know (made by newer code, or not by ours)."""
    known = migrations.revision_ids()
    if revision in known:
        return
    if revision > known[-1]:
        raise BackupRefused(f"{path} was made at schema revision {revision}, newer than this code's newest "
                            f"({known[-1]}): restore it with the code that made it, or newer")
    raise BackupRefused(f"{path} is at schema revision {revision}, which this code does not know "
                        f"(its newest is {known[-1]})")


def rows_held(engine: Engine) -> dict[str, bool]:
    """{table: whether it holds a row} for every table of the schema but the migration record."""
    with engine.connect() as conn:
        names = conn.execute(sa.text(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = :s AND c.relkind IN ('r', 'p') AND c.relname <> :v ORDER BY 1"),
            {"s": SCHEMA, "v": VERSION_TABLE}).scalars().all()
        return {name: bool(conn.execute(sa.text(f'SELECT EXISTS (SELECT 1 FROM {SCHEMA}."{name}")')).scalar_one())
                for name in names}


def restore(engine: Engine, path: Path, *, clean: bool = False) -> tuple[str, list[str], float]:
    """Restore a backup into `engine`'s warehouse: (the backup's revision, revisions upgraded since, seconds).

    Refused before anything changes: a backup of an unknown (newer) revision, a target holding rows unless
    `clean`. The target's schema is dropped, the dump restored in one transaction, then upgraded to head."""
    path = path.expanduser().resolve()
    revision = backup_revision(path)
    check_revision(revision, path)
    full = sorted(name for name, held in rows_held(engine).items() if held)
    if full and not clean:
        raise BackupRefused(f"the target warehouse holds data ({len(full)} tables with rows: {', '.join(full[:4])}"
                            f"{', ...' if len(full) > 4 else ''}): restore into an empty one, or pass --clean to "
                            "replace everything in it")
    started = time.perf_counter()
    with engine.begin() as conn:
        conn.execute(sa.text(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE"))
    engine.dispose()  # pooled connections may have cached the dropped tables' plans
    conninfo, env = libpq_target(engine)
    _run([pg_tool("pg_restore"), "--exit-on-error", "--single-transaction", "--no-owner", "--no-privileges",
          f"--dbname={conninfo}", str(path)], env, "pg_restore")
    applied = db.init_db(engine)
    return revision, applied, time.perf_counter() - started


def rotate(folder: Path, keep: int = BACKUPS_KEPT) -> list[Path]:
    """Delete all but the newest `keep` backups (by name: they are named by date) in `folder`; returns those
    deleted."""
    backups = sorted(folder.glob(f"warehouse-*{BACKUP_SUFFIX}"))
    gone = backups[:-keep] if keep > 0 else backups
    for old in gone:
        old.unlink()
    return gone


def scheduled_backup(engine: Engine, folder: Path, label: str) -> BackupResult:
    """The monthly DAG's backup after publication: `folder/warehouse-<label>-<UTC time>.dump`, then the
    folder rotated to its newest BACKUPS_KEPT."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    result = backup(engine, folder / f"warehouse-{stamp}-{label}{BACKUP_SUFFIX}")
    rotate(folder)
    return result
