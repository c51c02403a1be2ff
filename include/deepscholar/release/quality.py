"""The Great Expectations gate a release must pass before it is published: a month with broken queries
or labels would mis-score every system, so it stops here, with a summary saying why.

Design notes: docs/MODULE_NOTES.md, `deepscholar.release.quality`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import pandas as pd
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar.db import SCHEMA
from deepscholar.gx import Check, GateResult, import_gx, jsonable, run_checks, short
from deepscholar.release.spec import ReleaseSpec

__all__ = [
    "ARXIV_ID_REGEX",
    "CHECK_NAMES",
    "GateResult",
    "ReleaseNotFound",
    "ReleaseNotGated",
    "apply_gate",
    "load_release_frames",
    "publish_release",
    "run_release_gate",
]

log = logging.getLogger(__name__)

# Version-less ids only: new style (YYMM.NNNN[N]) or old style (archive[.SUBJ]/YYMMNNN).
# Non-capturing groups: pandas warns about match groups in str.contains.
ARXIV_ID_REGEX = r"^(?:\d{4}\.\d{4,5}|[a-z]+(?:-[a-z]+)*(?:\.[A-Z]{2})?/\d{7})$"

CHECK_NAMES = (
    "queries_present",
    "arxiv_id_format",
    "version_is_v1",
    "published_in_window",
    "published_present",
    "venue_present",
    "word_count_in_range",
    "min_references",
    "important_arxiv_reference_per_query",
    "resolution_rate",
    "cited_by_count_non_negative",
    "nuggets_per_query",
    "nugget_importance_label",
    "nugget_text_non_empty",
    "no_duplicate_across_releases",
)

# Enough offending rows to act on without bloating releases.gx_result.


class ReleaseNotFound(LookupError):
    """No releases row with that id."""


class ReleaseNotGated(RuntimeError):
    """Publishing was refused because the release has not passed the gate."""


# ---------------------------------------------------------------------------------------------- frames

_RELEASE_SQL = f"""
SELECT release_id, source, window_start, window_end, config, status, gx_success
FROM {SCHEMA}.releases WHERE release_id = :r
"""

_FRAME_SQL = {
    "queries": f"""
        SELECT arxiv_id, version, published, NULLIF(btrim(venue), '') AS venue, word_count, n_cite_keys
        FROM {SCHEMA}.release_queries WHERE release_id = :r ORDER BY arxiv_id""",
    # LEFT JOINs so a query with no reference (or no nugget) shows up with a zero count.
    "query_references": f"""
        SELECT q.arxiv_id,
               count(e.cite_key) AS n_references,
               count(e.cite_key) FILTER (
                   WHERE e.is_important AND NULLIF(btrim(e.resolved_arxiv_id), '') IS NOT NULL
               ) AS n_important_arxiv
        FROM {SCHEMA}.release_queries q
        LEFT JOIN {SCHEMA}.exemplar_references e ON e.release_id = q.release_id AND e.arxiv_id = q.arxiv_id
        WHERE q.release_id = :r GROUP BY q.arxiv_id ORDER BY q.arxiv_id""",
    "resolution": f"""
        SELECT CAST(:r AS text) AS release_id,
               count(*) AS n_references,
               count(*) FILTER (
                   WHERE NULLIF(btrim(resolved_arxiv_id), '') IS NOT NULL
                      OR NULLIF(btrim(openalex_id), '') IS NOT NULL
               ) AS n_resolved
        FROM {SCHEMA}.exemplar_references WHERE release_id = :r""",
    "references": f"""
        SELECT arxiv_id, cite_key, cited_by_count
        FROM {SCHEMA}.exemplar_references WHERE release_id = :r ORDER BY arxiv_id, cite_key""",
    "query_nuggets": f"""
        SELECT q.arxiv_id, count(n.nugget_idx) AS n_nuggets
        FROM {SCHEMA}.release_queries q
        LEFT JOIN {SCHEMA}.nuggets n ON n.release_id = q.release_id AND n.arxiv_id = q.arxiv_id
        WHERE q.release_id = :r GROUP BY q.arxiv_id ORDER BY q.arxiv_id""",
    "nuggets": f"""
        SELECT arxiv_id, nugget_idx, importance, text
        FROM {SCHEMA}.nuggets WHERE release_id = :r ORDER BY arxiv_id, nugget_idx""",
    # Any other release, whatever its status: a failed one may be fixed, re-gated and published later.
    # Other versions of the same month are not other releases: a correction keeps most of its queries.
    "duplicates": f"""
        SELECT q.arxiv_id,
               count(o.release_id) AS n_other_releases,
               coalesce(string_agg(o.release_id, ',' ORDER BY o.release_id), '') AS other_releases
        FROM {SCHEMA}.release_queries q
        LEFT JOIN ({SCHEMA}.release_queries o JOIN {SCHEMA}.releases orel ON orel.release_id = o.release_id)
               ON o.arxiv_id = q.arxiv_id AND o.release_id <> q.release_id
              AND orel.base_id <> (SELECT base_id FROM {SCHEMA}.releases WHERE release_id = :r)
        WHERE q.release_id = :r GROUP BY q.arxiv_id ORDER BY q.arxiv_id""",
}


def load_release_frames(engine: Engine, release_id: str, tracks: Sequence[str] = ()
                        ) -> tuple[dict[str, Any], dict[str, pd.DataFrame]]:
    """The releases row and every frame the suites validate (the artefact tracks' too), read from one
    consistent snapshot."""
    from deepscholar.release.track_artefacts import track_frames

    with engine.connect().execution_options(isolation_level="REPEATABLE READ") as conn:
        with conn.begin():
            conn.execute(sa.text("SET TRANSACTION READ ONLY"))
            row = conn.execute(sa.text(_RELEASE_SQL), {"r": release_id}).mappings().first()
            if row is None:
                raise ReleaseNotFound(f"release {release_id!r} does not exist")
            frames = {
                name: pd.read_sql(sa.text(sql), conn, params={"r": release_id})
                for name, sql in _FRAME_SQL.items()
            }
            frames |= track_frames(conn, release_id, tracks)
    frames["queries"]["published"] = pd.to_datetime(frames["queries"]["published"], utc=True)
    res = frames["resolution"]
    n = res["n_references"].astype(float)
    # No references at all is a rate of 0, not a vacuous pass (GX skips nulls).
    res["resolution_rate"] = (res["n_resolved"].astype(float) / n.where(n > 0)).fillna(0.0)
    return dict(row), frames


# ---------------------------------------------------------------------------------------------- checks


def _build_checks(gxe, release: dict[str, Any], spec: ReleaseSpec) -> tuple[list[Check], list[dict]]:
    """The expectations for this release, plus checks settled without GX (skipped or not runnable)."""
    checks: list[Check] = []
    settled: list[dict] = []
    pipeline = release["source"] == "pipeline"

    def add(name: str, frame: str, expectation, index_columns=("arxiv_id",)) -> None:
        checks.append(Check(name, frame, expectation, list(index_columns)))

    def skip(name: str, expectation_type: str, reason: str) -> None:
        settled.append({"name": name, "expectation_type": expectation_type, "success": True,
                        "skipped": True, "observed": None, "details": {"skipped": reason}})

    add("queries_present", "queries", gxe.ExpectTableRowCountToBeBetween(min_value=1), [])
    add("arxiv_id_format", "queries", gxe.ExpectColumnValuesToMatchRegex(column="arxiv_id", regex=ARXIV_ID_REGEX))
    add("version_is_v1", "queries", gxe.ExpectColumnValuesToBeInSet(column="version", value_set=[1]))

    between = "expect_column_values_to_be_between"
    if not pipeline:
        skip("published_in_window", between, f"{release['source']} release: its window is descriptive")
    elif release["window_start"] is None or release["window_end"] is None:
        settled.append({"name": "published_in_window", "expectation_type": between, "success": False,
                        "observed": None, "details": {"error": "pipeline release has no window_start/window_end"}})
    else:
        # The window is half-open [start, end): strict_max keeps papers of the next month out.
        add("published_in_window", "queries", gxe.ExpectColumnValuesToBeBetween(
            column="published", min_value=_utc(release["window_start"]), max_value=_utc(release["window_end"]),
            strict_max=True))
        # GX skips nulls in a range check, so a missing date needs its own expectation.
        add("published_present", "queries", gxe.ExpectColumnValuesToNotBeNull(column="published"))

    if pipeline and spec.require_venue:
        add("venue_present", "queries", gxe.ExpectColumnValuesToNotBeNull(column="venue"))
    else:
        skip("venue_present", "expect_column_values_to_not_be_null",
             "official release" if not pipeline else "config.require_venue is false")

    add("word_count_in_range", "queries", gxe.ExpectColumnValuesToBeBetween(
        column="word_count", min_value=1, max_value=spec.max_words))
    add("min_references", "queries", gxe.ExpectColumnValuesToBeBetween(
        column="n_cite_keys", min_value=spec.min_references))
    # METRICS.md: reference coverage is unscored when a query has no important arXiv reference.
    add("important_arxiv_reference_per_query", "query_references", gxe.ExpectColumnValuesToBeBetween(
        column="n_important_arxiv", min_value=1))
    add("resolution_rate", "resolution", gxe.ExpectColumnValuesToBeBetween(
        column="resolution_rate", min_value=spec.min_resolution_rate, max_value=1.0),
        ["release_id", "n_references", "n_resolved"])
    add("cited_by_count_non_negative", "references", gxe.ExpectColumnValuesToBeBetween(
        column="cited_by_count", min_value=0), ["arxiv_id", "cite_key"])
    add("nuggets_per_query", "query_nuggets", gxe.ExpectColumnValuesToBeBetween(column="n_nuggets", min_value=1))
    add("nugget_importance_label", "nuggets", gxe.ExpectColumnValuesToBeInSet(
        column="importance", value_set=["vital", "okay"]), ["arxiv_id", "nugget_idx"])
    add("nugget_text_non_empty", "nuggets", gxe.ExpectColumnValuesToMatchRegex(
        column="text", regex=r"^\s*\S"), ["arxiv_id", "nugget_idx"])
    add("no_duplicate_across_releases", "duplicates", gxe.ExpectColumnValuesToBeBetween(
        column="n_other_releases", min_value=0, max_value=0), ["arxiv_id", "other_releases"])
    return checks, settled


# ------------------------------------------------------------------------------------------------ API


def run_release_gate(engine: Engine, release_id: str, spec: ReleaseSpec | None = None) -> GateResult:
    """Validate a release with GX. Without `spec`, the thresholds the release was built with are used."""
    started = time.perf_counter()
    from deepscholar.release.track_artefacts import artefact_tracks, track_checks

    if spec is None:
        with engine.connect() as conn:
            stored = conn.execute(sa.text(f"SELECT config FROM {SCHEMA}.releases WHERE release_id = :r"),
                                  {"r": release_id}).scalar()
        spec = ReleaseSpec.from_dict(stored or {})
    tracks = artefact_tracks(spec.tracks)
    release, frames = load_release_frames(engine, release_id, tracks)

    gx, gxe = import_gx()
    checks, settled = _build_checks(gxe, release, spec)
    checks += track_checks(gxe, tracks)  # after the core's: CHECK_NAMES order first, the tracks' after
    records = run_checks(gx, checks, frames) + settled
    order = {name: i for i, name in enumerate(CHECK_NAMES)}
    records.sort(key=lambda c: order.get(c["name"], len(order)))
    # The rate itself, not just pass/fail, is what an operator needs to see.
    res = frames["resolution"].iloc[0]
    for rec in records:
        if rec["name"] == "resolution_rate":
            rec["details"].update(n_references=int(res["n_references"]), n_resolved=int(res["n_resolved"]),
                                  rate=float(res["resolution_rate"]), min_rate=spec.min_resolution_rate)

    failed = [c for c in records if not c["success"]]
    n_skipped = sum(1 for c in records if c.get("skipped"))
    n_queries = len(frames["queries"])
    if failed:
        summary = (f"release {release_id}: {len(failed)} of {len(records)} checks failed "
                   f"({', '.join(c['name'] for c in failed)}); {n_queries} queries")
    else:
        summary = (f"release {release_id}: all {len(records) - n_skipped} checks passed"
                   f"{f', {n_skipped} skipped' if n_skipped else ''}; {n_queries} queries")
    for c in failed:
        log.warning("release %s: gate check %s FAILED (%s): observed=%s details=%s", release_id, c["name"],
                    c["expectation_type"], short(c["observed"]), short(c["details"]))
    duration = time.perf_counter() - started
    log.info("%s (%.2f s)", summary, duration)
    return GateResult(
        release_id=release_id, success=not failed, checks=jsonable(records), summary=summary,
        gx_version=gx.__version__, duration_seconds=round(duration, 3),
        ran_at=datetime.now().astimezone().isoformat(), config=spec.to_dict())


def apply_gate(engine: Engine, release_id: str, result: GateResult) -> str:
    """Record a gate result on the release; failure keeps every row so the cause can be inspected.

    A published release is frozen: its status and stored result are left as they are.
    Returns the release's status afterwards.
    """
    if result.release_id != release_id:
        raise ValueError(f"gate result is for {result.release_id!r}, not {release_id!r}")
    with engine.begin() as conn:
        status = conn.execute(sa.text(f"SELECT status FROM {SCHEMA}.releases WHERE release_id = :r FOR UPDATE"),
                              {"r": release_id}).scalar()
        if status is None:
            raise ReleaseNotFound(f"release {release_id!r} does not exist")
        if status == "published":
            log.warning("release %s is already published; gate result not applied (%s)", release_id, result.summary)
            return status
        new_status = "gated" if result.success else "failed"
        conn.execute(sa.text(
            f"UPDATE {SCHEMA}.releases SET gx_success = :ok, gx_result = CAST(:res AS jsonb), status = :st, "
            "error = :err, updated_at = now() WHERE release_id = :r"),
            {"ok": result.success, "res": result.to_json(), "st": new_status,
             "err": None if result.success else result.summary, "r": release_id})
    log.info("release %s: status %s -> %s", release_id, status, new_status)
    return new_status


def publish_release(engine: Engine, release_id: str) -> datetime:
    """Publish and seal a gated release (release/versions.py: the same UPDATE stores its manifest hash, and a
    version >= 2 gets what changed in its changelog); idempotent for one already published. Returns
    published_at."""
    from deepscholar.release.versions import seal

    with engine.begin() as conn:
        row = conn.execute(sa.text(
            f"SELECT status, gx_success, published_at FROM {SCHEMA}.releases WHERE release_id = :r FOR UPDATE"),
            {"r": release_id}).mappings().first()
        if row is None:
            raise ReleaseNotFound(f"release {release_id!r} does not exist")
        if row["status"] == "published" and row["published_at"] is not None:
            return row["published_at"]
        if row["gx_success"] is not True or row["status"] != "gated":
            raise ReleaseNotGated(
                f"release {release_id!r} is not gated (status={row['status']}, gx_success={row['gx_success']}); "
                "run the quality gate first")
        sealed = seal(conn, release_id)
    log.info("release %s published at %s, manifest %s%s", release_id, sealed["published_at"],
             sealed["manifest_hash"][:12], f"; {sealed['changes']}" if "changes" in sealed else "")
    return sealed["published_at"]


# ---------------------------------------------------------------------------------------------- helpers


def _utc(value: datetime) -> datetime:
    ts = pd.Timestamp(value)
    return (ts.tz_convert("UTC") if ts.tzinfo else ts.tz_localize("UTC")).to_pydatetime()
