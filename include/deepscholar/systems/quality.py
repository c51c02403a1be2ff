"""Great Expectations check on a month's reports, run after generation and before judging.

Design notes: docs/MODULE_NOTES.md, `deepscholar.systems.quality`.
"""

from __future__ import annotations

import logging
import time

import pandas as pd
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar.gx import Check, GateResult, import_gx, run_checks

log = logging.getLogger("deepscholar.generation")

# Reports whose citations are someone else's choice: an external system's, or the paper authors' own
# (a human section may cite concurrent work dated after the paper). Their leaks are flagged, not gated.
NOT_OURS = ("external", "human_exemplar")
UNKNOWN_BUILD = "(unknown: stored before builds were recorded)"
_COLUMNS = ["system_id", "arxiv_id", "kind", "text_length", "n_unresolved_citations", "n_leaked_sources",
            "system_build", "import_format", "imported"]


def load_report_frames(engine: Engine, release_id: str) -> dict[str, pd.DataFrame]:
    with engine.connect() as conn:
        rows = conn.execute(sa.text("""
            SELECT r.system_id, r.arxiv_id, s.kind, length(coalesce(r.text, '')) AS text_length,
                   r.n_unresolved_citations, r.n_leaked_sources, r.system_build,
                   r.system_build_detail->'import'->>'format' AS import_format,
                   s.kind = 'external' AND coalesce(s.config->>'endpoint', '') = '' AS imported
            FROM reports r JOIN systems s USING (system_id)
            WHERE r.release_id = :r AND r.status = 'ok'"""), {"r": release_id}).mappings().all()
    ok = pd.DataFrame([dict(r) for r in rows], columns=_COLUMNS)
    return {"ok_reports": ok, "own_reports": ok[~ok["kind"].isin(NOT_OURS)].reset_index(drop=True),
            "system_builds": builds_per_system(ok)}


def n_builds(group: pd.DataFrame) -> int:
    """How many builds a system's reports mix: distinct builds per reader (an import format; one for
    systems we run), at most, plus one when reports with an unknown build (NULL) sit beside them."""
    known = group[group["system_build"].notna()]
    per_reader = known.groupby(known["import_format"].fillna(""))["system_build"].nunique()
    return (int(per_reader.max()) if len(per_reader) else 0) + int(bool(group["system_build"].isna().any()))


def builds_per_system(ok: pd.DataFrame) -> pd.DataFrame:
    """One row per system: how many builds its ok reports mix (n_builds) and which builds they carry."""
    rows = []
    for system_id, group in ok.groupby("system_id", sort=True):
        counts = group["system_build"].astype(object).where(group["system_build"].notna(), UNKNOWN_BUILD)
        by_build = counts.value_counts()
        rows.append({"system_id": system_id, "n_builds": n_builds(group), "n_reports": len(group),
                     "imported": bool(group["imported"].any()),
                     "builds": "; ".join(f"{build} ({n} reports)" for build, n in sorted(by_build.items()))})
    return pd.DataFrame(rows, columns=["system_id", "n_builds", "n_reports", "imported", "builds"])


def mixed_builds_message(builds: pd.DataFrame, release_id: str) -> str:
    """What the operator reads when systems mixed builds: each system, its builds, and what to do."""
    mixed = builds[builds["n_builds"] > 1]
    lines = []
    for row in mixed.itertuples():
        fix = (f"re-import all of its outputs for {release_id} with `deepscholar reports import {row.system_id} "
               f"PATH --release {release_id}`" if row.imported else
               f"`deepscholar reports generate --release {release_id} --system {row.system_id} --regenerate-outdated` "
               f"rewrites the reports not of its current build (their scores go with them), then "
               f"`deepscholar evaluate --release {release_id} --system {row.system_id}` judges them again")
        lines.append(f"system {row.system_id}'s {row.n_reports} ok reports of {release_id} mix builds: "
                     f"{row.builds}; {fix}")
    return ("one build per system and month: " + " | ".join(lines) + ". To keep the old behaviour beside the "
            "new one, make the change a new prompt version or kind and register it under a new system name")


def run_reports_check(engine: Engine, release_id: str) -> GateResult:
    started = time.perf_counter()
    gx, gxe = import_gx()
    frames = load_report_frames(engine, release_id)
    keys = ["system_id", "arxiv_id"]
    checks = [
        Check("ok_report_text_non_empty", "ok_reports",
              gxe.ExpectColumnValuesToBeBetween(column="text_length", min_value=1), keys),
        Check("own_citations_resolve", "own_reports",
              gxe.ExpectColumnValuesToBeBetween(column="n_unresolved_citations", min_value=0, max_value=0), keys),
        Check("own_sources_before_cutoff", "own_reports",
              gxe.ExpectColumnValuesToBeBetween(column="n_leaked_sources", min_value=0, max_value=0), keys),
        Check("one_build_per_system", "system_builds",
              gxe.ExpectColumnValuesToBeBetween(column="n_builds", min_value=1, max_value=1), ["system_id"]),
    ]
    results = run_checks(gx, checks, frames) if len(frames["ok_reports"]) else []
    failed = [c["name"] for c in results if not c["success"]]
    for c in results:
        if not c["success"]:
            log.warning("reports check %s failed for %s: %s", c["name"], release_id, c["details"])
    summary = (f"{len(frames['ok_reports'])} ok reports; " +
               ("all checks passed" if not failed else f"failed: {', '.join(failed)}"))
    if "one_build_per_system" in failed:
        summary += f" ({mixed_builds_message(frames['system_builds'], release_id)})"
    return GateResult(release_id=release_id, success=not failed, checks=results, summary=summary,
                      gx_version=gx.__version__, duration_seconds=time.perf_counter() - started)
