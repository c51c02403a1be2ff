"""Release-time artefacts of the evaluation tracks: built after the nuggets, gated, and added to a published
month later with `deepscholar release enrich`.

Design notes: docs/MODULE_NOTES.md, `deepscholar.release.track_artefacts`.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from datetime import datetime

import pandas as pd
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar import family_packages
from deepscholar.db import SCHEMA
from deepscholar.errors import InvalidInput, NotFound
from deepscholar.gx import Check, GateResult, import_gx, jsonable, run_checks
from deepscholar.release.track_declaration import TrackArtefacts

__all__ = ["TrackArtefacts", "artefacts", "artefact_tracks", "build_track_artefacts", "check_track_artefacts",
           "enrich_release", "track_frames", "track_checks"]

log = logging.getLogger("deepscholar.release")


def artefacts() -> dict[str, TrackArtefacts]:
    """Every track with release-time artefacts, by track name: the `ARTEFACTS` a module of a family package
    declares (family_packages.py), found rather than listed, so a track's folder is all it takes. Refused
    when two modules declare one track's."""
    found: dict[str, TrackArtefacts] = {}
    for module, declared in family_packages.declarations("ARTEFACTS"):
        if not isinstance(declared, TrackArtefacts):
            raise InvalidInput(f"{module}.ARTEFACTS must be a TrackArtefacts (release/track_declaration.py)")
        if declared.track in found and found[declared.track] is not declared:
            raise InvalidInput(f"two modules declare the release-time artefacts of track {declared.track!r} "
                               f"(the second is {module})")
        found[declared.track] = declared
    return found


def artefact_tracks(tracks: Sequence[str]) -> list[str]:
    """Of these tracks, those with release-time artefacts, in the given order."""
    known = artefacts()
    return [t for t in tracks if t in known]


def _checked_tracks(tracks: Sequence[str]) -> list[str]:
    known = artefacts()
    unknown = [t for t in tracks if t not in known]
    if unknown:
        raise InvalidInput(f"no release-time artefacts for track(s) {', '.join(unknown)}; tracks with "
                           f"artefacts: {', '.join(known)}")
    return list(dict.fromkeys(tracks))


def build_track_artefacts(ctx, track: str) -> dict:
    """Build one track's artefacts for a release (what is missing only) and record who made them."""
    (track,) = _checked_tracks([track])
    spec = artefacts()[track]
    started = time.perf_counter()
    counts = spec.build(ctx)
    with ctx.engine.begin() as conn:
        conn.execute(sa.text(f"""
            INSERT INTO {SCHEMA}.release_track_artefacts (release_id, track, judge_config, prompt_versions, counts)
            VALUES (:r, :t, :j, CAST(:p AS jsonb), CAST(:c AS jsonb))
            ON CONFLICT (release_id, track) DO UPDATE SET
                judge_config = excluded.judge_config, prompt_versions = excluded.prompt_versions,
                counts = excluded.counts, built_at = now()"""),
            {"r": ctx.release_id, "t": track, "j": spec.judge_config(ctx),
             "p": json.dumps(spec.prompt_versions(ctx)), "c": json.dumps(counts)})
    log.info("%s artefacts of %s: %s (%.1f s)", track, ctx.release_id, counts, time.perf_counter() - started)
    return counts


def track_frames(conn: sa.Connection, release_id: str, tracks: Sequence[str]) -> dict[str, pd.DataFrame]:
    """The frames the tracks' checks read, in the caller's (snapshot) transaction."""
    frames = {}
    for track in tracks:
        for name, sql in artefacts()[track].frames.items():
            result = conn.execute(sa.text(sql), {"r": release_id})
            frames[name] = pd.DataFrame(result.all(), columns=list(result.keys()))
    return frames


def track_checks(gxe, tracks: Sequence[str]) -> list[Check]:
    return [c for track in tracks for c in artefacts()[track].checks(gxe)]


def check_track_artefacts(engine: Engine, release_id: str, tracks: Sequence[str]) -> GateResult:
    """GX over the tracks' artefacts alone (the release gate runs the same checks with its own)."""
    tracks = _checked_tracks(tracks)
    started = time.perf_counter()
    with engine.connect().execution_options(isolation_level="REPEATABLE READ") as conn:
        with conn.begin():
            conn.execute(sa.text("SET TRANSACTION READ ONLY"))
            frames = track_frames(conn, release_id, tracks)
    gx, gxe = import_gx()
    records = run_checks(gx, track_checks(gxe, tracks), frames)
    failed = [c["name"] for c in records if not c["success"]]
    summary = (f"release {release_id}, track artefacts {', '.join(tracks)}: "
               + (f"all {len(records)} checks passed" if not failed
                  else f"{len(failed)} of {len(records)} checks failed ({', '.join(failed)})"))
    return GateResult(release_id=release_id, success=not failed, checks=jsonable(records), summary=summary,
                      gx_version=gx.__version__, duration_seconds=round(time.perf_counter() - started, 3),
                      ran_at=datetime.now().astimezone().isoformat(), config={"tracks": tracks})


def record_check(engine: Engine, release_id: str, tracks: Sequence[str], result: GateResult) -> None:
    """Store a check's outcome on each track's release_track_artefacts row."""
    with engine.begin() as conn:
        for track in tracks:
            mine = [c for c in result.checks if c["name"].startswith(f"{track}_")]
            conn.execute(sa.text(f"""
                UPDATE {SCHEMA}.release_track_artefacts
                SET gx_success = :ok, gx_result = CAST(:res AS jsonb), checked_at = now()
                WHERE release_id = :r AND track = :t"""),
                {"ok": all(c["success"] for c in mine), "res": json.dumps(mine), "r": release_id, "t": track})


def enrich_release(ctx, tracks: Sequence[str]) -> dict:
    """Add the tracks' artefacts to an existing (typically published) release and check them.

    Only the tracks' own tables are written (and release_track_artefacts); the release's queries,
    references, nuggets, gate result and status stay as they are, byte for byte. Returns per track its
    counts, and the check's outcome; a failed check leaves the rows for inspection and says which."""
    tracks = _checked_tracks(tracks)
    with ctx.engine.connect() as conn:
        status = conn.execute(sa.text(f"SELECT status FROM {SCHEMA}.releases WHERE release_id = :r"),
                              {"r": ctx.release_id}).scalar()
    if status is None:
        raise NotFound(f"release {ctx.release_id!r} does not exist")
    counts = {track: build_track_artefacts(ctx, track) for track in tracks}
    result = check_track_artefacts(ctx.engine, ctx.release_id, tracks)
    record_check(ctx.engine, ctx.release_id, tracks, result)
    return {"release_id": ctx.release_id, "status": status, "tracks": counts, "gx_success": result.success,
            "summary": result.summary, "failed_checks": result.failed_checks}
