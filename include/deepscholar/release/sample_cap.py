"""The max_queries cap of extraction: where the month's sample ends, and the candidates past it."""

from __future__ import annotations

import logging

import sqlalchemy as sa

from deepscholar.release.candidates import kept_count, set_candidates
from deepscholar.release.context import ReleaseContext

__all__ = ["cutoff_rank", "drop_over_cap", "kept_now", "mark_not_sampled"]

log = logging.getLogger("deepscholar.release")


def kept_now(ctx: ReleaseContext) -> int:
    """Kept papers of the month so far, whichever shard kept them."""
    with ctx.engine.connect() as conn:
        return kept_count(conn, ctx.release_id)


def cutoff_rank(ctx: ReleaseContext, cap: int) -> int | None:
    """The sample rank of the cap-th kept paper: the sample's last place."""
    with ctx.engine.connect() as conn:
        return conn.execute(sa.text(
            "SELECT sample_rank FROM release_candidates WHERE release_id = :r AND status = 'kept' "
            "ORDER BY sample_rank NULLS LAST, arxiv_id OFFSET :n LIMIT 1"), {"r": ctx.release_id, "n": cap - 1}).scalar()


def mark_not_sampled(ctx: ReleaseContext, rest: list[dict], cap: int) -> int:
    """The cap is met: the candidates after the sample's last place are not downloaded at all.

    A candidate in error ranked before that place is retried by the next run and, if kept, takes the
    place of the last kept paper (drop_over_cap), so transient download failures do not bias the sample.
    """
    rows = [{"arxiv_id": c["arxiv_id"], "version": 1, "stage": "sample", "status": "skipped",
             "reason": "not_sampled", "detail": f"sample rank {c['sample_rank']}: {cap} queries were kept "
                                                "before this paper's turn (max_queries)"} for c in rest]
    with ctx.engine.begin() as conn:
        set_candidates(conn, ctx.release_id, rows)
    log.info("extraction: the cap of %d queries is met; %d candidates not sampled", cap, len(rows))
    return len(rows)


def drop_over_cap(ctx: ReleaseContext, cap: int) -> int:
    """Keep the first `cap` kept papers in sample order; later ones (kept before a retried paper ranked
    ahead of them was) leave the release. A published release is never changed."""
    with ctx.engine.begin() as conn:
        status = conn.execute(sa.text("SELECT status FROM releases WHERE release_id = :r"),
                              {"r": ctx.release_id}).scalar()
        if status == "published":
            return 0
        extra = list(conn.execute(sa.text(
            "SELECT arxiv_id, sample_rank FROM release_candidates WHERE release_id = :r AND status = 'kept' "
            "ORDER BY sample_rank NULLS LAST, arxiv_id OFFSET :cap"), {"r": ctx.release_id, "cap": cap}))
        if not extra:
            return 0
        ids = [a for a, _ in extra]
        for table in ("exemplar_references", "release_queries"):
            conn.execute(sa.text(f"DELETE FROM {table} WHERE release_id = :r AND arxiv_id = ANY(:ids)"),
                         {"r": ctx.release_id, "ids": ids})
        set_candidates(conn, ctx.release_id, [
            {"arxiv_id": a, "version": 1, "stage": "sample", "status": "skipped", "reason": "over_cap",
             "detail": f"sample rank {rank}: kept, then {cap} papers ranked before it were kept (max_queries)"}
            for a, rank in extra])
    log.info("extraction: %d kept papers ranked after the first %d leave the release", len(extra), cap)
    return len(extra)
