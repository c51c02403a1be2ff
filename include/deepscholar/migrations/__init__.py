"""Schema migrations: Alembic revisions that upgrade a warehouse in place, keeping every row.

Design notes: docs/MODULE_NOTES.md, `deepscholar.migrations`.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar.errors import UserError

log = logging.getLogger(__name__)

# The one schema of the warehouse. Declared here, where it is built, so that `db` (which runs `upgrade`) and
# the migrations do not import each other; `db.SCHEMA` is the same name.
SCHEMA = "deepscholar"
VERSION_TABLE = "alembic_version"
LEGACY_TABLE = "schema_files"  # the pre-Alembic record of applied sql/NNN files; kept, never written
BASELINE = "0001_baseline"
MIGRATIONS_DIR = Path(__file__).resolve().parent
VERSIONS_DIR = MIGRATIONS_DIR / "versions"
# The pre-Alembic init_db took the same lock, so old and new code never migrate at the same time.
LOCK_KEY = "deepscholar_init_db"
_PROBE_SCHEMA = "deepscholar_baseline_probe"
_REVISION_FILE = re.compile(r"^[0-9]{4}_[a-z0-9_]+\.py$")
# Alembic's `context` and `op` are module-level proxies: two threads must not run it at once.
_process_lock = threading.Lock()


class WarehouseStateError(UserError, ValueError):
    """The warehouse is in a state no revision accounts for; the operator must look (CLI: one line, exit 2)."""


def revision_ids(versions_dir: Path = VERSIONS_DIR) -> list[str]:
    """Revision ids in order, from the file names (no Alembic import; the tests check it is the chain)."""
    ids = sorted(p.stem for p in versions_dir.glob("*.py") if _REVISION_FILE.match(p.name))
    if not ids:
        raise FileNotFoundError(f"no migration revisions (NNNN_slug.py) in {versions_dir}")
    return ids


def head_revision() -> str:
    return revision_ids()[-1]


def sql_paths(revision: str, versions_dir: Path = VERSIONS_DIR) -> list[Path]:
    """The SQL a revision runs: versions/<revision>.sql, else every .sql in versions/<revision>/."""
    single = versions_dir / f"{revision}.sql"
    paths = [single] if single.is_file() else sorted((versions_dir / revision).glob("*.sql"))
    if not paths:
        raise FileNotFoundError(f"revision {revision} has no SQL ({single} or {versions_dir / revision}/*.sql)")
    return paths


def sql_checksum(revision: str, versions_dir: Path = VERSIONS_DIR) -> str:
    """sha256 over the names and bytes of a revision's SQL files: what the released-revision test pins."""
    digest = hashlib.sha256()
    for path in sql_paths(revision, versions_dir):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def released_revision_problems(pinned: dict[str, str], versions_dir: Path = VERSIONS_DIR) -> list[str]:
    """Why the revisions on disk disagree with the pinned checksums of released ones (empty: they agree)."""
    problems = []
    on_disk = revision_ids(versions_dir)
    for revision, expected in pinned.items():
        if revision not in on_disk:
            problems.append(f"released revision {revision} was removed; warehouses record it, restore it")
        elif (actual := sql_checksum(revision, versions_dir)) != expected:
            problems.append(
                f"released revision {revision} was edited (SQL sha256 {actual}, released as {expected}). "
                "Warehouses that already ran it would never see the edit: restore it and add a new "
                "revision instead (see deepscholar/migrations/__init__.py)")
    for revision in on_disk:
        if revision not in pinned:
            problems.append(f"revision {revision} has no pinned checksum: pin {sql_checksum(revision, versions_dir)} "
                            "for it once it is final (it must not change after that)")
    return problems


def run_sql(revision: str, conn: sa.Connection | None = None) -> None:
    """Run a revision's SQL files on the migration's connection (what a revision's upgrade() calls)."""
    if conn is None:
        from alembic import op

        conn = op.get_bind()
    for path in sql_paths(revision):
        # The driver's own execute: the files hold `::` casts and colons that text() would take as binds.
        conn.exec_driver_sql(path.read_text())


def _regclass(conn: sa.Connection, name: str) -> bool:
    return conn.execute(sa.text("SELECT to_regclass(:n) IS NOT NULL"), {"n": f"{SCHEMA}.{name}"}).scalar_one()


def inspect_state(conn: sa.Connection) -> dict:
    """What the warehouse is: fresh, legacy (pre-Alembic), versioned, or unknown (with why)."""
    current: list[str] = []
    if has_version_table := _regclass(conn, VERSION_TABLE):
        current = list(conn.execute(sa.text(f"SELECT version_num FROM {SCHEMA}.{VERSION_TABLE}")).scalars())
    objects = conn.execute(sa.text(
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = :s AND c.relkind IN ('r', 'p', 'v', 'm', 'f') AND c.relname <> ALL(:skip) "
        "ORDER BY c.relname"), {"s": SCHEMA, "skip": [VERSION_TABLE, LEGACY_TABLE]}).scalars().all()
    state = {"state": "fresh", "current": None, "detail": ""}
    known = revision_ids()
    if current:
        state.update(state="versioned", current=current[0])
        if len(current) > 1 or current[0] not in known:
            state.update(state="unknown", current=", ".join(current), detail=(
                f"the warehouse is at revision {', '.join(current)}, which this code does not know "
                f"(its newest is {known[-1]}): run newer code against it, do not downgrade it"))
    elif has_version_table and objects:
        state["state"], state["detail"] = "unknown", (
            f"{SCHEMA}.{VERSION_TABLE} is empty but the schema holds {len(objects)} tables/views "
            f"({', '.join(objects[:5])}...): no revision is recorded, refusing to guess which ran")
    elif _regclass(conn, LEGACY_TABLE):
        files = conn.execute(sa.text(f"SELECT filename FROM {SCHEMA}.{LEGACY_TABLE} ORDER BY 1")).scalars().all()
        state["state"], state["detail"] = "legacy", (
            f"built before migrations (schema_files: {', '.join(files) or 'empty'}); "
            f"`deepscholar db init` adopts it at {BASELINE} and upgrades it")
    elif objects:
        state["state"], state["detail"] = "unknown", (
            f"schema {SCHEMA} holds {len(objects)} tables/views ({', '.join(objects[:5])}...) but neither "
            f"{VERSION_TABLE} nor {LEGACY_TABLE}: not built by deepscholar, refusing to guess its revision")
    return state


def _columns(conn: sa.Connection, schema: str) -> dict[str, dict[str, tuple]]:
    rows = conn.execute(sa.text(
        "SELECT c.table_name, c.column_name, c.data_type, c.udt_name, c.is_nullable "
        "FROM information_schema.columns c JOIN information_schema.tables t "
        "  ON t.table_schema = c.table_schema AND t.table_name = c.table_name "
        "WHERE c.table_schema = :s AND t.table_type = 'BASE TABLE'"), {"s": schema}).all()
    out: dict[str, dict[str, tuple]] = {}
    for table, column, *kind in rows:
        out.setdefault(table, {})[column] = tuple(kind)
    return out


def _baseline_differences(conn: sa.Connection) -> list[str]:
    """Columns where the warehouse differs from a fresh baseline, built in a probe schema and rolled back."""
    probe = conn.begin_nested()
    try:
        for path in sql_paths(BASELINE):
            # The baseline files always name the schema (`deepscholar.x`), so renaming it builds a copy.
            conn.exec_driver_sql(re.sub(rf"\b{SCHEMA}(?=[.;])", _PROBE_SCHEMA, path.read_text()))
        expected = _columns(conn, _PROBE_SCHEMA)
    finally:
        probe.rollback()
    actual = _columns(conn, SCHEMA)
    problems = []
    for table, columns in sorted(expected.items()):
        have = actual.get(table, {})
        for column, kind in columns.items():
            if column not in have:
                problems.append(f"{table}.{column} is missing")
            elif have[column] != kind:
                problems.append(f"{table}.{column} is {have[column]}, the baseline has {kind}")
        problems += [f"{table}.{column} is not in the baseline" for column in sorted(set(have) - set(columns))]
    return problems


def _adopt_legacy(conn: sa.Connection) -> None:
    """Bring a pre-Alembic warehouse to the baseline exactly as its code would have, then verify it."""
    baseline = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sql_paths(BASELINE)}
    recorded: dict[str, str] = dict(
        conn.execute(sa.text(f"SELECT filename, sha256 FROM {SCHEMA}.{LEGACY_TABLE}")).all())
    unknown = sorted(set(recorded) - set(baseline))
    if unknown:
        raise WarehouseStateError(
            f"{SCHEMA}.{LEGACY_TABLE} records {', '.join(unknown)}, which no released schema file has: "
            "unknown state, refusing to guess. Compare the warehouse with the baseline by hand.")
    changed = sorted(name for name, digest in recorded.items() if digest != baseline[name])
    if changed:
        log.warning("schema_files: %s were applied from other versions; verifying column by column", changed)
    run_sql(BASELINE, conn)  # what the old init_db did: the files are idempotent
    problems = _baseline_differences(conn)
    if problems:
        raise WarehouseStateError(
            f"this pre-migration warehouse differs from {BASELINE} ({len(problems)}): "
            + "; ".join(problems[:15]) + ". Refusing to guess: fix those columns by hand (or restore a "
            "backup), then run `deepscholar db init` again.")
    log.info("adopted a pre-migration warehouse at %s", BASELINE)


def _alembic_config(conn: sa.Connection, applied: list[str]):
    from alembic.config import Config

    cfg = Config()  # no alembic.ini: everything is set here
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR).replace("%", "%%"))
    cfg.attributes.update(connection=conn, applied=applied)
    return cfg


def run_environment(context) -> None:
    """Body of env.py: run the revisions on the connection `upgrade` handed over, in its transaction."""
    if context.is_offline_mode():
        raise NotImplementedError("offline (--sql) migrations are not supported: run `deepscholar db init`")
    conn = context.config.attributes.get("connection")
    if conn is None:
        raise RuntimeError("run migrations with `deepscholar db init` (deepscholar.migrations.upgrade), "
                           "which takes the lock and adopts pre-migration warehouses")
    applied = context.config.attributes.setdefault("applied", [])

    def record(ctx, step, heads, run_args) -> None:
        applied.extend(step.up_revision_ids)

    context.configure(connection=conn, version_table=VERSION_TABLE, version_table_schema=SCHEMA,
                      transactional_ddl=True, on_version_apply=record)
    with context.begin_transaction():  # a no-op here: the caller's transaction already holds the lock
        context.run_migrations()


def _current_quick(engine: Engine) -> list[str] | None:
    try:
        with engine.connect() as conn:
            return list(conn.execute(sa.text(f"SELECT version_num FROM {SCHEMA}.{VERSION_TABLE}")).scalars())
    except sa.exc.ProgrammingError:  # no version table yet
        return None


def upgrade(engine: Engine, target: str = "head") -> list[str]:
    """Upgrade the warehouse to `target` (the head); returns the revision ids applied (empty at head).

    At head this is one SELECT (init_db runs at the start of most commands and tasks). Otherwise one
    transaction under an advisory lock: concurrent callers wait, then find nothing left to do.
    """
    if target != "head" and target not in revision_ids():
        raise ValueError(f"unknown revision {target!r}; known: {', '.join(revision_ids())}")
    head = head_revision() if target == "head" else target
    if _current_quick(engine) == [head]:
        return []
    applied: list[str] = []
    with _process_lock, engine.begin() as conn:
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(hashtext(:k))"), {"k": LOCK_KEY})
        conn.execute(sa.text(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}"))
        state = inspect_state(conn)
        if state["state"] == "unknown":
            raise WarehouseStateError(state["detail"])
        if state["current"] == head:
            return []
        from alembic import command

        cfg = _alembic_config(conn, applied)
        if state["state"] == "legacy":
            _adopt_legacy(conn)
            command.stamp(cfg, BASELINE)
        command.upgrade(cfg, target)
    if applied:
        log.info("warehouse upgraded: %s", ", ".join(applied))
    return applied


def status(engine: Engine) -> dict:
    """Current revision, head and pending revisions, read-only (never creates anything)."""
    with engine.connect() as conn:
        state = inspect_state(conn)
    ordered = revision_ids()
    if state["state"] == "versioned":
        pending = ordered[ordered.index(state["current"]) + 1:]
    elif state["state"] in ("fresh", "legacy"):
        pending = ordered
    else:
        pending = []
    return {**state, "head": ordered[-1], "pending": pending}
