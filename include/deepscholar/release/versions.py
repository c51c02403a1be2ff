"""Versions of a release: published means immutable, so a correction is the next version of the month.

Design notes: docs/MODULE_NOTES.md, `deepscholar.release.versions`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from deepscholar import db
from deepscholar.errors import InvalidInput, UserError
from deepscholar.release.window import VERSION_RE

__all__ = ["ReleaseSealed", "VersionRow", "base_of", "latest_version", "open_next_version", "parse_version",
           "refuse_sealed", "resolve_release", "seal", "version_id", "versions_of"]


log = logging.getLogger("deepscholar.release")

# The trigger's SQLSTATE (integrity_constraint_violation) and the words of its message.
_SEAL_SQLSTATE = "23000"
_SEAL_WORDS = "is published and sealed"


class ReleaseSealed(UserError):
    """A write reached a sealed release: published rows never change in place (CLI: one line, exit 2)."""


@dataclass(frozen=True)
class VersionRow:
    release_id: str
    base_id: str
    version: int
    status: str
    manifest_hash: str | None

    @property
    def sealed(self) -> bool:
        return self.status == "published" and self.manifest_hash is not None


# --------------------------------------------------------------------------------------------- naming


def version_id(base: str, n: int) -> str:
    """The release id of version n of `base`: the base itself for 1, `base.vN` after."""
    if n < 1:
        raise InvalidInput(f"release versions start at 1, got {n} for {base}")
    return base if n == 1 else f"{base}.v{n}"


def parse_version(release_id: str) -> tuple[str, int | None]:
    """(base, n) of a release id; n is None when the id names no version (`2025-06` may be any of them)."""
    match = VERSION_RE.fullmatch(release_id) if isinstance(release_id, str) else None
    if match is None:
        return release_id, None
    n = int(match[2])
    if n < 1:
        raise InvalidInput(f"release {release_id!r}: versions start at 1 (`deepscholar release list` lists them)")
    return match[1], n


def base_of(release_id: str) -> str:
    """The month (or imported dataset) a release id is a version of."""
    return parse_version(release_id)[0]


# ---------------------------------------------------------------------------------------------- reading


def versions_of(conn: sa.Connection, base: str) -> list[VersionRow]:
    """Every version of `base`, oldest first."""
    rows = conn.execute(sa.text(
        "SELECT release_id, base_id, version, status, manifest_hash FROM releases WHERE base_id = :b "
        "ORDER BY version"), {"b": base}).all()
    return [VersionRow(*r) for r in rows]


def latest_version(conn: sa.Connection, base: str) -> VersionRow | None:
    found = versions_of(conn, base)
    return found[-1] if found else None


def resolve_release(conn: sa.Connection, name: str) -> str:
    """The release a reader means by `name`: an explicit `.vN` is that version (`.v1` is the base id); a bare
    month or dataset name is its current version, the latest published one, else (nothing published yet)
    the latest one, else the name itself (nothing built: the caller says so)."""
    base, n = parse_version(name)
    if n is not None:
        return version_id(base, n)
    found = versions_of(conn, name)
    published = [v for v in found if v.status == "published"]
    if published:
        return published[-1].release_id
    return found[-1].release_id if found else name


# ---------------------------------------------------------------------------------------------- writing


@contextmanager
def versions_locked(conn: sa.Connection, base: str) -> Iterator[None]:
    """Serialise whoever opens a version of `base` (two rebuilds at once would both pick n+1)."""
    conn.execute(sa.text("SELECT pg_advisory_xact_lock(hashtext(:k))"), {"k": f"deepscholar_release:{base}"})
    yield


def open_next_version(conn: sa.Connection, previous: VersionRow, reason: str, row: dict[str, Any]) -> str:
    """Insert version n+1 after the sealed `previous` (its releases row from `row`, status building) and its
    changelog row (why, requested when). Returns the new release id. Call under `versions_locked`."""
    if not previous.sealed:
        raise ValueError(f"release {previous.release_id} is not sealed: it is corrected in place, not versioned")
    n = previous.version + 1
    release_id = version_id(previous.base_id, n)
    db.upsert(conn, "releases", [row | {"release_id": release_id, "base_id": previous.base_id, "version": n,
                                        "status": "building"}], key=["release_id"])
    db.upsert(conn, "release_changelog", [{
        "release_id": release_id, "base_id": previous.base_id, "version": n,
        "previous_release": previous.release_id, "reason": reason}], key=["release_id"], update=[])
    log.info("release %s is sealed: opened %s (%s)", previous.release_id, release_id, reason)
    return release_id


_MANIFEST_SQL = """
    jsonb_build_object(
        'n_queries', (SELECT count(*) FROM release_queries q WHERE q.release_id = r.release_id),
        'n_references', (SELECT count(*) FROM exemplar_references e WHERE e.release_id = r.release_id),
        'n_nuggets', (SELECT count(*) FROM nuggets n WHERE n.release_id = r.release_id),
        'query_digests', (SELECT coalesce(jsonb_object_agg(d.arxiv_id, d.digest), CAST('{}' AS jsonb))
                            FROM deepscholar.release_query_digests(r.release_id) d))"""


def manifest_hash(conn: sa.Connection, release_id: str) -> str:
    """The hash the release's rows have now (what sealing would store)."""
    return conn.execute(sa.text("SELECT deepscholar.release_manifest_hash(:r)"), {"r": release_id}).scalar_one()


def seal(conn: sa.Connection, release_id: str) -> dict[str, Any]:
    """Publish and seal the release in one UPDATE (status, published_at, manifest hash and manifest), then
    write what changed into its changelog row (versions >= 2). Returns published_at, manifest_hash and,
    for a version, `changes` (the changelog's one line)."""
    row = conn.execute(sa.text(
        "UPDATE releases r SET status = 'published', published_at = coalesce(r.published_at, now()), "
        "updated_at = now(), manifest_hash = deepscholar.release_manifest_hash(r.release_id), "
        f"manifest = {_MANIFEST_SQL} WHERE r.release_id = :r "
        "RETURNING r.published_at, r.manifest_hash, r.manifest"), {"r": release_id}).mappings().one()
    out = {"published_at": row["published_at"], "manifest_hash": row["manifest_hash"]}
    log_row = conn.execute(sa.text(
        "SELECT c.previous_release, p.manifest_hash, p.manifest FROM release_changelog c "
        "JOIN releases p ON p.release_id = c.previous_release WHERE c.release_id = :r"),
        {"r": release_id}).first()
    if log_row is not None:
        changes, details = describe_changes(log_row[0], log_row[1], log_row[2], row["manifest_hash"],
                                            row["manifest"])
        conn.execute(sa.text(
            "UPDATE release_changelog SET changes = :c, details = CAST(:d AS jsonb), published_at = :p "
            "WHERE release_id = :r"),
            {"c": changes, "d": json.dumps(details), "p": row["published_at"], "r": release_id})
        out["changes"] = changes
    return out


def describe_changes(previous_release: str, previous_hash: str | None, previous_manifest: dict | None,
                     new_hash: str, new_manifest: dict) -> tuple[str, dict[str, list[str]]]:
    """The changelog's one line and its lists: queries added, removed and changed against the version before."""
    old = (previous_manifest or {}).get("query_digests") or {}
    new = new_manifest.get("query_digests") or {}
    details = {"added": sorted(set(new) - set(old)), "removed": sorted(set(old) - set(new)),
               "changed": sorted(a for a in set(old) & set(new) if old[a] != new[a])}
    parts = [f"{len(details['added'])} queries added", f"{len(details['removed'])} removed",
             f"{len(details['changed'])} changed (text, references or nuggets differ)"]
    same = " (same rows)" if previous_hash == new_hash else ""
    line = (f"{', '.join(parts)} vs {previous_release}; manifest {(previous_hash or 'none')[:12]} -> "
            f"{new_hash[:12]}{same}")
    return line, details


# ------------------------------------------------------------------------------------------------ errors


def is_seal_violation(exc: BaseException) -> bool:
    """Whether a database error is the seal trigger refusing a write."""
    orig = getattr(exc, "orig", exc)
    code = getattr(orig, "pgcode", None) or getattr(orig, "sqlstate", None)  # psycopg2, psycopg 3
    return code == _SEAL_SQLSTATE and _SEAL_WORDS in str(orig)


@contextmanager
def refuse_sealed(release_id: str) -> Iterator[None]:
    """Turn the seal trigger's IntegrityError into a `ReleaseSealed` that names the release and the way out."""
    try:
        yield
    except sa.exc.DBAPIError as exc:
        if not is_seal_violation(exc):
            raise
        message = str(exc.orig).strip().splitlines()[0]
        raise ReleaseSealed(
            f"{message}. Release {release_id} is published: a correction is a new version of the month "
            f"(`deepscholar release build {base_of(release_id)} --reason \"...\"`, or the release DAG with "
            f"{{\"month\": \"{base_of(release_id)}\", \"reason\": \"...\"}})") from exc
