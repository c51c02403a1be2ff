"""`deepscholar reports import`: store reports produced elsewhere as an external system's reports.

Every rule an output is held to is defined once, in systems/external/rules.py, and applied here and by
`deepscholar reports check` (systems/external/check.py), which stores nothing.

Design notes: docs/MODULE_NOTES.md, `deepscholar.systems.external.importer`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar import db
from deepscholar.errors import InvalidInput
from deepscholar.progress import progress
from deepscholar.systems.build import SystemBuild, import_build
from deepscholar.systems.external.formats import AUTO, ExternalOutput, cap_sources, forced_format, read_unit
from deepscholar.systems.external.formats import get as get_format
from deepscholar.systems.external.formats.base import SKIPPED
from deepscholar.systems.external.resolve import (
    DEFAULT_UNRESOLVED_SHARE,
    TitleResolver,
    finish_report,
    quality_flags,
)
from deepscholar.systems.external.rules import (
    Caps,
    Refused,
    ReleaseKeys,
    admit,
    check_arguments,
    check_sizes,
    find_outputs,
    query_paper_citations,
    release_keys,
)
from deepscholar.systems.storage import ReportRecord, store_report

__all__ = ["ImportSummary", "format_build", "import_reports"]

log = logging.getLogger(__name__)

SEARCH_BACKEND = "external"
MAX_LISTED_ERRORS = 1_000  # outputs not imported listed in the summary (all are counted, and passed to on_error)
_FORMAT_COUNTS = ("outputs", "reports", "cited", "resolved", "unresolved", "leaked", "leaked_retrieved",
                  "flagged", "errors")


@dataclass
class ImportSummary:
    """What an import stored and what it refused, with the reason for each refusal, counted per format."""

    system_id: str
    release_id: str
    path: str
    format: str
    title_search: str = "arxiv"
    max_unresolved_share: float = DEFAULT_UNRESOLVED_SHARE
    n_outputs: int = 0
    n_stored: int = 0
    n_errors: int = 0
    n_flagged: int = 0
    errors: list[dict[str, Any]] = field(default_factory=list)  # the first MAX_LISTED_ERRORS; n_errors counts all
    errors_left_off: int = 0
    skipped: list[dict[str, Any]] = field(default_factory=list)
    reports: list[dict[str, Any]] = field(default_factory=list)
    by_format: dict[str, dict[str, int]] = field(default_factory=dict)
    duration_seconds: float = 0.0
    on_error: Callable[[dict[str, Any]], None] | None = field(default=None, repr=False, compare=False)

    def _counts(self, fmt: str) -> dict[str, int]:
        return self.by_format.setdefault(fmt, dict.fromkeys(_FORMAT_COUNTS, 0))

    def error(self, output: ExternalOutput, message: str) -> None:
        error = {"path": output.path, "key": output.key, "format": output.format, "error": message}
        self.n_errors += 1
        if len(self.errors) < MAX_LISTED_ERRORS:
            self.errors.append(error)
        else:  # a million bad lines are a million counts, not a million kept rows
            self.errors_left_off += 1
        if self.on_error is not None:
            self.on_error(error)
        self._counts(output.format)["errors"] += 1
        # Reported in the summary (the CLI prints one line per output on stderr); the log keeps detail.
        log.info("import-reports %s: %s (%s) not imported: %s", self.system_id, output.path, output.key, message)

    def stored(self, fmt: str, row: dict[str, Any]) -> None:
        self.reports.append(row)
        self.n_stored += 1
        counts = self._counts(fmt)
        counts["reports"] += 1
        counts["cited"] += row["n_cited_numbers"]
        counts["resolved"] += row["n_cited_numbers"] - row["n_unresolved_citations"]
        counts["unresolved"] += row["n_unresolved_citations"]
        counts["leaked"] += row["n_leaked_sources"]
        counts["leaked_retrieved"] += row["n_leaked_retrieved"]
        if row["quality_flags"]:
            counts["flagged"] += 1
            self.n_flagged += 1

    @property
    def flagged(self) -> list[dict[str, Any]]:
        return [r for r in self.reports if r["quality_flags"]]

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self) | {"flagged": self.flagged}
        del out["on_error"]
        return out


def _ensure_system(engine: Engine, system_id: str, path: Path, fmt: str) -> dict:
    """Register a file-imported external system once; an existing system keeps its row."""
    with engine.begin() as conn:
        db.upsert(conn, "systems", [{"system_id": system_id, "kind": "external",
                                     "config": {"source": str(path), "format": fmt}}],
                  key=["system_id"], update=[])
        row = conn.execute(sa.text(f"SELECT kind, version, config FROM {db.SCHEMA}.systems WHERE system_id = :s"),
                           {"s": system_id}).mappings().one()
    if row["kind"] != "external":
        raise InvalidInput(f"system {system_id!r} is a {row['kind']} system; imported reports belong to an "
                         "external system (choose another name)")
    return dict(row)


def refuse_case_twin(engine: Engine, system_id: str) -> None:
    """A system registered under the name in another case is that system: refused before anything is read."""
    from deepscholar.systems.registry import case_twin

    with engine.connect() as conn:
        twin = case_twin(conn, system_id)
    if twin is not None:
        raise InvalidInput(f"system {system_id!r} differs from the registered system {twin!r} only by case: a name is "
                           f"one system in any case; import as {twin!r} or under a new name")


@dataclass
class _Target:
    """Where an import stores its reports: the system, the release's queries and the title resolver."""

    engine: Engine
    system_id: str
    release_id: str
    path: Path
    system: dict  # {} until the first report is stored (_ensure_system)
    format: str
    keys: ReleaseKeys
    resolver: TitleResolver
    max_unresolved_share: float
    caps: Caps


def _stored_counts(engine: Engine, report_id: Any) -> dict[str, Any]:
    with engine.connect() as conn:
        return dict(conn.execute(sa.text(
            f"SELECT n_citations, n_unresolved_citations, n_leaked_sources, n_leaked_retrieved, quality_flags "
            f"FROM {db.SCHEMA}.reports WHERE report_id = :id"), {"id": report_id}).mappings().one())


def format_build(registered_version: str, fmt: str) -> SystemBuild:
    """The import's build: the registered version and the format (with its version) that read the output."""
    try:
        fmt_version: str | None = get_format(fmt).version
    except InvalidInput:  # not a registered format (a test's, since removed): the name alone
        fmt_version = None
    return import_build(registered_version, fmt, fmt_version)


def _store(target: _Target, output: ExternalOutput, arxiv_id: str) -> dict[str, Any]:
    """Resolve, flag and store one report; its row for the summary."""
    report = output.report
    assert report is not None  # _import_output passes only outputs with a report
    cap_sources(report)  # what the report's page will show of each source, bounded
    stats = finish_report(report, target.resolver)
    flags, quality = quality_flags(report, stats, target.max_unresolved_share)
    info = report.trace.setdefault("import", {})
    info["system_path"] = str(target.path)
    info["quality"] = quality
    record = ReportRecord(
        release_id=target.release_id, system_id=target.system_id, arxiv_id=arxiv_id, report=report,
        system_version=target.system["version"], system_config=target.system["config"] or {},
        search_backend=SEARCH_BACKEND, latency_ms=output.latency_ms, cost_usd=output.cost_usd,
        quality_flags=flags, system_build=format_build(target.system["version"], output.format))
    report_id = store_report(target.engine, record)
    return {"arxiv_id": arxiv_id, "report_id": report_id, "path": output.path, "format": output.format,
            "n_sources": quality["n_sources"], "n_retrieved_uncited": quality["n_retrieved_uncited"],
            "n_cited_numbers": stats.n_distinct, **_stored_counts(target.engine, report_id),
            "query_paper_citations": query_paper_citations(report.sources, arxiv_id),
            "unresolved": [u for u in info["unresolved"] if u.get("in_text", True)]}


def _import_output(target: _Target, output: ExternalOutput, claimed: dict[str, str],
                   summary: ImportSummary) -> None:
    """Store one output as the report for its query, or count it as an error with the reason (rules.admit)."""
    summary._counts(output.format)["outputs"] += 1
    try:
        arxiv_id = admit(output, target.keys, target.release_id, claimed, target.caps)
    except Refused as exc:
        summary.error(output, str(exc))
        return
    if not target.system:  # registered with the first report stored, never by an import that stores nothing
        target.system = _ensure_system(target.engine, target.system_id, target.path, target.format)
    summary.stored(output.format, _store(target, output, arxiv_id))


def import_reports(engine: Engine, system_id: str, path: Path | str, release_id: str, fmt: str = AUTO, *,
                   title_search: str = "arxiv", max_unresolved_share: float = DEFAULT_UNRESOLVED_SHARE,
                   on_error: Callable[[dict[str, Any]], None] | None = None) -> ImportSummary:
    """Import one output or a folder of outputs as `system_id`'s reports for `release_id`.

    `fmt`: "auto" or a registered format's name (an unknown one is refused with the known ones listed).
    `title_search`: where title-only reference entries are looked up ("arxiv": the corpus, then arXiv
    title search; "corpus": the corpus only). `max_unresolved_share`: a report whose share of unresolved
    distinct cited numbers is above it is flagged `unresolved_citations`. `on_error`: called with each output
    not imported, as it happens (the CLI prints it); the summary lists the first MAX_LISTED_ERRORS.
    """
    started = time.perf_counter()
    path = Path(path)
    check_arguments(release_id, fmt, title_search, max_unresolved_share, path, system_id)
    keys = release_keys(engine, release_id)
    refuse_case_twin(engine, system_id)
    from deepscholar import rate_limit

    rate_limit.use_warehouse(engine)  # title searches share arXiv's pace with whatever else runs
    caps = Caps.from_settings()
    check_sizes(path, caps.max_file_bytes)
    forced = forced_format(fmt)
    units, resolved = find_outputs(path, fmt)
    summary = ImportSummary(system_id=system_id, release_id=release_id, path=str(path), format=resolved,
                            title_search=title_search, max_unresolved_share=max_unresolved_share, on_error=on_error)
    target = _Target(engine, system_id, release_id, path, {}, resolved, keys, TitleResolver(engine, title_search),
                     max_unresolved_share, caps)
    summary.skipped = [{"path": str(u.path), "why": u.why} for u in units if u.fmt == SKIPPED]
    claimed: dict[str, str] = {}
    # Unit by unit, output by output: what one output held is let go before the next is read.
    for unit in progress([u for u in units if u.fmt != SKIPPED], f"import-reports {system_id} into {release_id}: files"):
        for output in read_unit(unit, forced):
            summary.n_outputs += 1
            _import_output(target, output, claimed, summary)
    summary.duration_seconds = round(time.perf_counter() - started, 3)
    log.info("import-reports %s into %s: %d of %d outputs stored, %d flagged, %d errors (%.2f s)", system_id,
             release_id, summary.n_stored, summary.n_outputs, summary.n_flagged, summary.n_errors,
             summary.duration_seconds)
    return summary


def format_import_summary(summary: ImportSummary) -> str:
    """What `deepscholar reports import` prints: counts per format, then every flagged report and why."""
    from tabulate import tabulate

    head = (f"import-reports {summary.system_id} into {summary.release_id} from {summary.path}: "
            f"{summary.n_outputs} outputs, {summary.n_stored} stored, {summary.n_flagged} flagged, "
            f"{summary.n_errors} not imported ({summary.duration_seconds:.1f} s)")
    cols = ["reports", "cited", "resolved", "unresolved", "leaked", "leaked_retrieved", "flagged", "errors"]
    headers = ["format", "reports", "cited [n]", "resolved", "unresolved", "leaked", "leaked (retrieved only)",
               "flagged", "not imported"]
    table = [[fmt, *(c[k] for k in cols)] for fmt, c in sorted(summary.by_format.items())]
    if len(table) > 1:
        table.append(["total", *(sum(c[k] for c in summary.by_format.values()) for k in cols)])
    lines = [head, tabulate(table, headers=headers)]
    if summary.flagged:
        lines.append(f"\nflagged reports ({len(summary.flagged)}; more than "
                     f"{summary.max_unresolved_share:.0%} unresolved counts as unresolved_citations):")
        for r in summary.flagged:
            lines.append(f"  {r['arxiv_id']}  {', '.join(r['quality_flags'])}  "
                         f"({r['n_unresolved_citations']} of {r['n_cited_numbers']} cited [n] unresolved, "
                         f"{r['n_sources']} sources)  {r['path']}")
            for u in r["unresolved"][:5]:
                entry = f" {u['entry'][:80]}" if u["entry"] else ""
                lines.append(f"      [{u['n']}]{entry}: {u['reason']}")
            if len(r["unresolved"]) > 5:
                lines.append(f"      ... {len(r['unresolved']) - 5} more in the report's trace (import.unresolved)")
    if summary.errors_left_off:
        lines.append(f"\n{summary.n_errors} outputs not imported: the summary lists the first {len(summary.errors)} "
                     "(the command printed each on stderr)")
    if summary.skipped:
        lines.append(f"\nskipped {len(summary.skipped)} files (not taken as outputs):")
        lines += [f"  {s['path']}: {s['why']}" for s in summary.skipped]
    return "\n".join(lines)
