"""`deepscholar import-reports`: store reports produced elsewhere as an external system's reports.

An output reaches a query only by its arXiv id or by the dataset row its folder is named after (through
release_queries.row_index, kept by the official import); an output that maps to no query is reported,
never stored. Every report goes through storage.store_report, so imported reports get the same
citation statistics and leakage check as our own, and importing again changes no row count.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar import db
from deepscholar.systems.external.formats import ExternalOutput, detect_format, read_outputs
from deepscholar.systems.storage import ReportRecord, store_report

__all__ = ["ImportSummary", "import_reports"]

log = logging.getLogger(__name__)

SEARCH_BACKEND = "external"


@dataclass
class ImportSummary:
    """What an import stored and what it refused, with the reason for each refusal."""

    system_id: str
    release_id: str
    path: str
    format: str
    n_outputs: int = 0
    n_stored: int = 0
    n_errors: int = 0
    errors: list[dict[str, Any]] = field(default_factory=list)
    reports: list[dict[str, Any]] = field(default_factory=list)
    duration_seconds: float = 0.0

    def error(self, output: ExternalOutput, message: str) -> None:
        self.errors.append({"path": output.path, "key": output.key, "error": message})
        self.n_errors = len(self.errors)
        log.error("import-reports %s: %s (%s): %s", self.system_id, output.path, output.key, message)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _ensure_system(engine: Engine, system_id: str, path: Path, fmt: str) -> dict:
    """Register a file-imported external system once; an existing system keeps its row."""
    with engine.begin() as conn:
        db.upsert(conn, "systems", [{"system_id": system_id, "kind": "external",
                                     "config": {"source": str(path), "format": fmt}}],
                  key=["system_id"], update=[])
        row = conn.execute(sa.text(f"SELECT kind, version, config FROM {db.SCHEMA}.systems WHERE system_id = :s"),
                           {"s": system_id}).mappings().one()
    if row["kind"] != "external":
        raise ValueError(f"system {system_id!r} is a {row['kind']} system; imported reports belong to an "
                         "external system (choose another name)")
    return dict(row)


def _release_keys(engine: Engine, release_id: str) -> tuple[set[str], dict[int, str]]:
    with engine.connect() as conn:
        if conn.execute(sa.text(f"SELECT 1 FROM {db.SCHEMA}.releases WHERE release_id = :r"),
                        {"r": release_id}).first() is None:
            raise LookupError(f"release {release_id!r} does not exist")
        rows = conn.execute(sa.text(f"SELECT arxiv_id, row_index FROM {db.SCHEMA}.release_queries "
                                    "WHERE release_id = :r"), {"r": release_id}).all()
    return {r.arxiv_id for r in rows}, {r.row_index: r.arxiv_id for r in rows if r.row_index is not None}


def _query_for(output: ExternalOutput, ids: set[str], rows: dict[int, str], release_id: str) -> str:
    """The release query an output is for; raises ValueError with the reason when there is none."""
    if output.key is None:
        raise ValueError("the output names no arXiv id and sits in no folder named by a dataset row or "
                         "arXiv id; put it under <row>/ or <arxiv_id>/")
    if isinstance(output.key, int):
        if output.key not in rows:
            raise ValueError(f"row {output.key} is not a row of the dataset imported as release {release_id} "
                             "(only official imports record rows)")
        return rows[output.key]
    if output.key not in ids:
        raise ValueError(f"arXiv id {output.key} is not a query of release {release_id}")
    if output.row is not None and rows.get(output.row) != output.key:
        raise ValueError(f"folder row {output.row} is {rows.get(output.row)} in release {release_id}, "
                         f"but the output is for {output.key}")
    return output.key


def import_reports(engine: Engine, system_id: str, path: Path | str, release_id: str,
                   fmt: str = "auto") -> ImportSummary:
    """Import one output or a folder of outputs as `system_id`'s reports for `release_id`."""
    started = time.perf_counter()
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist")
    resolved = detect_format(path) if fmt == "auto" else fmt
    ids, rows = _release_keys(engine, release_id)
    system = _ensure_system(engine, system_id, path, resolved)
    summary = ImportSummary(system_id=system_id, release_id=release_id, path=str(path), format=resolved)

    outputs = read_outputs(path, resolved)
    summary.n_outputs = len(outputs)
    claimed: dict[str, str] = {}
    for output in outputs:
        if output.error or output.report is None:
            summary.error(output, output.error or "no report")
            continue
        try:
            arxiv_id = _query_for(output, ids, rows, release_id)
        except ValueError as exc:
            summary.error(output, str(exc))
            continue
        if arxiv_id in claimed:
            summary.error(output, f"a second output for {arxiv_id} (first: {claimed[arxiv_id]}); not stored")
            continue
        claimed[arxiv_id] = output.path
        report = output.report
        report.trace.setdefault("import", {})["system_path"] = str(path)
        record = ReportRecord(
            release_id=release_id, system_id=system_id, arxiv_id=arxiv_id, report=report,
            system_version=system["version"], system_config=system["config"] or {},
            search_backend=SEARCH_BACKEND, latency_ms=output.latency_ms, cost_usd=output.cost_usd)
        report_id = store_report(engine, record)
        summary.n_stored += 1
        with engine.connect() as conn:
            stored = conn.execute(sa.text(
                f"SELECT n_citations, n_unresolved_citations, n_leaked_sources FROM {db.SCHEMA}.reports "
                "WHERE report_id = :id"), {"id": report_id}).mappings().one()
        summary.reports.append({"arxiv_id": arxiv_id, "report_id": report_id, "path": output.path,
                                "n_sources": len(report.sources), **stored})
    summary.duration_seconds = round(time.perf_counter() - started, 3)
    log.info("import-reports %s into %s: %d of %d outputs stored, %d errors (%.2f s)", system_id, release_id,
             summary.n_stored, summary.n_outputs, summary.n_errors, summary.duration_seconds)
    return summary
