"""`deepscholar reports check`: what `reports import` would do with a submission, without storing anything.

Design notes: docs/MODULE_NOTES.md, `deepscholar.systems.external.check`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine

from deepscholar.systems.external import rules
from deepscholar.systems.external.formats import AUTO, ExternalOutput, cap_sources, forced_format, read_unit
from deepscholar.systems.external.formats.base import SKIPPED
from deepscholar.systems.external.resolve import (
    DEFAULT_UNRESOLVED_SHARE,
    TitleResolver,
    finish_report,
    quality_flags,
)
from deepscholar.systems.external.rules import Refused, ReleaseKeys

__all__ = ["CheckResult", "check_submission", "format_check"]

MAX_LISTED = 1_000  # outputs listed with their problems (all are counted)


@dataclass
class CheckResult:
    """Per output its problems; counts; the queries no output answers. `clean`: it would import as it is."""

    release_id: str
    path: str
    format: str
    n_queries: int = 0
    n_outputs: int = 0
    n_importable: int = 0
    n_refused: int = 0
    n_marked: int = 0
    outputs: list[dict[str, Any]] = field(default_factory=list)  # those with a problem (first MAX_LISTED)
    missing: list[str] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not (self.n_refused or self.n_marked or self.missing)

    def add(self, output: ExternalOutput, arxiv_id: str | None, problems: list[str], refused: bool) -> None:
        self.n_outputs += 1
        self.n_refused += refused
        self.n_importable += not refused
        self.n_marked += bool(problems) and not refused
        if problems and len(self.outputs) < MAX_LISTED:
            self.outputs.append({"path": output.path, "arxiv_id": arxiv_id, "format": output.format,
                                 "imported": not refused, "problems": problems})

    def as_dict(self) -> dict[str, Any]:
        return asdict(self) | {"clean": self.clean}


def _report_problems(engine: Engine, output: ExternalOutput, arxiv_id: str, keys: ReleaseKeys,
                     resolver: TitleResolver, max_unresolved_share: float) -> list[str]:
    """What the import would store as facts about an admitted output: its flags, leaks, self-citations."""
    from deepscholar.systems.storage import source_leaks

    report = output.report
    assert report is not None  # admitted
    cap_sources(report)
    stats = finish_report(report, resolver)
    flags, quality = quality_flags(report, stats, max_unresolved_share)
    problems = []
    for flag in flags:
        if flag == "unresolved_citations":
            listed = ", ".join(f"[{u['n']}]" for u in report.trace["import"]["unresolved"] if u.get("in_text", True))
            problems.append(f"flag unresolved_citations: {quality['n_unresolved']} of {quality['n_cited_numbers']} "
                            f"cited numbers resolve to no paper ({listed[:200]}), more than "
                            f"{max_unresolved_share:.0%}")
        else:
            problems.append(f"flag {flag}: {'no cited source at all' if flag == 'no_sources' else 'the text cites nothing'}")
    own = rules.query_paper_citations(report.sources, arxiv_id)
    if own:
        problems.append(f"cites the query paper itself ({', '.join(f'[{n}]' for n in own)}): its own section "
                        "is the task")
    with engine.connect() as conn:
        dates, leaked = source_leaks(conn, report.sources, keys.cutoffs.get(arxiv_id))
    late = [(s, d) for s, (d, _), lk in zip(report.sources, dates, leaked, strict=True)
            if lk and s.cited and s.idx not in own]
    if late:
        problems.append(f"cites {len(late)} source(s) dated on or after the query paper "
                        f"({keys.cutoffs.get(arxiv_id):%Y-%m-%d}): " + ", ".join(
                            f"[{s.idx}] {s.arxiv_id or s.url} ({d:%Y-%m-%d})" for s, d in late[:10]))
    return problems


def check_submission(engine: Engine, path: Path | str, release_id: str, fmt: str = AUTO, *,
                     title_search: str = "arxiv", max_unresolved_share: float = DEFAULT_UNRESOLVED_SHARE,
                     system_id: str | None = None) -> CheckResult:
    """Read PATH as `import_reports` would and list every problem; stores nothing. Raises what the import
    raises before reading (a mistyped argument, an unknown release, a file over the size cap, nothing
    recognised)."""
    path = Path(path)
    rules.check_arguments(release_id, fmt, title_search, max_unresolved_share, path, system_id)
    keys = rules.release_keys(engine, release_id)
    if system_id is not None:
        from deepscholar.systems.external.importer import refuse_case_twin

        refuse_case_twin(engine, system_id)
    if title_search == "arxiv":
        from deepscholar import rate_limit

        rate_limit.use_warehouse(engine)  # arXiv's pace is shared with whatever else runs, as the import's
    caps = rules.Caps.from_settings()
    rules.check_sizes(path, caps.max_file_bytes)
    forced = forced_format(fmt)
    units, resolved = rules.find_outputs(path, fmt)
    result = CheckResult(release_id=release_id, path=str(path), format=resolved, n_queries=len(keys.ids))
    result.skipped = [{"path": str(u.path), "why": u.why} for u in units if u.fmt == SKIPPED]
    resolver = TitleResolver(engine, title_search)
    claimed: dict[str, str] = {}
    for unit in (u for u in units if u.fmt != SKIPPED):
        for output in read_unit(unit, forced):
            try:
                arxiv_id = rules.admit(output, keys, release_id, claimed, caps)
            except Refused as exc:
                result.add(output, None, [f"not imported: {' '.join(str(exc).split())}"], refused=True)
                continue
            result.add(output, arxiv_id, _report_problems(engine, output, arxiv_id, keys, resolver,
                                                          max_unresolved_share), refused=False)
    result.missing = sorted(keys.ids - set(claimed))
    return result


def format_check(result: CheckResult) -> str:
    """What `deepscholar reports check` prints: one block per output with a problem, then the summary."""
    lines = []
    for o in result.outputs:
        lines.append(f"{o['path']}" + (f" ({o['arxiv_id']})" if o["arxiv_id"] else ""))
        lines += [f"  - {p}" for p in o["problems"]]
    if result.n_refused + result.n_marked > len(result.outputs):
        lines.append(f"... {result.n_refused + result.n_marked - len(result.outputs)} more outputs with problems "
                     "(--json lists the first ones too)")
    if result.missing:
        shown = ", ".join(result.missing[:20]) + (f" and {len(result.missing) - 20} more" if len(result.missing) > 20 else "")
        lines.append(f"queries of {result.release_id} no output answers ({len(result.missing)}): {shown}")
    lines += [f"skipped {s['path']}: {s['why']}" for s in result.skipped]
    verdict = ("clean: it would import as it is" if result.clean else
               "NOT clean: fix the problems above (`reports import` would refuse or mark them)")
    lines.append(f"check of {result.path} against release {result.release_id} ({result.format}): "
                 f"{result.n_outputs} outputs for {result.n_queries} queries; {result.n_importable} importable, "
                 f"{result.n_marked} of them marked, {result.n_refused} not imported, {len(result.missing)} queries "
                 f"missing; {verdict}")
    return "\n".join(lines)
