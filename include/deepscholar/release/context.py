"""Opening a release, and the context every step of the pipeline gets."""

from __future__ import annotations

import logging
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar import db, rate_limit
from deepscholar.errors import NotFound
from deepscholar.release.spec import ReleaseSpec
from deepscholar.release.window import month_window
from deepscholar.settings import Settings, current_settings

__all__ = ["ReleaseContext", "ReleaseNotPublished", "require_published", "code_version", "open_release"]

log = logging.getLogger("deepscholar.release")


@dataclass(frozen=True)
class ReleaseContext:
    """Everything a step needs: where the data lives, the stored spec of the release, and how this
    process reaches the services (its settings)."""

    engine: Engine
    release_id: str
    spec: ReleaseSpec
    settings: Settings = field(default_factory=current_settings)

    @classmethod
    def load(cls, engine: Engine, release_id: str, settings: Settings | None = None) -> ReleaseContext:
        """The stored spec, with `settings` (default: this process's environment's) for the endpoints."""
        with engine.connect() as conn:
            stored = conn.execute(
                sa.text("SELECT config FROM releases WHERE release_id = :r"), {"r": release_id}
            ).scalar()
        if stored is None:
            raise LookupError(f"release {release_id} has not been opened (run the open step first)")
        # The stored spec decides what the release contains; endpoints come from this run's settings.
        spec = ReleaseSpec.from_dict(stored)
        # Every process working on the month paces its requests through the warehouse (rate_limit).
        rate_limit.use_warehouse(engine)
        return cls(engine, release_id, spec, settings or current_settings())


def code_version() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             cwd=Path(__file__).parent, timeout=5)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def open_release(engine: Engine, month: str, spec: ReleaseSpec, settings: Settings | None = None,
                 reason: str | None = None) -> ReleaseContext:
    """Open the month's release for building and return its context (its `release_id` is the version).

    The month's latest version decides: none yet → version 1 (release id = the month); not published →
    that version carries on as it is (a task retry or a re-build after a failed gate never makes a new
    version); sealed (published) → version n+1 (`2025-06.v2`) with a changelog row saying why (`reason`,
    else "rebuild requested"), because published rows never change in place. `settings` (default: this
    process's) say how the steps reach the services."""
    from deepscholar.release.versions import base_of, latest_version, open_next_version, versions_locked

    base = base_of(month)
    start, end = month_window(base)
    db.init_db(engine)
    row = {"source": "pipeline", "window_start": start, "window_end": end, "config": spec.to_dict(),
           "code_version": code_version(), "error": None}
    with engine.begin() as conn, versions_locked(conn, base):
        latest = latest_version(conn, base)
        if latest is not None and latest.sealed:
            release_id = open_next_version(conn, latest, reason or "rebuild requested", row)
        elif latest is not None and latest.status == "published":
            # Published before seals existed and never sealed (only test fixtures): left as it is.
            release_id = latest.release_id
            log.info("release %s is already published; re-running only fills what is missing", release_id)
        else:
            release_id = latest.release_id if latest else base
            if reason:
                log.info("release %s is not published yet: it carries on (reason %r not recorded)",
                         release_id, reason)
            if latest is not None and latest.status == "failed":
                # A re-build after a failed gate: the sources may have been fixed since, so references
                # that found nothing are looked up again (a plain task retry keeps them).
                retried = conn.execute(sa.text(
                    "UPDATE exemplar_references SET resolution_method = NULL, resolution_error = NULL "
                    "WHERE release_id = :r AND resolution_method = 'unresolved'"), {"r": release_id}).rowcount
                log.info("release %s failed before: re-building, %d unresolved references will be looked up "
                         "again", release_id, retried)
            db.upsert(conn, "releases", [row | {"release_id": release_id, "status": "building"}],
                      key=["release_id"])
    return ReleaseContext.load(engine, release_id, settings=settings)


class ReleaseNotPublished(NotFound):
    """Systems only run on a release that passed its gate."""


def require_published(engine: Engine, release_id: str) -> None:
    with engine.connect() as conn:
        status = conn.execute(sa.text("SELECT status FROM releases WHERE release_id = :r"),
                              {"r": release_id}).scalar()
    if status is None:
        raise ReleaseNotPublished(f"release {release_id} does not exist; run the release DAG for that month first")
    if status != "published":
        raise ReleaseNotPublished(f"release {release_id} is {status}, not published; reports wait for a published "
                                  "release")
