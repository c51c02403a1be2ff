"""The demo month built through the library (no Airflow): release, offline systems' reports, external import.

Shared by the evaluation tests and bench/evaluation.py, so both judge the reports `make demo` judges.

Building it takes about a minute, and eight test modules and two benches judge it, so a test run builds it
once into a template database on the PostgreSQL server (`demo_template_url`) and each module gets a clone
of its own (`cloned_demo_month`: `CREATE DATABASE ... TEMPLATE`, a file copy on the server, a second or
two). The template's name carries a hash of the code and migrations that build it, so a change to either
builds a new one; an advisory lock on the server makes pytest-xdist's workers (and the bench subprocesses
they start) build it once between them, and a template stays for the next run of the same code.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Engine

MONTH = "2025-06"
TEMPLATE_PREFIX = "deepscholar_demo_month_"
# Templates of other code versions are dropped once this old: no test run lasts that long, so none is in use.
STALE_TEMPLATE_AGE = timedelta(hours=6)
_ROOT = Path(__file__).resolve().parents[2]
# What the template's content follows from: the library (code, migrations, the bundled demo data) and the
# two support modules that drive the build.
_KEYED = (_ROOT / "include" / "deepscholar", Path(__file__), _ROOT / "tests" / "support" / "settings.py")


def build_demo_month(engine: Engine, home: Path, month: str = MONTH) -> dict:
    from deepscholar.demo import DEMO_SYSTEMS, register_demo_systems
    from deepscholar.release.spec import ReleaseSpec
    from deepscholar.release.steps import build_release
    from deepscholar.replay.demo_snapshot import write_demo_snapshot
    from deepscholar.replay.server import ReplayServer
    from deepscholar.systems.generation import generate_release
    from support.settings import replay_settings

    snapshot = home / "snapshot"
    write_demo_snapshot(snapshot, month=month)
    categories = json.loads((snapshot / "manifest.json").read_text())["categories"]
    with ReplayServer(snapshot) as server:
        build_release(engine, month, ReleaseSpec(categories=categories), replay_settings(server))
        register_demo_systems(engine, snapshot, home, month)
        generated = generate_release(engine, month, [name for name, _, _ in DEMO_SYSTEMS])
    return {"month": month, "snapshot": snapshot, "generated": generated}


@functools.cache
def content_key() -> str:
    """sha256 of every file the demo month's build depends on (paths and bytes, caches left out)."""
    digest = hashlib.sha256()
    for root in _KEYED:
        files = sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else [root]
        for path in files:
            if "__pycache__" not in path.parts and path.suffix != ".pyc":
                digest.update(str(path.relative_to(_ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _admin(server_url: str) -> Engine:
    """An engine on the server's `postgres` database, outside the library's pools (CREATE/DROP DATABASE)."""
    url = sa.engine.make_url(server_url).set(database="postgres")
    return sa.create_engine(url, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)


def _stamp(conn, name: str) -> dict | None:
    """The template's record (its COMMENT: when it was started and built, what was generated), or None."""
    row = conn.execute(sa.text(
        "SELECT datistemplate AND NOT datallowconn, shobj_description(oid, 'pg_database') FROM pg_database "
        "WHERE datname = :n"), {"n": name}).first()
    if row is None:
        return None
    return {**json.loads(row[1] or "{}"), "ready": bool(row[0])}


def _comment(conn, name: str, record: dict) -> None:
    text = json.dumps(record, default=str).replace("'", "''")
    conn.execute(sa.text(f"COMMENT ON DATABASE \"{name}\" IS '{text}'"))


def _drop(conn, name: str) -> None:
    conn.execute(sa.text(f'ALTER DATABASE "{name}" WITH IS_TEMPLATE false'))
    conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def _build_template(conn, server_url: str, name: str) -> None:
    """Build the month into a new database `name`, then seal it: a template nobody may connect to, so a clone
    never waits for (or fails on) a connection left open on it."""
    from deepscholar import db

    if _stamp(conn, name) is not None:  # half built by a run that was killed
        _drop(conn, name)
    conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    _comment(conn, name, {"started": datetime.now(UTC)})
    engine = db.get_engine(sa.engine.make_url(server_url).set(database=name).render_as_string(hide_password=False))
    home = Path(tempfile.mkdtemp(prefix="deepscholar_demo_template_"))
    try:
        db.init_db(engine)
        built = build_demo_month(engine, home)
    finally:
        engine.dispose()
        shutil.rmtree(home, ignore_errors=True)
    conn.execute(sa.text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = :n"), {"n": name})
    _comment(conn, name, {"built": datetime.now(UTC), "month": built["month"], "generated": built["generated"]})
    conn.execute(sa.text(f'ALTER DATABASE "{name}" WITH IS_TEMPLATE true ALLOW_CONNECTIONS false'))


def _drop_stale_templates(conn, keep: str) -> None:
    """Templates of other code versions older than STALE_TEMPLATE_AGE (ready or left half built)."""
    names = conn.execute(sa.text("SELECT datname FROM pg_database WHERE datname LIKE :p AND datname <> :k"),
                         {"p": TEMPLATE_PREFIX + "%", "k": keep}).scalars().all()
    for name in names:
        record = _stamp(conn, name) or {}
        since = record.get("built") or record.get("started")
        if since is None or datetime.now(UTC) - datetime.fromisoformat(since) > STALE_TEMPLATE_AGE:
            with contextlib.suppress(sa.exc.DBAPIError):  # another run dropped it first
                _drop(conn, name)


def demo_template_url(server_url: str) -> str:
    """URL of the template database holding the demo month as this code builds it, on `server_url`'s server:
    built now when missing (under an advisory lock: concurrent callers wait for one build), else as it is."""
    name = TEMPLATE_PREFIX + content_key()[:16]
    admin = _admin(server_url)
    try:
        with admin.connect() as conn:
            conn.execute(sa.text("SELECT pg_advisory_lock(hashtext(:n))"), {"n": name})
            try:
                if not (_stamp(conn, name) or {}).get("ready"):
                    _build_template(conn, server_url, name)
                    _drop_stale_templates(conn, name)
            finally:
                conn.execute(sa.text("SELECT pg_advisory_unlock(hashtext(:n))"), {"n": name})
    finally:
        admin.dispose()
    return sa.engine.make_url(server_url).set(database=name).render_as_string(hide_password=False)


@contextlib.contextmanager
def cloned_demo_month(template_url: str, prefix: str = "deepscholar_month_") -> Iterator[dict]:
    """A database of its own cloned from the template (demo_template_url), and the demo snapshot written
    afresh into a new home (the same bytes the template was built from): {"engine", "db_url", "month",
    "snapshot", "home", "generated"}. Both are removed afterwards."""
    from deepscholar import db
    from deepscholar.replay.demo_snapshot import write_demo_snapshot

    template = sa.engine.make_url(template_url)
    name = f"{prefix.strip('_')}_{uuid.uuid4().hex[:8]}".lower()
    admin = _admin(template_url)
    home = Path(tempfile.mkdtemp(prefix=prefix))
    engine = None
    try:
        with admin.connect() as conn:
            record = _stamp(conn, template.database) or {}
            assert record.get("ready"), f"{template.database} is not a finished demo month template: {record}"
            conn.execute(sa.text(f'CREATE DATABASE "{name}" TEMPLATE "{template.database}"'))
        url = template.set(database=name).render_as_string(hide_password=False)
        engine = db.get_engine(url)
        write_demo_snapshot(home / "snapshot", month=record["month"])
        yield {"engine": engine, "db_url": url, "month": record["month"], "snapshot": home / "snapshot",
               "home": home, "generated": record["generated"]}
    finally:
        if engine is not None:
            engine.dispose()
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
        shutil.rmtree(home, ignore_errors=True)


@contextlib.contextmanager
def served_demo_month(template_url: str, prefix: str = "deepscholar_month_") -> Iterator[dict]:
    """The demo month in a clone of its own (cloned_demo_month), with the replay server's OpenAlex reachable
    (DEEPSCHOLAR_OPENALEX_URL) for the cited-by lookups judging makes: {"engine", "db_url", "month", ...}."""
    import pytest

    from deepscholar.replay.server import ReplayServer

    with cloned_demo_month(template_url, prefix) as built, ReplayServer(built["snapshot"]) as server, \
            pytest.MonkeyPatch.context() as mp:
        mp.setenv("DEEPSCHOLAR_OPENALEX_URL", server.openalex_url)
        yield built


def write_unresolvable_snapshot(snapshot: Path, dest: Path, month: str = MONTH) -> Path:
    """A copy of the demo snapshot whose referenced papers vanished from arXiv and OpenAlex: the month's
    own papers are still there, but no reference resolves, so the release fails its quality gate."""
    shutil.copytree(snapshot, dest)
    month_prefix = month[2:4] + month[5:7] + "."
    entries = (dest / "arxiv" / "entries.jsonl").read_text().splitlines()
    (dest / "arxiv" / "entries.jsonl").write_text(
        "\n".join(e for e in entries if json.loads(e)["id"].startswith(month_prefix)) + "\n")
    (dest / "openalex" / "works.jsonl").write_text("")
    return dest
