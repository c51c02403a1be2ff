"""The release's candidate papers (table release_candidates) and the counts a release reports."""

from __future__ import annotations

import sqlalchemy as sa

from deepscholar import db

__all__ = ["STAGES", "candidates_at", "kept_count", "release_counts", "set_candidates"]

# Stages a candidate passes through, in order; a skipped candidate keeps the stage that dropped it.
STAGES = ("search", "version", "venue", "source", "section", "bibliography", "kept")

_CANDIDATE_DEFAULTS = {"reason": None, "detail": None}


def set_candidates(conn: sa.Connection, release_id: str, rows: list[dict]) -> None:
    """Record candidate outcomes; venue columns are written only by the filter step that finds them."""
    for venue_known in (True, False):
        batch = [{"release_id": release_id, **_CANDIDATE_DEFAULTS, **r} for r in rows
                 if ("venue" in r) == venue_known]
        db.upsert(conn, "release_candidates", batch, key=["release_id", "arxiv_id"])


def candidates_at(conn: sa.Connection, release_id: str, stage: str, statuses=("pending", "error")) -> list[dict]:
    """Candidates at `stage`, in the month's sample order (release/sampling.py), then by id."""
    return [dict(r) for r in conn.execute(sa.text(
        "SELECT c.*, p.comment, p.journal_ref, p.title, p.abstract, p.authors, p.published, p.primary_category "
        "FROM release_candidates c JOIN papers p USING (arxiv_id, version) "
        "WHERE c.release_id = :r AND c.stage = :s AND c.status = ANY(:st) "
        "ORDER BY c.sample_rank NULLS LAST, c.arxiv_id"),
        {"r": release_id, "s": stage, "st": list(statuses)}).mappings()]


def kept_count(conn: sa.Connection, release_id: str) -> int:
    return conn.execute(sa.text("SELECT count(*) FROM release_candidates WHERE release_id = :r "
                                "AND status = 'kept'"), {"r": release_id}).scalar_one()


def release_counts(conn: sa.Connection, release_id: str) -> dict:
    """The figures users look at: papers seen and kept per filter, queries, references, nuggets."""
    one = conn.execute(sa.text("""
        SELECT
          (SELECT count(*) FROM release_candidates WHERE release_id = :r) AS papers_seen,
          (SELECT count(*) FROM release_queries WHERE release_id = :r) AS queries,
          (SELECT count(*) FROM exemplar_references WHERE release_id = :r) AS references,
          (SELECT count(*) FROM exemplar_references WHERE release_id = :r
             AND (resolved_arxiv_id IS NOT NULL OR openalex_id IS NOT NULL)) AS resolved,
          (SELECT count(*) FROM exemplar_references WHERE release_id = :r AND resolved_arxiv_id IS NOT NULL)
             AS resolved_arxiv,
          (SELECT count(*) FROM exemplar_references WHERE release_id = :r AND is_important) AS important,
          (SELECT count(*) FROM nuggets WHERE release_id = :r) AS nuggets,
          (SELECT count(*) FROM nuggets WHERE release_id = :r AND importance = 'vital') AS vital_nuggets
    """), {"r": release_id}).mappings().one()
    dropped = conn.execute(sa.text(
        "SELECT coalesce(reason, status) AS reason, count(*) AS n FROM release_candidates "
        "WHERE release_id = :r AND status <> 'kept' GROUP BY 1 ORDER BY 1"), {"r": release_id}).all()
    return dict(one) | {"dropped": {r.reason: r.n for r in dropped}}
