"""The `systems` table: which systems exist, their kind, version, config and whether they are active."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar import db


def add_system(engine: Engine, name: str, kind: str, config: dict | None = None, version: str = "1",
               active: bool = True) -> None:
    """Register or update a system (a plain SQL insert into `systems` works too)."""
    from deepscholar.systems.base import system_kinds

    if kind not in system_kinds():
        raise LookupError(f"unknown system kind {kind!r}; known: {', '.join(sorted(system_kinds()))}")
    with engine.begin() as conn:
        db.upsert(conn, "systems", [{"system_id": name, "kind": kind, "version": version,
                                     "config": config or {}, "active": active}], key=["system_id"])


def set_active(engine: Engine, name: str, active: bool) -> None:
    with engine.begin() as conn:
        n = conn.execute(sa.text("UPDATE systems SET active = :a, updated_at = now() WHERE system_id = :s"),
                         {"a": active, "s": name}).rowcount
    if not n:
        raise LookupError(f"no system {name!r}")


def list_systems(engine: Engine) -> list[dict]:
    with engine.connect() as conn:
        return [dict(r) for r in conn.execute(sa.text(
            "SELECT s.system_id, s.kind, s.version, s.active, s.config, s.registered_at, "
            "(SELECT count(*) FROM reports r WHERE r.system_id = s.system_id AND r.status = 'ok') AS ok_reports "
            "FROM systems s ORDER BY s.system_id")).mappings()]


def get_system(engine: Engine, name: str) -> dict:
    with engine.connect() as conn:
        row = conn.execute(sa.text("SELECT * FROM systems WHERE system_id = :s"), {"s": name}).mappings().first()
    if row is None:
        raise LookupError(f"no system {name!r}; register it with `deepscholar systems add`")
    return dict(row)
