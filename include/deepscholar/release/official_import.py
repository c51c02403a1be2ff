"""Import the published DeepScholar-bench dataset as a release, so systems can be scored on it.

Design notes: docs/MODULE_NOTES.md, `deepscholar.release.official_import`.
"""

from __future__ import annotations

import json
import logging
import re
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar import db
from deepscholar.clock import utc_now
from deepscholar.errors import InvalidInput
from deepscholar.progress import progress
from deepscholar.release.versions import (
    latest_version,
    manifest_hash,
    open_next_version,
    parse_version,
    seal,
    versions_locked,
)
from deepscholar.sources.latex_citations import cite_keys_in_latex
from deepscholar.sources.latex_source import strip_comments
from deepscholar.sources.latex_text import latex_to_text, word_count
from deepscholar.text import strip_arxiv_version
from deepscholar.text.paper_ids import arxiv_id_named

__all__ = ["ImportSummary", "OfficialImportError", "import_official", "arxiv_id_from_link"]

log = logging.getLogger(__name__)

NUGGET_JUDGE_CONFIG = "official:gpt-4.1"
IMPORTANCE_JUDGE = "official"
RESOLUTION_METHOD = "official"
CORPUS_SOURCE = "official_import"

_PAPERS_FILE = "papers_with_related_works.csv"
# recovered_citations.csv is citations.csv plus search columns; prefer the richer one.
_CITATION_FILES = ("recovered_citations.csv", "citations.csv")
_IMPORTANT_FILE = "important_citations.csv"
_ARXIV_PREFIX_RE = re.compile(r"^arxiv\s*:\s*", re.IGNORECASE)
_ARXIV_LINK_RE = re.compile(r"arxiv\.org/(?:abs|pdf)/(?P<id>[^?#\s]+?)(?:\.pdf)?/?(?:[?#].*)?$", re.IGNORECASE)
# arXiv taxonomy codes (cs.CL, q-fin.EC, hep-th); the dataset's list also carries ACM/MSC classes.
_ARXIV_CATEGORY_RE = re.compile(r"^[a-z][a-z-]*(\.[A-Za-z-]+)?$")
_TRUE = {"true", "1", "yes", "y", "important", "t"}
_FALSE = {"false", "0", "no", "n", "not important", "unimportant", "f"}


class OfficialImportError(InvalidInput):
    """The directory is not a DeepScholar-bench dataset we can import (missing files or columns)."""


@dataclass
class ImportSummary:
    """What an import wrote and what it had to leave out; errors carry file, row and reason."""

    release_id: str
    directory: str
    citations_file: str = ""
    important_file: str | None = None
    n_rows: int = 0
    n_queries: int = 0
    n_papers: int = 0
    n_references: int = 0
    n_important_labels: int = 0
    n_nuggets: int = 0
    n_unmatched_nugget_files: int = 0
    n_corpus: int = 0
    n_errors: int = 0
    errors: list[dict[str, Any]] = field(default_factory=list)
    duration_seconds: float = 0.0
    # Which version the content is (release/versions.py): a sealed release is never written again, so a
    # changed re-import is the next version and an identical one changes nothing (`unchanged`, `note`).
    version: int = 1
    manifest_hash: str | None = None
    unchanged: bool = False
    note: str = ""

    def error(self, file: str, row: int | None, arxiv_id: str | None, message: str) -> None:
        self.errors.append({"file": file, "row": row, "arxiv_id": arxiv_id, "error": message})
        self.n_errors = len(self.errors)
        log.error("official import %s: %s row %s (%s): %s", self.release_id, file, row, arxiv_id, message)

    def counts(self) -> dict[str, int]:
        return {k: v for k, v in asdict(self).items() if k.startswith("n_")}


# ------------------------------------------------------------------------------------------- parsing


def arxiv_id_from_link(link: str | None) -> tuple[str, int | None] | None:
    """(version-less id, version) of an arXiv abs/pdf URL or a bare id; None if it names no arXiv paper."""
    text = (link or "").strip()
    base = arxiv_id_named(text)  # every form the metrics' resolver reads (text/paper_ids.py)
    if base is None:
        return None
    m = _ARXIV_LINK_RE.search(text)
    _, version = strip_arxiv_version(m.group("id") if m else _ARXIV_PREFIX_RE.sub("", text))
    return base, version


def _squash(text: str) -> str:
    """The CSV keeps arXiv's ~80-column line wrapping; it carries no meaning."""
    return " ".join(text.split())


def _timestamp(text: str) -> datetime | None:
    if not text.strip():
        return None
    ts = pd.Timestamp(text.strip())
    ts = ts.tz_convert("UTC") if ts.tzinfo else ts.tz_localize("UTC")
    return ts.to_pydatetime()


def _read_csv(path: Path) -> pd.DataFrame:
    # Strings everywhere: ids like 2506.00418 and years must not become floats.
    return pd.read_csv(path, dtype=str, keep_default_na=False)


def _require(df: pd.DataFrame, columns: list[str], path: Path) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise OfficialImportError(f"{path}: missing columns {missing}")


def _year(text: str) -> str | None:
    text = text.strip()
    if not text:
        return None
    try:
        return str(int(float(text)))  # pandas wrote 2015 as "2015.0"
    except ValueError:
        return text


def _opt(text: str) -> str | None:
    text = text.strip()
    return text or None


@dataclass
class _Query:
    row_index: int
    arxiv_id: str
    version: int
    paper: dict[str, Any]
    query: dict[str, Any]
    references: list[dict[str, Any]] = field(default_factory=list)
    nuggets: list[dict[str, Any]] = field(default_factory=list)
    cited_corpus: list[dict[str, Any]] = field(default_factory=list)


def _parse_query_row(i: int, row: pd.Series, release_id: str, source_file: str) -> _Query:
    parsed = arxiv_id_from_link(row["arxiv_id"])
    if parsed is None:
        raise ValueError(f"not an arXiv id: {row['arxiv_id']!r}")
    arxiv_id, version = parsed
    title = _squash(row["title"])
    if not title:
        raise ValueError("empty title")
    raw_latex = row["raw_latex_related_works"]
    clean_latex = row["clean_latex_related_works"] or raw_latex
    if not clean_latex.strip():
        raise ValueError("empty related-work section")
    live = strip_comments(clean_latex).live
    section_text = latex_to_text(live)
    if not section_text:
        raise ValueError("related-work section is empty once cleaned")
    published = _timestamp(row["published_date"])
    authors = [a.strip() for a in row["authors"].split(",") if a.strip()]
    listed = [c.strip() for c in row["categories"].split(",") if c.strip()]
    categories = [c for c in listed if _ARXIV_CATEGORY_RE.match(c)]
    abstract = _squash(row["abstract"])
    paper = {
        "arxiv_id": arxiv_id, "version": version or 1, "title": title, "abstract": abstract,
        "authors": authors, "categories": categories, "primary_category": categories[0] if categories else None,
        "published": published, "updated": _timestamp(row.get("updated_date", "")),
    }
    query = {
        "release_id": release_id, "arxiv_id": arxiv_id, "version": version or 1, "row_index": i,
        "title": title, "abstract": abstract, "authors": authors, "published": published, "venue": None,
        "section_raw_latex": raw_latex, "section_text": section_text, "word_count": word_count(section_text),
        "n_cite_keys": len(cite_keys_in_latex(live)),
        "extraction_notes": {
            "source": "official", "file": source_file, "versioned_id": row["arxiv_id"].strip(),
            "other_classes": [c for c in listed if c not in categories],
            "publication_date": _opt(row.get("publication_date", "")),
            "has_pdf_related_works": bool(row.get("pdf_related_works", "").strip()),
        },
    }
    return _Query(i, arxiv_id, version or 1, paper, query)


def _reference_row(row: pd.Series, release_id: str, arxiv_id: str, cite_key: str) -> tuple[dict, dict | None]:
    resolved = arxiv_id_from_link(row["cited_paper_arxiv_link"])
    resolved_id = resolved[0] if resolved else None
    cited_title = _squash(row.get("cited_paper_title", ""))
    cited_abstract = _squash(row.get("cited_paper_abstract", ""))
    bib_fields = {
        k: row[c].strip() for k, c in (
            ("journal", "bib_paper_journal"), ("month", "bib_paper_month"), ("raw_citation_text", "raw_citation_text"),
            ("has_metadata", "has_metadata"), ("is_arxiv_paper", "is_arxiv_paper"),
            ("cited_paper_arxiv_link", "cited_paper_arxiv_link"), ("search_res_title", "search_res_title"),
            ("search_res_url", "search_res_url"), ("search_res_content", "search_res_content"),
        ) if c in row.index and row[c].strip()
    }
    ref = {
        "release_id": release_id, "arxiv_id": arxiv_id, "cite_key": cite_key,
        "bib_title": _opt(_squash(row.get("original_title", ""))) or _opt(cited_title),
        "bib_authors": _opt(row.get("bib_paper_authors", "")),
        "bib_year": _year(row.get("bib_paper_year", "")),
        "bib_doi": _opt(row.get("bib_paper_doi", "")),
        "bib_url": _opt(row.get("bib_paper_url", "")),
        "bib_fields": bib_fields,
        "resolved_arxiv_id": resolved_id,
        "resolved_title": _opt(cited_title),
        "resolved_abstract": _opt(cited_abstract),
        "resolution_method": RESOLUTION_METHOD,
        "resolution_error": None if resolved_id or not row["cited_paper_arxiv_link"].strip()
        else f"unparseable arXiv link {row['cited_paper_arxiv_link'].strip()!r}",
        "is_important": None,
        "importance_judge": None,
    }
    corpus: dict | None = None
    if resolved_id and cited_title:
        corpus = {"arxiv_id": resolved_id, "title": cited_title, "abstract": cited_abstract, "authors": [],
                  "published": None, "categories": [], "doi": None, "source": CORPUS_SOURCE}
    return ref, corpus


def _importance_labels(path: Path, summary: ImportSummary) -> dict[tuple[str, str], bool]:
    """(arxiv_id, cite_key) -> important. A file with no label column lists only the important ones."""
    df = _read_csv(path)
    parent_col = next((c for c in ("parent_paper_arxiv_id", "arxiv_id", "paper_id") if c in df.columns), None)
    key_col = next((c for c in ("citation_shorthand", "cite_key", "key") if c in df.columns), None)
    label_col = next((c for c in ("is_important", "important", "importance", "label") if c in df.columns), None)
    if parent_col is None or key_col is None:
        summary.error(path.name, None, None, f"no parent id / citation key columns in {list(df.columns)}; "
                      "importance left unlabelled")
        return {}
    labels: dict[tuple[str, str], bool] = {}
    for i, row in df.iterrows():
        parsed = arxiv_id_from_link(row[parent_col])
        key = row[key_col].strip()
        if parsed is None or not key:
            summary.error(path.name, int(i), row[parent_col], "row without a valid arXiv id or citation key")
            continue
        if label_col is None:
            labels[(parsed[0], key)] = True
            continue
        value = row[label_col].strip().lower()
        if value in _TRUE:
            labels[(parsed[0], key)] = True
        elif value in _FALSE:
            labels[(parsed[0], key)] = False
        else:
            summary.error(path.name, int(i), parsed[0], f"unknown importance label {row[label_col]!r}")
    return labels


def _nugget_file(nuggets_dir: Path, q: _Query, versioned_id: str) -> Path | None:
    for name in (f"{versioned_id}.json", f"{q.arxiv_id}.json", f"{q.arxiv_id}v{q.version}.json"):
        path = nuggets_dir / name
        if path.is_file():
            return path
    # Old-style ids hold a '/', which the authors' files cannot; they use '_' in its place.
    path = nuggets_dir / f"{versioned_id.replace('/', '_')}.json"
    return path if path.is_file() else None


def _parse_nuggets(path: Path, q: _Query, release_id: str, summary: ImportSummary) -> list[dict]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        summary.error(path.name, None, q.arxiv_id, f"unreadable nugget file: {exc}")
        return []
    qid = arxiv_id_from_link(str(data.get("qid", ""))) if isinstance(data, dict) else None
    if isinstance(data, dict) and data.get("qid") not in (None, "") and (qid is None or qid[0] != q.arxiv_id):
        # FORMATS.md pitfall: a file keyed by another numbering; trusting it would mislabel a query.
        summary.error(path.name, None, q.arxiv_id, f"qid {data.get('qid')!r} does not match the file name")
        return []
    items = data.get("nuggets") if isinstance(data, dict) else None
    if not isinstance(items, list):
        summary.error(path.name, None, q.arxiv_id, "no 'nuggets' list")
        return []
    rows = []
    for idx, item in enumerate(items):
        text = _squash(str(item.get("text", ""))) if isinstance(item, dict) else ""
        importance = str(item.get("importance", "")).strip().lower() if isinstance(item, dict) else ""
        if not text or importance not in ("vital", "okay"):
            summary.error(path.name, idx, q.arxiv_id, f"bad nugget (text={text[:40]!r}, importance={importance!r})")
            continue
        # nugget_idx is the position in the file, so a skipped nugget never renumbers the others.
        rows.append({"release_id": release_id, "arxiv_id": q.arxiv_id, "nugget_idx": idx, "text": text,
                     "importance": importance, "judge_config": NUGGET_JUDGE_CONFIG})
    return rows


# ------------------------------------------------------------------------------------------------ API


def import_official(engine: Engine, directory: Path, release_id: str) -> ImportSummary:
    """Load a DeepScholar-bench dataset directory (dataset/ + nuggets/) as a published release."""
    started = time.perf_counter()
    directory = Path(directory)
    summary = ImportSummary(release_id=release_id, directory=str(directory.resolve()))
    papers_path, citations_path, important_path = _dataset_files(directory, summary)
    papers_df, cites_df = _read_tables(papers_path, citations_path)
    summary.n_rows = len(papers_df)
    queries, versioned = _parse_queries(papers_df, release_id, papers_path.name, summary)
    labels = _importance_labels(important_path, summary) if summary.important_file else {}
    _attach_references(cites_df, queries, labels, release_id, citations_path.name, summary)
    _attach_nuggets(directory / "nuggets", queries, versioned, release_id, summary)

    _write(engine, release_id, queries, summary, papers_path, citations_path)
    summary.duration_seconds = round(time.perf_counter() - started, 3)
    log.info("official import %s: %d/%d queries, %d references, %d nuggets, %d corpus papers, %d errors (%.2f s)",
             release_id, summary.n_queries, summary.n_rows, summary.n_references, summary.n_nuggets,
             summary.n_corpus, summary.n_errors, summary.duration_seconds)
    return summary


def _dataset_files(directory: Path, summary: ImportSummary) -> tuple[Path, Path, Path]:
    """The papers, citations and importance files of the dataset (the last one may be missing)."""
    dataset = directory / "dataset" if (directory / "dataset").is_dir() else directory
    papers_path = dataset / _PAPERS_FILE
    if not papers_path.is_file():
        raise OfficialImportError(f"{papers_path} not found")
    citations_path = next((dataset / f for f in _CITATION_FILES if (dataset / f).is_file()), None)
    if citations_path is None:
        raise OfficialImportError(f"none of {_CITATION_FILES} in {dataset}")
    important_path = dataset / _IMPORTANT_FILE
    summary.citations_file = citations_path.name
    summary.important_file = important_path.name if important_path.is_file() else None
    return papers_path, citations_path, important_path


def _read_tables(papers_path: Path, citations_path: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The papers and citations tables, their required columns checked, optional bib columns filled."""
    papers_df = _read_csv(papers_path)
    _require(papers_df, ["arxiv_id", "title", "authors", "abstract", "categories", "published_date",
                         "raw_latex_related_works", "clean_latex_related_works"], papers_path)
    cites_df = _read_csv(citations_path)
    _require(cites_df, ["parent_paper_arxiv_id", "citation_shorthand", "cited_paper_title",
                        "cited_paper_arxiv_link", "cited_paper_abstract"], citations_path)
    for col in ("bib_paper_authors", "bib_paper_year", "bib_paper_url", "bib_paper_doi", "bib_paper_journal"):
        if col not in cites_df.columns:
            cites_df[col] = ""
    return papers_df, cites_df


def _parse_queries(papers_df: pd.DataFrame, release_id: str, source_file: str,
                   summary: ImportSummary) -> tuple[dict[str, _Query], dict[str, str]]:
    """Queries keyed by arXiv id (row_index is the 0-based CSV row), and each one's id as the file writes
    it (with its version)."""
    queries: dict[str, _Query] = {}
    versioned: dict[str, str] = {}
    for i, row in papers_df.iterrows():
        try:
            q = _parse_query_row(int(i), row, release_id, source_file)
        except Exception as exc:  # a bad row is recorded, never fatal
            summary.error(source_file, int(i), row.get("arxiv_id"), str(exc))
            continue
        if q.arxiv_id in queries:
            summary.error(source_file, int(i), q.arxiv_id,
                          f"duplicate of row {queries[q.arxiv_id].row_index}; first row kept")
            continue
        queries[q.arxiv_id] = q
        versioned[q.arxiv_id] = row["arxiv_id"].strip()
    return queries, versioned


def _attach_references(cites_df: pd.DataFrame, queries: dict[str, _Query], labels: dict[tuple[str, str], bool],
                       release_id: str, source_file: str, summary: ImportSummary) -> None:
    """References, attached to their query by the parent's arXiv id (never by row order)."""
    for i, row in cites_df.iterrows():
        parent = arxiv_id_from_link(row["parent_paper_arxiv_id"])
        key = row["citation_shorthand"].strip()
        if parent is None or parent[0] not in queries:
            summary.error(source_file, int(i), row["parent_paper_arxiv_id"],
                          "parent paper is not an imported query")
            continue
        if not key:
            summary.error(source_file, int(i), parent[0], "empty citation_shorthand")
            continue
        q = queries[parent[0]]
        if any(r["cite_key"] == key for r in q.references):
            summary.error(source_file, int(i), q.arxiv_id, f"duplicate cite key {key!r}; first row kept")
            continue
        ref, corpus = _reference_row(row, release_id, q.arxiv_id, key)
        if labels:
            ref["is_important"] = labels.get((q.arxiv_id, key), False)
            ref["importance_judge"] = IMPORTANCE_JUDGE
        q.references.append(ref)
        if corpus:
            q.cited_corpus.append(corpus)


def _attach_nuggets(nuggets_dir: Path, queries: dict[str, _Query], versioned: dict[str, str], release_id: str,
                    summary: ImportSummary) -> None:
    """Each query's nuggets from its file in nuggets/; files that match no query are counted and logged."""
    if not nuggets_dir.is_dir():
        log.warning("official import %s: no nuggets/ folder in %s", release_id, nuggets_dir.parent)
        return
    for q in queries.values():
        path = _nugget_file(nuggets_dir, q, versioned[q.arxiv_id])
        if path is None:
            summary.error("nuggets/", None, q.arxiv_id, "no nugget file for this query")
            continue
        q.nuggets = _parse_nuggets(path, q, release_id, summary)
    used = {f"{versioned[a]}.json" for a in queries} | {f"{a}.json" for a in queries}
    unmatched = sorted(p.name for p in nuggets_dir.glob("*.json") if p.name not in used)
    summary.n_unmatched_nugget_files = len(unmatched)
    if unmatched:
        log.warning("official import %s: %d nugget files match no imported query: %s", release_id,
                    len(unmatched), ", ".join(unmatched[:10]))


def _write(engine: Engine, release_id: str, queries: dict[str, _Query], summary: ImportSummary,
           papers_path: Path, citations_path: Path) -> None:
    published = [q.paper["published"] for q in queries.values() if q.paper["published"] is not None]
    # Half-open [start, end) like pipeline releases: whole days around the papers' v1 dates.
    window_start = min(published).replace(hour=0, minute=0, second=0, microsecond=0) if published else None
    window_end = (max(published).replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)
                  if published else None)
    config = {
        "source": "official_import", "source_dir": summary.directory, "papers_file": papers_path.name,
        "citations_file": citations_path.name, "important_file": summary.important_file,
        "nugget_judge_config": NUGGET_JUDGE_CONFIG, "imported_at": utc_now().isoformat(),
    }
    row = {"source": "official", "window_start": window_start, "window_end": window_end, "config": config,
           "code_version": _code_version()}
    base, named_version = parse_version(release_id)
    if named_version is not None:
        raise OfficialImportError(f"import under the dataset's name ({base!r}), not a version of it: a changed "
                                  "re-import becomes the next version by itself")
    # One transaction: a crash never leaves a published release with half its queries; each query
    # sits in its own savepoint so a row the database refuses only costs that query.
    with engine.connect() as conn, conn.begin() as transaction, versions_locked(conn, base):
        existing = conn.execute(sa.text(f"SELECT source FROM {db.SCHEMA}.releases WHERE release_id = :r"),
                                {"r": base}).scalar()
        if existing is not None and existing != "official":
            raise OfficialImportError(f"release {base!r} exists and is a {existing} release")
        latest = latest_version(conn, base)
        if latest is not None and latest.sealed:
            target = open_next_version(conn, latest, f"re-import of {summary.directory}", row)
        else:
            target = latest.release_id if latest else base
            db.upsert(conn, "releases", [row | {"release_id": target, "status": "building"}], key=["release_id"])
        summary.release_id = target
        _write_queries(conn, target, queries, summary, papers_path)
        if latest is not None and latest.sealed and manifest_hash(conn, target) == latest.manifest_hash:
            transaction.rollback()  # the new version would hold exactly the sealed rows: keep nothing
            summary.release_id, summary.version, summary.manifest_hash = (latest.release_id, latest.version,
                                                                          latest.manifest_hash)
            summary.unchanged = True
            summary.note = (f"identical to the sealed release {latest.release_id} (manifest "
                            f"{latest.manifest_hash[:12]}): nothing changed")
            return
        conn.execute(sa.text(
            f"UPDATE {db.SCHEMA}.releases SET counts = CAST(:c AS jsonb), error = :e, updated_at = now() "
            "WHERE release_id = :r"),
            {"c": json.dumps(summary.counts()), "r": target,
             "e": f"{summary.n_errors} rows skipped on import" if summary.n_errors else None})
        # The authors published it already: the release is published (and sealed) on import, not by our gate.
        sealed = seal(conn, target)
        summary.version = parse_version(target)[1] or 1
        summary.manifest_hash = sealed["manifest_hash"]
        summary.note = sealed.get("changes", "")


def _write_queries(conn: sa.Connection, release_id: str, queries: dict[str, _Query], summary: ImportSummary,
                   papers_path: Path) -> None:
    corpus_ids: set[str] = set()
    paper_ids: set[tuple[str, int]] = set()
    for q in progress(queries.values(), f"official import {release_id}: queries written", len(queries)):
        savepoint = conn.begin_nested()
        try:
            _write_query(conn, q, queries, release_id)
        except sa.exc.DBAPIError as exc:
            savepoint.rollback()
            summary.error(papers_path.name, q.row_index, q.arxiv_id, f"database refused the query: {exc.orig}")
            continue
        savepoint.commit()
        summary.n_queries += 1
        summary.n_references += len(q.references)
        summary.n_important_labels += sum(1 for r in q.references if r["is_important"])
        summary.n_nuggets += len(q.nuggets)
        paper_ids.add((q.arxiv_id, q.version))
        corpus_ids.update({q.arxiv_id, *(c["arxiv_id"] for c in q.cited_corpus)})
    summary.n_papers = len(paper_ids)
    summary.n_corpus = len(corpus_ids)


def _write_query(conn: sa.Connection, q: _Query, queries: dict[str, _Query], release_id: str) -> None:
    """One query's rows, under `release_id` (the version being written, which may not be the parsed one)."""
    db.upsert(conn, "papers", [q.paper], key=["arxiv_id", "version"])
    # The query paper's own row is the richest we have: it wins over a cited-paper stub.
    db.upsert(conn, "corpus", [{
        "arxiv_id": q.arxiv_id, "title": q.paper["title"], "abstract": q.paper["abstract"],
        "authors": q.paper["authors"], "published": q.paper["published"],
        "categories": q.paper["categories"], "source": CORPUS_SOURCE,
    }], key=["arxiv_id"], update=["title", "abstract", "authors", "published", "categories"])
    cited = {c["arxiv_id"]: c for c in q.cited_corpus if c["arxiv_id"] not in queries}
    # First write wins for cited papers: a search-result row carries more than this stub.
    db.upsert(conn, "corpus", list(cited.values()), key=["arxiv_id"], update=[])
    db.upsert(conn, "release_queries", [q.query | {"release_id": release_id}], key=["release_id", "arxiv_id"])
    db.upsert(conn, "exemplar_references", [r | {"release_id": release_id} for r in q.references],
              key=["release_id", "arxiv_id", "cite_key"])
    db.upsert(conn, "nuggets", [n | {"release_id": release_id} for n in q.nuggets],
              key=["release_id", "arxiv_id", "nugget_idx"])


def _code_version() -> str | None:
    try:
        from importlib.metadata import version

        return version("deepscholar")
    except Exception:
        return None
