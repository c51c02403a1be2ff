"""Resolve the month's cited references to arXiv papers and OpenAlex works, in batches.

Design notes: docs/MODULE_NOTES.md, `deepscholar.release.resolution`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import sqlalchemy as sa

from deepscholar import db
from deepscholar.errors import InfrastructureError
from deepscholar.progress import Progress

if TYPE_CHECKING:
    from deepscholar.sources.arxiv import ArxivPaper
    from deepscholar.sources.openalex import OpenAlexWork

log = logging.getLogger("deepscholar.release")

CHUNK = 50


@dataclass(frozen=True)
class CachedPaper:
    """The corpus row of a paper a cached resolution points at (the fields an ArxivPaper gives)."""

    arxiv_id: str
    title: str
    abstract: str
    authors: list
    published: object
    categories: list
    doi: str | None


@dataclass
class _Ref:
    """One reference on its way through the lookups."""

    row: dict
    bib_arxiv_id: str | None = None
    paper: ArxivPaper | CachedPaper | None = None
    method: str | None = None
    work: OpenAlexWork | None = None
    errors: list[str] = field(default_factory=list)
    from_cache: bool = False

    def cache_keys(self) -> list[tuple[str, str]]:
        """Lookup keys, most specific first: DOI, arXiv id; the normalised title (4 words or more) only for
        an entry with neither — as a fresh lookup searches by title only then, and two papers may share
        a title."""
        from deepscholar.sources.openalex import bare_doi
        from deepscholar.text import normalise_title, strip_arxiv_version

        keys = []
        if doi := bare_doi(self.row["bib_doi"]):
            keys.append(("doi", doi))
        if self.bib_arxiv_id:
            keys.append(("arxiv", strip_arxiv_version(self.bib_arxiv_id)[0]))
        title = normalise_title(self.row["bib_title"])
        if not keys and len(title.split()) >= 4:
            keys.append(("title", title))
        return keys

    @property
    def key(self) -> tuple[str, str]:
        return self.row["arxiv_id"], self.row["cite_key"]

    def doi(self) -> str | None:
        paper = self.paper
        return self.row["bib_doi"] or (paper.doi if paper else None) or (
            f"10.48550/arXiv.{paper.arxiv_id}" if paper else None)


def pending_references(engine, release_id: str, papers: list[str] | None = None) -> list[dict]:
    """References not yet resolved (of the query papers `papers` only, when given)."""
    with engine.connect() as conn:
        return [dict(r) for r in conn.execute(sa.text(
            "SELECT * FROM exemplar_references WHERE release_id = :r AND resolution_method IS NULL "
            "AND (CAST(:papers AS text[]) IS NULL OR arxiv_id = ANY(CAST(:papers AS text[]))) "
            "ORDER BY arxiv_id, cite_key"), {"r": release_id, "papers": papers}).mappings()]


def _bib_arxiv_id(row: dict) -> str | None:
    from deepscholar.sources.bibliography import BibEntry, arxiv_id_from_entry

    fields = row["bib_fields"] or {}
    entry = BibEntry(key=row["cite_key"], entry_type=row["bib_type"] or "misc", title=row["bib_title"] or "",
                     authors=row["bib_authors"] or "", year=row["bib_year"], doi=row["bib_doi"],
                     eprint=fields.get("eprint"), url=row["bib_url"], journal=fields.get("journal"),
                     raw_fields=fields, source_file=None)
    return arxiv_id_from_entry(entry)


def _guarded(ref_list: list[_Ref], service: str, call):
    """Run a batched lookup; a failure that is not the host's breaker is every listed reference's error."""
    try:
        return call()
    except InfrastructureError:
        raise
    except Exception as exc:
        detail = " ".join(str(exc).split())
        detail = detail if len(detail) <= 300 else detail[:297] + "..."  # a batch's URL lists 50 DOIs
        for ref in ref_list:
            ref.errors.append(f"{service}: {detail}")
        return None


def resolve_pending(ctx, shard=None, papers: list[str] | None = None) -> dict:
    """Resolve every pending reference of the release (of slice `shard` (k, n) only, when given: the
    references of every n-th query paper; of the query papers `papers` only, when given, with no progress
    lines: extraction resolves each batch of papers it keeps this way); returns counts per outcome."""
    from deepscholar.release.shards import in_shard, shard_label
    from deepscholar.sources.arxiv import ArxivSource
    from deepscholar.sources.openalex import OpenAlexSource

    spec, settings = ctx.spec, ctx.settings
    arxiv = ArxivSource(api_url=settings.arxiv_api_url, delay_seconds=settings.arxiv_delay_seconds)
    openalex = OpenAlexSource(base_url=settings.openalex_url, email=settings.openalex_email)
    todo = in_shard(pending_references(ctx.engine, ctx.release_id, papers), shard)
    label = f"resolve references of {ctx.release_id} {shard_label(shard)}".rstrip()
    if papers is None:
        log.info("%s: %d references to resolve", label, len(todo))
    counts = {"arxiv": 0, "openalex": 0, "unresolved": 0}
    failed: list[str] = []
    tracker = Progress(label, len(todo)) if papers is None else None
    for start in range(0, len(todo), CHUNK):
        chunk = [_Ref(row) for row in todo[start:start + CHUNK]]
        for ref in chunk:
            ref.bib_arxiv_id = _bib_arxiv_id(ref.row)
        cached = _from_cache(ctx.engine, chunk, openalex)
        _resolve_chunk([r for r in chunk if not r.from_cache], arxiv, openalex, spec.title_match_threshold)
        counts["from_cache"] = counts.get("from_cache", 0) + cached
        for ref in chunk:
            outcome = _store(ctx, ref)
            if outcome == "failed":
                failed.append(f"{ref.key[0]}/{ref.key[1]}: {'; '.join(ref.errors)}")
            elif outcome != "gone":
                counts[outcome] += 1
            if tracker is not None:
                tracker.advance(note=", ".join(f"{k} {v}" for k, v in counts.items()))
    if failed:
        # Every other reference is stored; failing the step makes Airflow retry it, and the retry looks up
        # only these (a month never goes on with references nobody could look up).
        raise InfrastructureError("reference lookups", f"{len(failed)} of {len(todo)} references could not be "
                                  f"looked up and stay pending, e.g. {failed[0]}")
    return counts


def _resolve_chunk(chunk: list[_Ref], arxiv, openalex, threshold: float) -> None:
    # 1. arXiv ids named by the bib entries: one request per 100 ids.
    named = [r for r in chunk if r.bib_arxiv_id]
    named_ids = sorted({r.bib_arxiv_id for r in named if r.bib_arxiv_id})
    papers = _guarded(named, "arxiv", lambda: arxiv.get_by_ids(named_ids)) if named else []
    by_id = {p.arxiv_id: p for p in papers or []}
    for ref in named:
        if ref.bib_arxiv_id in by_id:
            ref.paper, ref.method = by_id[ref.bib_arxiv_id], "bib_arxiv_id"

    # 2. arXiv title search for entries with a title and neither an id found nor a DOI: ten titles per
    #    request, a title the batch missed once more alone by its words (ArxivSource.match_titles).
    by_title = [r for r in chunk if r.paper is None and r.row["bib_title"] and not r.row["bib_doi"]]
    matches = _guarded(by_title, "arxiv", lambda: arxiv.match_titles([r.row["bib_title"] for r in by_title],
                                                                     threshold)) if by_title else {}
    for ref in by_title:
        best = (matches or {}).get(ref.row["bib_title"])
        if best is not None:
            ref.paper, ref.method = best, "arxiv_title_search"

    # 3. OpenAlex by DOI: one request per 50 DOIs.
    with_doi = [r for r in chunk if r.doi()]
    works = _guarded(with_doi, "openalex", lambda: openalex.works_by_dois([r.doi() for r in with_doi])) \
        if with_doi else {}
    if works is not None:
        from deepscholar.sources.openalex import bare_doi

        for ref in with_doi:
            ref.work = works.get(bare_doi(ref.doi()))

    # 4. OpenAlex by title for the rest (those whose DOI lookup failed wait for the retry).
    for ref in chunk:
        if ref.work is not None or ref.errors or not (ref.row["bib_title"] or ref.paper):
            continue
        title = ref.paper.title if ref.paper else ref.row["bib_title"]
        ref.work = _guarded([ref], "openalex", lambda t=title: openalex.best_title_match(t, threshold=threshold))

    # 5. Papers that only OpenAlex knew the arXiv id of.
    via_openalex = [(r, r.work.arxiv_id) for r in chunk
                    if r.paper is None and r.work is not None and r.work.arxiv_id]
    if via_openalex:
        found = _guarded([r for r, _ in via_openalex], "arxiv",
                         lambda: arxiv.get_by_ids(sorted({a for _, a in via_openalex}))) or []
        by_id = {p.arxiv_id: p for p in found}
        for ref, work_arxiv_id in via_openalex:
            ref.method = "openalex_arxiv_id"
            ref.paper = by_id.get(work_arxiv_id)


def _from_cache(engine, chunk: list[_Ref], openalex) -> int:
    """Take the identity of every reference whose key an earlier resolution cached; fetch the cached
    works' current cited-by counts in one batched request. Returns how many references it settled."""
    keys = {key for ref in chunk for key in ref.cache_keys()}
    if not keys:
        return 0
    with engine.connect() as conn:
        hits = {(r.key_kind, r.key): r for r in conn.execute(sa.text(
            "SELECT * FROM resolution_cache WHERE (key_kind, key) IN "
            "(SELECT * FROM unnest(CAST(:kinds AS text[]), CAST(:keys AS text[])))"),
            {"kinds": [k for k, _ in keys], "keys": [v for _, v in keys]})}
        chosen = {}
        for ref in chunk:
            hit = next((hits[k] for k in ref.cache_keys() if k in hits), None)
            if hit is not None:
                chosen[ref.key] = hit
        ids = sorted({h.resolved_arxiv_id for h in chosen.values() if h.resolved_arxiv_id})
        papers = {r.arxiv_id: CachedPaper(r.arxiv_id, r.title, r.abstract, r.authors, r.published, r.categories,
                                          r.doi) for r in conn.execute(sa.text(
                  "SELECT arxiv_id, title, abstract, authors, published, categories, doi FROM corpus "
                  "WHERE arxiv_id = ANY(:ids)"), {"ids": ids})}
    if not chosen:
        return 0
    wanted = [h.openalex_id for h in chosen.values() if h.openalex_id]
    with_work = [r for r in chunk if r.key in chosen and chosen[r.key].openalex_id]
    works = _guarded(with_work, "openalex", lambda: openalex.works_by_ids(wanted)) if wanted else {}
    settled = 0
    for ref in chunk:
        hit = chosen.get(ref.key)
        if hit is None or ref.errors:
            continue
        paper = papers.get(hit.resolved_arxiv_id) if hit.resolved_arxiv_id else None
        work = (works or {}).get(hit.openalex_id) if hit.openalex_id else None
        if (hit.resolved_arxiv_id and paper is None) or (hit.openalex_id and work is None):
            continue  # the cached paper or work is gone: look the reference up afresh
        ref.paper, ref.work, ref.method, ref.from_cache = paper, work, f"cache_{hit.key_kind}", True
        settled += 1
    return settled


def _remember(conn, ctx, ref: _Ref, row: dict) -> None:
    """Cache what a freshly resolved reference led to, under each of its keys."""
    if ref.from_cache or ref.errors or row["resolution_method"] in (None, "unresolved"):
        return
    if not (row.get("resolved_arxiv_id") or row.get("openalex_id")):
        return
    db.upsert(conn, "resolution_cache", [
        {"key_kind": kind, "key": key, "resolved_arxiv_id": row.get("resolved_arxiv_id"),
         "openalex_id": row.get("openalex_id"), "resolution_method": row["resolution_method"],
         # Sorted: shards caching overlapping keys at once lock them in one order (no deadlock).
         "first_release_id": ctx.release_id} for kind, key in sorted(set(ref.cache_keys()))],
        key=["key_kind", "key"], update=["resolved_arxiv_id", "openalex_id", "resolution_method"])


def _store(ctx, ref: _Ref) -> str:
    """Upsert the reference's outcome (and its paper into the corpus); returns the counted outcome."""
    from deepscholar.release.discovery import corpus_row

    row = {"release_id": ctx.release_id, "arxiv_id": ref.key[0], "cite_key": ref.key[1]}
    paper, work, method = ref.paper, ref.work, ref.method
    if paper is not None:
        row |= {"resolved_arxiv_id": paper.arxiv_id, "resolved_title": paper.title,
                "resolved_abstract": paper.abstract, "resolved_doi": paper.doi or (work.doi if work else None)}
        outcome = "arxiv"
    elif work is not None:
        method = method if ref.from_cache else "openalex"
        row |= {"resolved_title": work.title, "resolved_abstract": work.abstract, "resolved_doi": work.doi}
        outcome = "openalex"
    else:
        outcome = "unresolved"
    if work is not None:
        row |= {"openalex_id": work.openalex_id, "cited_by_count": work.cited_by_count}
    # A lookup that failed leaves the reference pending even when arXiv found it: stored as resolved, it
    # would never be looked up again and would keep no cited-by count.
    row["resolution_method"] = None if ref.errors else (method or "unresolved")
    row["resolution_error"] = "; ".join(ref.errors) or None
    key = ("release_id", "arxiv_id", "cite_key")
    values = {k: v for k, v in row.items() if k not in key}
    with ctx.engine.begin() as conn:
        # An UPDATE, not an upsert: the row exists since extraction, unless its paper has just left the
        # release (a slice dropped it past the cap) — then there is nothing to store.
        updated = conn.execute(sa.text(
            f"UPDATE exemplar_references SET {', '.join(f'{c} = :{c}' for c in values)}, updated_at = now() "
            "WHERE release_id = :release_id AND arxiv_id = :arxiv_id AND cite_key = :cite_key"), row).rowcount
        if not updated:
            return "gone"
        _remember(conn, ctx, ref, row)
        if paper is not None:
            db.upsert(conn, "corpus", [corpus_row(paper, "reference")], key=["arxiv_id"], update=[])
    return "failed" if ref.errors else outcome
