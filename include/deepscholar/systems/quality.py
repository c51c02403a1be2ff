"""Great Expectations check on a month's reports, run after generation and before judging.

Our own systems must produce text, resolve every [n] and never cite past the cutoff. External systems
and the human exemplar are held to the first rule only: their unresolved citations and leaked sources are facts about them,
already counted and flagged on the report, not defects of the pipeline.
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


def load_report_frames(engine: Engine, release_id: str) -> dict[str, pd.DataFrame]:
    with engine.connect() as conn:
        rows = conn.execute(sa.text("""
            SELECT r.system_id, r.arxiv_id, s.kind, length(coalesce(r.text, '')) AS text_length,
                   r.n_unresolved_citations, r.n_leaked_sources
            FROM reports r JOIN systems s USING (system_id)
            WHERE r.release_id = :r AND r.status = 'ok'"""), {"r": release_id}).mappings().all()
    ok = pd.DataFrame([dict(r) for r in rows], columns=["system_id", "arxiv_id", "kind", "text_length",
                                                        "n_unresolved_citations", "n_leaked_sources"])
    return {"ok_reports": ok, "own_reports": ok[~ok["kind"].isin(NOT_OURS)].reset_index(drop=True)}


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
    ]
    results = run_checks(gx, checks, frames) if len(frames["ok_reports"]) else []
    failed = [c["name"] for c in results if not c["success"]]
    for c in results:
        if not c["success"]:
            log.warning("reports check %s failed for %s: %s", c["name"], release_id, c["details"])
    summary = (f"{len(frames['ok_reports'])} ok reports; " +
               ("all checks passed" if not failed else f"failed: {', '.join(failed)}"))
    return GateResult(release_id=release_id, success=not failed, checks=results, summary=summary,
                      gx_version=gx.__version__, duration_seconds=time.perf_counter() - started)
