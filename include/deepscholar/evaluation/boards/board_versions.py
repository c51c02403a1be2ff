"""Board versions: a published board never changes; a different result is the next version.

Design notes: docs/MODULE_NOTES.md, `deepscholar.evaluation.boards.board_versions`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar import db
from deepscholar.errors import NotFound

__all__ = ["BOARD_TABLES", "BoardTarget", "Provenance", "board_target", "describe_changes", "list_versions",
           "current_version", "latest_version", "provenance_of", "publish_board", "record_version"]

# Every table a board version's rows live in, with the columns that are not values (not compared).
BOARD_TABLES = ("leaderboard_systems", "leaderboard_metrics", "track_boards", "track_board_metrics",
                "board_agreement")
_NOT_VALUES = {"board_version", "computed_at"}


@dataclass(frozen=True)
class Provenance:
    """What a board version was computed from."""

    manifest_hash: str | None
    judge: dict
    metric_versions: dict
    system_builds: dict

    def as_row(self) -> dict:
        return {"manifest_hash": self.manifest_hash, "judge": self.judge, "metric_versions": self.metric_versions,
                "system_builds": self.system_builds}


@dataclass(frozen=True)
class BoardTarget:
    """Where a roll-up writes: `version`, and whether there is anything to write at all."""

    version: int
    new: bool  # a version opened by this roll-up
    unchanged: bool  # the latest version is published and this roll-up's result is the same: write nothing
    changes: str | None


def provenance_of(conn: sa.Connection, release_id: str, judge_config: str,
                  metric_rows: Sequence[Mapping]) -> Provenance:
    """The release's manifest hash, the judge's settings and the systems' builds (defined once, in SQL:
    migration 0017), and the metric versions the board's per-metric rows were computed from."""
    manifest, judge, builds = conn.execute(sa.text(
        "SELECT (SELECT manifest_hash FROM releases WHERE release_id = :r), board_judge(:j), "
        "board_system_builds(:r)"), {"r": release_id, "j": judge_config}).one()
    versions: dict[str, set[str]] = {}
    for row in metric_rows:
        if row.get("metric_version"):
            versions.setdefault(row["metric"], set()).update(row["metric_version"].split(","))
    return Provenance(manifest, judge or {}, {m: ",".join(sorted(v)) for m, v in sorted(versions.items())},
                      builds or {})


def _canonical(rows: Sequence[Mapping], columns: Sequence[str]) -> list[str]:
    keep = [c for c in columns if c not in _NOT_VALUES]
    return sorted(json.dumps({c: r.get(c) for c in keep}, sort_keys=True, default=str) for r in rows)


def _stored_rows(conn: sa.Connection, release_id: str, judge_config: str, version: int) -> dict[str, list[dict]]:
    return {t: [dict(r) for r in conn.execute(sa.text(
        f"SELECT * FROM {t} WHERE release_id = :r AND judge_config = :j AND board_version = :v"),
        {"r": release_id, "j": judge_config, "v": version}).mappings()] for t in BOARD_TABLES}


def _same_rows(conn: sa.Connection, stored: Mapping[str, list[dict]], computed: Mapping[str, Sequence[dict]]) -> bool:
    for table in BOARD_TABLES:
        columns = list(db.table(conn, table).c.keys())
        if _canonical(stored[table], columns) != _canonical(computed.get(table, ()), columns):
            return False
    return True


def _version_row(conn: sa.Connection, release_id: str, judge_config: str, version: int | None = None,
                 status: str | None = None) -> dict | None:
    row = conn.execute(sa.text("""
        SELECT * FROM board_versions
        WHERE release_id = :r AND judge_config = :j AND (CAST(:v AS integer) IS NULL OR board_version = :v)
          AND (CAST(:s AS text) IS NULL OR status = :s)
        ORDER BY board_version DESC LIMIT 1"""), {"r": release_id, "j": judge_config, "v": version,
                                                 "s": status}).mappings().first()
    return None if row is None else dict(row)


def _ranks(rows: Sequence[Mapping]) -> dict[str, int | None]:
    return {r["system_id"]: r["rank"] for r in rows}


def _unranked(rows: Sequence[Mapping]) -> set[str]:
    return {r["system_id"] for r in rows if r.get("contamination") == "may_have_seen"}


def describe_changes(old: Mapping, new: Provenance, old_rows: Sequence[Mapping], new_rows: Sequence[Mapping],
                     old_version: int) -> str:
    """One line: how a board differs from version `old_version` (`old`: its board_versions row; the rows:
    the two versions' core board rows)."""
    old_ranks, new_ranks = _ranks(old_rows), _ranks(new_rows)
    parts: list[str] = []
    if old.get("manifest_hash") != new.manifest_hash and old.get("manifest_hash") and new.manifest_hash:
        parts.append(f"release manifest {old['manifest_hash'][:12]} → {new.manifest_hash[:12]}")
    if (old.get("judge") or {}) != new.judge:
        before, after = old.get("judge") or {}, new.judge
        keys = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        parts.append("judge settings changed (" + ", ".join(keys) + ")")
    before_versions, after_versions = old.get("metric_versions") or {}, new.metric_versions
    moved = [f"{m} {before_versions[m]} → {after_versions[m]}" for m in sorted(after_versions)
             if m in before_versions and before_versions[m] != after_versions[m]]
    if moved:
        parts.append("metric versions " + ", ".join(moved))
    before_builds, after_builds = old.get("system_builds") or {}, new.system_builds
    rebuilt = [s for s in sorted(after_builds) if s in before_builds and before_builds[s] != after_builds[s]]
    if rebuilt:
        parts.append("new builds of " + ", ".join(rebuilt))
    added = sorted(set(new_ranks) - set(old_ranks))
    removed = sorted(set(old_ranks) - set(new_ranks))
    if added:
        parts.append("systems added: " + ", ".join(added))
    if removed:
        parts.append("systems removed: " + ", ".join(removed))
    now_unranked = sorted((_unranked(new_rows) - _unranked(old_rows)) & set(old_ranks))
    if now_unranked:
        parts.append("not ranked now (may have seen these papers): " + ", ".join(now_unranked))
    ranked_again = sorted((_unranked(old_rows) - _unranked(new_rows)) & set(new_ranks))
    if ranked_again:
        parts.append("ranked again (knowledge cutoff before the month): " + ", ".join(ranked_again))

    def shown(rank: int | None) -> str:
        return "–" if rank is None else str(rank)

    moves = [f"{s} {shown(old_ranks[s])}→{shown(new_ranks[s])}"
             for s in sorted(set(old_ranks) & set(new_ranks), key=lambda s: (new_ranks[s] is None, new_ranks[s] or 0, s))
             if old_ranks[s] != new_ranks[s] and old_ranks[s] is not None and new_ranks[s] is not None]
    if moves:
        parts.append("ranks " + ", ".join(moves))
    if not parts:
        parts.append("scores changed (same systems, builds, metric versions and judge)")
    return f"vs v{old_version}: " + "; ".join(parts)


def board_target(conn: sa.Connection, release_id: str, judge_config: str, computed: Mapping[str, Sequence[dict]],
                 provenance: Provenance) -> BoardTarget:
    """Which version this roll-up writes (call under the roll-up's lock, in its transaction).

    No version yet: 1. The latest is a draft: that one, in place. The latest is published: nothing when
    this result is the same board (rows and provenance), else the next version.
    """
    latest = _version_row(conn, release_id, judge_config)
    if latest is None:
        return BoardTarget(1, True, False, None)
    version = latest["board_version"]
    core = computed.get("leaderboard_systems", ())
    if latest["status"] == "draft":
        previous = _version_row(conn, release_id, judge_config, status="published")
        changes = None if previous is None else describe_changes(
            previous, provenance, _stored_rows(conn, release_id, judge_config, previous["board_version"])
            ["leaderboard_systems"], core, previous["board_version"])
        return BoardTarget(version, False, False, changes)
    stored = _stored_rows(conn, release_id, judge_config, version)
    if _same_rows(conn, stored, computed) and Provenance(**{k: latest[k] for k in (
            "manifest_hash", "judge", "metric_versions", "system_builds")}) == provenance:
        return BoardTarget(version, False, True, latest["changes"])
    return BoardTarget(version + 1, True, False, describe_changes(
        latest, provenance, stored["leaderboard_systems"], core, version))


def record_version(conn: sa.Connection, release_id: str, judge_config: str, target: BoardTarget,
                   provenance: Provenance, n_systems: int) -> None:
    """Create or refresh the board_versions row of a draft (a published one is never touched)."""
    row = {"release_id": release_id, "judge_config": judge_config, "board_version": target.version,
           "status": "draft", **provenance.as_row(), "n_systems": n_systems, "changes": target.changes}
    if target.new:
        db.upsert(conn, "board_versions", [row], key=["release_id", "judge_config", "board_version"])
        return
    conn.execute(sa.text("""
        UPDATE board_versions SET manifest_hash = :manifest_hash, judge = CAST(:judge AS jsonb),
               metric_versions = CAST(:metric_versions AS jsonb), system_builds = CAST(:system_builds AS jsonb),
               n_systems = :n_systems, changes = :changes, computed_at = now()
        WHERE release_id = :release_id AND judge_config = :judge_config AND board_version = :board_version
          AND status = 'draft'
          AND (manifest_hash, judge, metric_versions, system_builds, n_systems, changes) IS DISTINCT FROM
              (:manifest_hash, CAST(:judge AS jsonb), CAST(:metric_versions AS jsonb),
               CAST(:system_builds AS jsonb), :n_systems, :changes)"""),
        {**row, **{k: json.dumps(row[k]) for k in ("judge", "metric_versions", "system_builds")}})


def latest_version(conn: sa.Connection, release_id: str, judge_config: str) -> int | None:
    """The newest version, draft or not: what the roll-up just wrote, what the gate checks and publishes."""
    row = _version_row(conn, release_id, judge_config)
    return None if row is None else row["board_version"]


def current_version(conn: sa.Connection, release_id: str, judge_config: str) -> int | None:
    """The version readers see: the latest published one, else the latest draft."""
    return conn.execute(sa.text("SELECT board_version FROM board_current WHERE release_id = :r AND judge_config = :j"),
                        {"r": release_id, "j": judge_config}).scalar()


def publish_board(engine: Engine, release_id: str, judge_config: str) -> dict:
    """Publish the latest version of a board (after its gate); idempotent. Returns its board_versions row."""
    with engine.begin() as conn:
        row = conn.execute(sa.text("""
            UPDATE board_versions SET status = 'published', published_at = now()
            WHERE (release_id, judge_config, board_version) = (
                SELECT release_id, judge_config, max(board_version) FROM board_versions
                WHERE release_id = :r AND judge_config = :j GROUP BY release_id, judge_config)
              AND status = 'draft'
            RETURNING *"""), {"r": release_id, "j": judge_config}).mappings().first()
        found = dict(row) if row is not None else _version_row(conn, release_id, judge_config)
        if found is None:
            raise NotFound(f"no board for release {release_id} under {judge_config} to publish: roll it up first "
                           f"(`deepscholar evaluate --release {release_id}`)")
    return found


def list_versions(engine: Engine, release_id: str, judge_config: str) -> list[dict]:
    """Every version of one board, newest first, with what it was computed from and what changed."""
    with engine.connect() as conn:
        return [dict(r) for r in conn.execute(sa.text("""
            SELECT * FROM leaderboard_board_versions WHERE release_id = :r AND judge_config = :j
            ORDER BY board_version DESC"""), {"r": release_id, "j": judge_config}).mappings()]
