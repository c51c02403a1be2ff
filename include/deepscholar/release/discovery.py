"""Steps 1 and 2: the month's category search, then the version and venue filters and the sample order."""

from __future__ import annotations

import logging

import sqlalchemy as sa

from deepscholar import db
from deepscholar.release.candidates import candidates_at, set_candidates
from deepscholar.release.context import ReleaseContext
from deepscholar.release.window import month_window

__all__ = ["corpus_row", "filter_candidates", "search_candidates"]

log = logging.getLogger("deepscholar.release")


def search_candidates(ctx: ReleaseContext) -> dict:
    """Every paper the month's category search returns is stored, whatever happens to it later."""
    from deepscholar.sources.arxiv import ArxivSource

    spec, settings = ctx.spec, ctx.settings
    start, end = month_window(ctx.release_id)
    source = ArxivSource(api_url=settings.arxiv_api_url, delay_seconds=settings.arxiv_delay_seconds)
    papers = list(source.search_window(spec.categories, start, end))
    log.info("search: %d papers in %s for %s", len(papers), ctx.release_id, ", ".join(spec.categories))
    with ctx.engine.begin() as conn:
        db.upsert(conn, "papers", [_paper_row(p) for p in papers], key=["arxiv_id", "version"])
        db.upsert(conn, "corpus", [corpus_row(p, "search") for p in papers], key=["arxiv_id"], update=[])
        # A candidate already past the search stage keeps its state: re-runs do not reset it.
        db.upsert(conn, "release_candidates", [
            {"release_id": ctx.release_id, "arxiv_id": p.arxiv_id, "version": p.version,
             "stage": "search", "status": "pending"} for p in papers
        ], key=["release_id", "arxiv_id"], update=[])
    return {"papers_seen": len(papers)}


def _paper_row(p) -> dict:
    return {"arxiv_id": p.arxiv_id, "version": p.version, "title": p.title, "abstract": p.abstract,
            "authors": list(p.authors), "categories": list(p.categories), "primary_category": p.primary_category,
            "published": p.published, "updated": p.updated, "comment": p.comment, "journal_ref": p.journal_ref,
            "doi": p.doi}


def corpus_row(p, source: str) -> dict:
    return {"arxiv_id": p.arxiv_id, "title": p.title, "abstract": p.abstract, "authors": list(p.authors),
            "published": p.published, "categories": list(p.categories), "doi": p.doi, "source": source}


def filter_candidates(ctx: ReleaseContext) -> dict:
    """Keep v1 papers accepted or published at a venue; record the matched venue and phrase."""
    from deepscholar.sources.venues import DEFAULT_VENUES, detect_venue

    venues = ctx.spec.venues or DEFAULT_VENUES
    counts = {"not_v1": 0, "no_venue": 0, "passed": 0}
    with ctx.engine.begin() as conn:
        rows = []
        for c in candidates_at(conn, ctx.release_id, "search"):
            if c["version"] != 1:
                rows.append({"arxiv_id": c["arxiv_id"], "version": c["version"], "stage": "version",
                             "status": "skipped", "reason": "not_v1",
                             "detail": f"latest version is v{c['version']}"})
                counts["not_v1"] += 1
                continue
            match = detect_venue(c["comment"], c["journal_ref"], venues)
            if match is None and ctx.spec.require_venue:
                rows.append({"arxiv_id": c["arxiv_id"], "version": 1, "stage": "venue", "status": "skipped",
                             "reason": "no_venue", "detail": f"comment={c['comment']!r} journal_ref={c['journal_ref']!r}",
                             "venue": None, "venue_phrase": None, "venue_field": None})
                counts["no_venue"] += 1
                continue
            rows.append({"arxiv_id": c["arxiv_id"], "version": 1, "stage": "source", "status": "pending",
                         "reason": None, "detail": None,
                         "venue": match.venue if match else None, "venue_phrase": match.phrase if match else None,
                         "venue_field": match.field if match else None})
            counts["passed"] += 1
        set_candidates(conn, ctx.release_id, rows)
        _rank_for_sampling(conn, ctx)
    log.info("filters: %s", counts)
    return counts


# Candidates past the metadata filters, whatever happened to them since (they keep their rank).
_PASSED_FILTERS = "c.stage NOT IN ('search', 'version', 'venue')"


def _rank_for_sampling(conn: sa.Connection, ctx: ReleaseContext) -> None:
    """Give every candidate that passed the filters its place in the month's sample order."""
    from deepscholar.release.sampling import sample_order
    from deepscholar.release.versions import base_of

    passed = conn.execute(sa.text(
        f"SELECT c.arxiv_id, p.primary_category FROM release_candidates c JOIN papers p USING (arxiv_id, version) "
        f"WHERE c.release_id = :r AND {_PASSED_FILTERS}"), {"r": ctx.release_id}).all()
    # Seeded by the month, not the version: a correction (2025-06.v2) draws the sample its month drew.
    order = sample_order([(a, cat) for a, cat in passed], ctx.spec.sample_seed, base_of(ctx.release_id))
    if order:
        conn.execute(sa.text(
            "UPDATE release_candidates c SET sample_rank = o.rank FROM unnest(CAST(:ids AS text[])) "
            "WITH ORDINALITY AS o(arxiv_id, rank) WHERE c.release_id = :r AND c.arxiv_id = o.arxiv_id"),
            {"r": ctx.release_id, "ids": order})
