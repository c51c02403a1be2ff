"""Storing a report: one upsert per (release, system, query), its sources replaced, leakage checked.

Every upsert also writes the report's system build (systems/build.py), so a report always says which
version of its system (prompts, defaults, code) wrote it.

Used by generation (DAG and CLI) and by the importers of external outputs, so every report gets the
same citation statistics and the same leakage check however it arrived.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar import db
from deepscholar.clock import UTC
from deepscholar.systems.base import Report, Source
from deepscholar.systems.build import SystemBuild


@dataclass
class ReportRecord:
    """A report or a failure, with what it cost."""

    release_id: str
    system_id: str
    arxiv_id: str
    report: Report | None
    error: str | None = None
    system_version: str | None = None
    system_build: SystemBuild | None = None  # reports.system_build(_detail); None: not known
    system_config: dict = field(default_factory=dict)
    search_backend: str | None = None
    search_cutoff: datetime | None = None
    latency_ms: float | None = None
    n_llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    quality_flags: list[str] = field(default_factory=list)  # what an importer found wrong (reports.quality_flags)


def source_dates(conn: sa.Connection, sources: list[Source]) -> list[tuple[datetime | None, str]]:
    """A source's date from the corpus; else a new-style arXiv id (YYMM.NNNNN) bounds it from below."""
    from deepscholar.text import arxiv_id_lower_bound_date

    ids = sorted({s.arxiv_id for s in sources if s.arxiv_id})
    known: dict[str, datetime] = {}
    if ids:
        known = dict(conn.execute(sa.text("SELECT arxiv_id, published FROM corpus WHERE arxiv_id = ANY(:ids)"),
                                  {"ids": ids}).all())
    out: list[tuple[datetime | None, str]] = []
    for s in sources:
        if s.arxiv_id and known.get(s.arxiv_id):
            out.append((known[s.arxiv_id], "corpus"))
        elif s.arxiv_id and (bound := arxiv_id_lower_bound_date(s.arxiv_id)):
            out.append((datetime(bound.year, bound.month, bound.day, tzinfo=UTC), "arxiv_id_lower_bound"))
        elif s.published:
            # A system-given date without a zone is taken as UTC, so it compares with the cutoff.
            published = s.published if s.published.tzinfo else s.published.replace(tzinfo=UTC)
            out.append((published, "system"))
        else:
            out.append((None, "unknown"))
    return out


def source_leaks(conn: sa.Connection, sources: list[Source], cutoff: datetime | None
                 ) -> tuple[list[tuple[datetime | None, str]], list[bool]]:
    """(each source's date and its basis, whether it leaks): a source dated on or after the query's cutoff
    (its paper's first submission) leaks. The one definition `reports check` applies too."""
    dates = source_dates(conn, sources)
    return dates, [d is not None and cutoff is not None and d >= cutoff for d, _ in dates]


def check_sources(report: Report) -> None:
    """[n] must name exactly one source: duplicate or non-positive indices make citations ambiguous."""
    seen = [s.idx for s in report.sources]
    dupes = sorted({i for i in seen if seen.count(i) > 1})
    if dupes or any(i < 1 for i in seen):
        raise ValueError(f"report sources must have distinct indices >= 1 (duplicates: {dupes})")


def _content(text: str | None, sources) -> tuple:
    return (text, sorted((s.idx, s.title, s.snippet, s.arxiv_id, s.url, s.cited) for s in sources))


def _forget_stale_scores(conn: sa.Connection, rec: ReportRecord, sources: list[Source]) -> None:
    """A report stored again with other text or sources (a re-import of a corrected file, a regenerated
    report) loses the judgments and scores of its old content, every metric version's, so the next evaluation
    judges it again.
    The same content stored again (a retry, a re-run) keeps them: judging stays free on re-runs."""
    old = conn.execute(sa.text(
        "SELECT report_id, text FROM reports WHERE release_id = :r AND system_id = :s AND arxiv_id = :a"),
        {"r": rec.release_id, "s": rec.system_id, "a": rec.arxiv_id}).first()
    if old is None:
        return
    old_sources = [Source(idx=r.source_idx, title=r.title, snippet=r.snippet, arxiv_id=r.arxiv_id, url=r.url,
                          cited=r.cited)
                   for r in conn.execute(sa.text("""SELECT source_idx, title, snippet, arxiv_id, url, cited
                                                    FROM report_sources WHERE report_id = :id"""),
                                         {"id": old.report_id})]
    if _content(old.text, old_sources) == _content(rec.report.text if rec.report else None, sources):
        return
    for table in ("judgments", "metric_scores", "superseded_judgments", "superseded_metric_scores"):
        conn.execute(sa.text(f"DELETE FROM {table} WHERE report_id = :id"), {"id": old.report_id})


def store_report(engine: Engine, rec: ReportRecord) -> int:
    """Upsert the report row and replace its sources; returns report_id. Retries never duplicate."""
    from deepscholar.text.citations import citation_stats

    if rec.report is not None:
        check_sources(rec.report)

    with engine.begin() as conn:
        cutoff = rec.search_cutoff or conn.execute(sa.text(
            "SELECT published FROM release_queries WHERE release_id = :r AND arxiv_id = :a"),
            {"r": rec.release_id, "a": rec.arxiv_id}).scalar()
        sources = rec.report.sources if rec.report else []
        dates, leaked = source_leaks(conn, sources, cutoff)
        stats = citation_stats(rec.report.text, sources) if rec.report else None
        # Leaks among the sources a report lists, and (apart) among those it only says it retrieved.
        n_leaked = sum(lk for s, lk in zip(sources, leaked, strict=True) if s.cited)
        n_leaked_retrieved = sum(lk for s, lk in zip(sources, leaked, strict=True) if not s.cited)
        row = {
            "release_id": rec.release_id, "system_id": rec.system_id, "arxiv_id": rec.arxiv_id,
            "status": "ok" if rec.report is not None and rec.error is None else "system_error",
            "error": rec.error, "text": rec.report.text if rec.report else None,
            "system_version": rec.system_version, "system_config": rec.system_config,
            "system_build": rec.system_build.label() if rec.system_build else None,
            "system_build_detail": rec.system_build.detail() if rec.system_build else None,
            "search_backend": rec.search_backend, "search_cutoff": cutoff, "latency_ms": rec.latency_ms,
            "n_llm_calls": rec.n_llm_calls, "prompt_tokens": rec.prompt_tokens,
            "completion_tokens": rec.completion_tokens, "cost_usd": rec.cost_usd,
            "n_citations": stats.n_citations if stats else 0,
            "n_unresolved_citations": stats.n_unresolved if stats else 0,
            "n_leaked_sources": n_leaked, "n_leaked_retrieved": n_leaked_retrieved,
            "quality_flags": list(rec.quality_flags), "trace": rec.report.trace if rec.report else {},
        }
        _forget_stale_scores(conn, rec, sources)
        db.upsert(conn, "reports", [row], key=["release_id", "system_id", "arxiv_id"])
        report_id = conn.execute(sa.text(
            "SELECT report_id FROM reports WHERE release_id = :r AND system_id = :s AND arxiv_id = :a"),
            {"r": rec.release_id, "s": rec.system_id, "a": rec.arxiv_id}).scalar_one()
        conn.execute(sa.text("DELETE FROM report_sources WHERE report_id = :id"), {"id": report_id})
        db.upsert(conn, "report_sources", [
            {"report_id": report_id, "source_idx": s.idx, "arxiv_id": s.arxiv_id, "url": s.url, "title": s.title,
             "snippet": s.snippet, "published": d, "date_basis": basis, "leaked": lk, "cited": s.cited}
            for s, (d, basis), lk in zip(sources, dates, leaked, strict=True)
        ], key=["report_id", "source_idx"])
    return report_id
