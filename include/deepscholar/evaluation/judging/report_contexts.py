"""Loading what the metrics read: a report, its cited sources, its query paper and the exemplar's labels.

Two round trips per batch of reports, whatever its size, so judging a month does not turn into one
query per report per metric.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar.evaluation.metrics import registry
from deepscholar.evaluation.metrics.base import (
    ExemplarReference,
    NuggetInfo,
    QueryInfo,
    ReportContext,
    SourceDoc,
)
from deepscholar.text.sentences import Sentence, split_report_sentences

__all__ = ["load_queries", "load_reports", "source_text"]


def source_text(title: str | None, snippet: str | None, abstract: str | None, *, prefer_abstract: bool) -> str:
    """What the judge reads as a cited source (METRICS.md, Verifiability).

    The snippet the system saw; for systems that give none (external imports) and for the human exemplar,
    whose authors read the papers rather than a snippet, the title and abstract from the corpus.
    """
    abstract_text = ". ".join(x.strip() for x in (title, abstract) if x and x.strip())
    if prefer_abstract and abstract and abstract.strip():
        return abstract_text
    if snippet and snippet.strip():
        return snippet.strip()
    return abstract_text


def load_queries(engine: Engine, release_id: str, arxiv_ids: Iterable[str] | None = None) -> dict[str, QueryInfo]:
    ids = sorted(set(arxiv_ids)) if arxiv_ids is not None else None
    where = "release_id = :r" + (" AND arxiv_id = ANY(:ids)" if ids is not None else "")
    params = {"r": release_id, "ids": ids}
    with engine.connect() as conn:
        queries = conn.execute(sa.text(
            f"SELECT arxiv_id, title, abstract, published, section_text FROM release_queries WHERE {where}"),
            params).mappings().all()
        refs = conn.execute(sa.text(f"""
            SELECT arxiv_id, cite_key, resolved_arxiv_id, coalesce(resolved_title, bib_title) AS title,
                   cited_by_count, is_important, coalesce(resolved_doi, bib_doi) AS doi
            FROM exemplar_references WHERE {where} ORDER BY arxiv_id, cite_key"""), params).mappings().all()
        nuggets = conn.execute(sa.text(
            f"SELECT arxiv_id, nugget_idx, text, importance FROM nuggets WHERE {where} "
            "ORDER BY arxiv_id, nugget_idx"), params).mappings().all()
        # What each family reads per query besides (a track's release-time artefacts: none for a release
        # built without them), one statement per family that declares some (metrics/<family>/__init__.py).
        declared = registry.query_data()
        family_rows = {family: conn.execute(sa.text(data.sql.format(where=where)), params).mappings().all()
                       for family, data in declared.items()}
    family_data: dict[str, dict[str, Any]] = {}
    for family, rows in family_rows.items():
        rows_of: dict[str, list[sa.RowMapping]] = {}
        for row in rows:
            rows_of.setdefault(row["arxiv_id"], []).append(row)
        for arxiv_id, mine in rows_of.items():
            family_data.setdefault(arxiv_id, {})[family] = declared[family].build(mine)
    refs_of: dict[str, list[ExemplarReference]] = {}
    for r in refs:
        refs_of.setdefault(r["arxiv_id"], []).append(ExemplarReference(
            r["cite_key"], r["resolved_arxiv_id"], r["title"], r["cited_by_count"], r["is_important"], r["doi"]))
    nuggets_of: dict[str, list[NuggetInfo]] = {}
    for n in nuggets:
        nuggets_of.setdefault(n["arxiv_id"], []).append(NuggetInfo(n["nugget_idx"], n["text"], n["importance"]))
    return {q["arxiv_id"]: QueryInfo(
        release_id=release_id, arxiv_id=q["arxiv_id"], title=q["title"], abstract=q["abstract"],
        published=q["published"], exemplar_text=q["section_text"],
        exemplar_references=tuple(refs_of.get(q["arxiv_id"], ())),
        nuggets=tuple(nuggets_of.get(q["arxiv_id"], ())),
        family_data=family_data.get(q["arxiv_id"], {})) for q in queries}


@functools.lru_cache(maxsize=4096)
def _sentences(text: str) -> tuple[Sentence, ...]:
    """A report's sentences, split once per text in a process: a judge task loads every report once per
    metric, and equal texts (an oracle's reports under many system ids) split alike. Shared between
    contexts, so metrics read them and never change them."""
    return tuple(split_report_sentences(text))


def load_reports(engine: Engine, report_ids: Sequence[int],
                 queries_seen: dict[tuple[str, str], QueryInfo] | None = None) -> list[ReportContext]:
    """ReportContexts for ok reports, in the order of report_ids (unknown or failed ids are skipped).

    `queries_seen` keeps the query data already read (a published release's queries do not change): a
    judge task's units share one, so every system's reports of a query read it once, not once per metric.
    """
    if not report_ids:
        return []
    with engine.connect() as conn:
        reports = conn.execute(sa.text("""
            SELECT r.report_id, r.release_id, r.system_id, s.kind, r.arxiv_id, r.text
            FROM reports r JOIN systems s USING (system_id)
            WHERE r.report_id = ANY(:ids) AND r.status = 'ok'"""), {"ids": list(report_ids)}).mappings().all()
        # Three statements on their keys rather than one join: joined, the planner hashed the whole corpus
        # and every report of the release for each 100-report chunk (25 ms at 4,000 papers, growing with
        # the corpus), where looking up the few hundred cited papers takes about one.
        sources = conn.execute(sa.text("""
            SELECT rs.report_id, rs.source_idx, rs.arxiv_id, rs.title, rs.snippet
            FROM report_sources rs
            WHERE rs.report_id = ANY(:ids) AND rs.cited  -- retrieved-only sources are no citations
            ORDER BY rs.report_id, rs.source_idx"""), {"ids": list(report_ids)}).mappings().all()
        cited = sorted({s["arxiv_id"] for s in sources if s["arxiv_id"]})
        papers = {row.arxiv_id: row for row in conn.execute(sa.text(
            "SELECT arxiv_id, title, abstract, doi FROM corpus WHERE arxiv_id = ANY(:a)"), {"a": cited})} if cited else {}
        releases = sorted({r["release_id"] for r in reports})
        counts = {(row.release_id, row.arxiv_id): row.cited_by_count for row in conn.execute(sa.text(
            "SELECT release_id, arxiv_id, cited_by_count FROM source_cited_by "
            "WHERE release_id = ANY(:r) AND arxiv_id = ANY(:a)"), {"r": releases, "a": cited})} if cited else {}
    sources_of = _source_docs(reports, sources, papers, counts)
    queries: dict[tuple[str, str], QueryInfo] = {} if queries_seen is None else queries_seen
    for release_id in {r["release_id"] for r in reports}:
        wanted = {r["arxiv_id"] for r in reports if r["release_id"] == release_id
                  and (release_id, r["arxiv_id"]) not in queries}
        if wanted:
            for arxiv_id, q in load_queries(engine, release_id, wanted).items():
                queries[(release_id, arxiv_id)] = q
    by_id = {r["report_id"]: r for r in reports}
    out = []
    for report_id in report_ids:
        r = by_id.get(report_id)
        if r is None:
            continue
        out.append(ReportContext(
            report_id=r["report_id"], release_id=r["release_id"], system_id=r["system_id"], system_kind=r["kind"],
            arxiv_id=r["arxiv_id"], text=r["text"] or "", query=queries[(r["release_id"], r["arxiv_id"])],
            sources=sources_of.get(r["report_id"], {}), sentences=_sentences(r["text"] or "")))
    return out


def _source_docs(reports: Sequence[sa.RowMapping], sources: Sequence[sa.RowMapping], papers: Mapping[str, Any],
                 counts: Mapping[tuple[str, str], int | None]) -> dict[int, dict[int, SourceDoc]]:
    """{report id: {source idx: SourceDoc}} of the ok `reports`' cited sources, each read against the corpus
    (`papers`: its title, abstract and DOI) and the release's cited-by counts: what the metrics judge a
    source by, the same for every report that cites the paper."""
    kind_of = {r["report_id"]: r["kind"] for r in reports}
    release_of = {r["report_id"]: r["release_id"] for r in reports}
    sources_of: dict[int, dict[int, SourceDoc]] = {}
    for s in sources:
        if s["report_id"] not in kind_of:  # a failed report's sources
            continue
        paper = papers.get(s["arxiv_id"])
        # The corpus title first: the same paper then reads the same in every system's report, so a
        # question about it (its relevance to the query) is one cached call per query, not per report.
        title = paper.title if paper is not None and paper.title is not None else s["title"]
        abstract = paper.abstract if paper is not None else None
        prefer_abstract = kind_of[s["report_id"]] == "human_exemplar"
        sources_of.setdefault(s["report_id"], {})[s["source_idx"]] = SourceDoc(
            idx=s["source_idx"], arxiv_id=s["arxiv_id"], title=title,
            text=source_text(title, s["snippet"], abstract, prefer_abstract=prefer_abstract),
            abstract=abstract, cited_by_count=counts.get((release_of[s["report_id"]], s["arxiv_id"])),
            doi=paper.doi if paper is not None else None)
    return sources_of
