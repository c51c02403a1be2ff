"""The monthly release pipeline, one function per step, each resumable: it does only the work still
missing, so a retried task or a re-run month changes nothing, and a bad paper never stops the month.

Design notes: docs/MODULE_NOTES.md, `deepscholar.release.steps`.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar.release import discovery, extraction, labelling, track_artefacts
from deepscholar.release.candidates import release_counts
from deepscholar.release.context import ReleaseContext, open_release
from deepscholar.release.licences import fetch_licences
from deepscholar.release.shards import Shard, run_sharded
from deepscholar.release.spec import ReleaseSpec
from deepscholar.release.track_artefacts import artefact_tracks
from deepscholar.release.versions import refuse_sealed
from deepscholar.settings import Settings

__all__ = [
    "ReleaseContext",
    "ReleaseSpec",
    "build_release",
    "build_track_artefacts",
    "enrich_release",
    "extract_exemplars",
    "fetch_licences",
    "filter_candidates",
    "finish_extraction",
    "gate_release",
    "label_importance",
    "nuggetize_exemplars",
    "open_release",
    "publish",
    "release_counts",
    "resolve_references",
    "run_sharded",
    "search_candidates",
]

log = logging.getLogger("deepscholar.release")


def _guarded(step: Callable[..., Any]) -> Callable[..., Any]:
    """A step that, run again on a sealed (published) release id, fails with one clear line (ReleaseSealed:
    a correction is a new version) rather than the seal trigger's IntegrityError."""
    @functools.wraps(step)
    def run(ctx: ReleaseContext, *args, **kwargs):
        with refuse_sealed(ctx.release_id):
            return step(ctx, *args, **kwargs)
    return run


def _budgeted(step: Callable[..., Any]) -> Callable[..., Any]:
    """A step that asks the release judge, paid from the release's budget: every answer is billed to the
    release (llm/spend.py scope `release/<id>`), and the step stops (OverBudget, what it stored so far kept)
    once they pass DEEPSCHOLAR_RELEASE_JUDGE_BUDGET_USD (no margin: nothing predicted here can be wrong; at most
    the requests in flight pass it). The local judge costs nothing: no limit."""
    @functools.wraps(step)
    def run(ctx: ReleaseContext, *args, **kwargs):
        from deepscholar.llm.spend import billing, scope_limit, scope_of, spend_limit

        scope = scope_of("release", ctx.release_id)
        budget = None if ctx.spec.judge == "local" else ctx.settings.release_judge_budget_usd
        limit = scope_limit(ctx.engine, scope, budget, f"release-time judging of {ctx.release_id} under {ctx.spec.judge}",
                            "; raise DEEPSCHOLAR_RELEASE_JUDGE_BUDGET_USD and run the step again")
        with billing(scope), spend_limit(limit):
            return step(ctx, *args, **kwargs)
    return run


search_candidates = _guarded(discovery.search_candidates)
filter_candidates = _guarded(discovery.filter_candidates)
extract_exemplars = _guarded(extraction.extract_exemplars)
finish_extraction = _guarded(extraction.finish_extraction)
label_importance = _guarded(_budgeted(labelling.label_importance))
nuggetize_exemplars = _guarded(_budgeted(labelling.nuggetize_exemplars))
build_track_artefacts = _budgeted(track_artefacts.build_track_artefacts)
enrich_release = _budgeted(track_artefacts.enrich_release)


# --- 6. resolve references ------------------------------------------------------------------------------

@_guarded
def resolve_references(ctx: ReleaseContext, shard: Shard | None = None) -> dict:
    """Each pending reference to an arXiv paper and an OpenAlex work, in batches (release/resolution.py);
    `shard` (k, n): only the references of every n-th query paper."""
    from deepscholar.release.resolution import resolve_pending

    return resolve_pending(ctx, shard)


# --- 7b. the tracks' release-time artefacts (release/track_artefacts.py) ------------------------------------

def build_artefacts_of_tracks(ctx: ReleaseContext) -> dict:
    """Every artefact track the month is built for (spec.tracks), in order."""
    return {track: build_track_artefacts(ctx, track) for track in artefact_tracks(ctx.spec.tracks)}


# --- 7c. licences of the kept papers (release/licences.py: fetch_licences, after the extraction) ---------------

# --- 8. gate and publish ---------------------------------------------------------------------------------

def gate_release(ctx: ReleaseContext):
    from deepscholar.release.quality import apply_gate, run_release_gate
    from deepscholar.release.track_artefacts import record_check

    result = run_release_gate(ctx.engine, ctx.release_id, ctx.spec)
    apply_gate(ctx.engine, ctx.release_id, result)
    record_check(ctx.engine, ctx.release_id, artefact_tracks(ctx.spec.tracks), result)
    with ctx.engine.begin() as conn:
        conn.execute(sa.text("UPDATE releases SET counts = CAST(:c AS jsonb) WHERE release_id = :r"),
                     {"c": json.dumps(release_counts(conn, ctx.release_id)), "r": ctx.release_id})
    return result


def publish(ctx: ReleaseContext) -> dict:
    from deepscholar.release.quality import publish_release

    publish_release(ctx.engine, ctx.release_id)
    with ctx.engine.connect() as conn:
        counts = release_counts(conn, ctx.release_id)
    log.info("published release %s: %s", ctx.release_id, counts)
    return counts


# --- the whole month -------------------------------------------------------------------------------------

def build_release(engine: Engine, month: str, spec: ReleaseSpec, settings: Settings | None = None,
                  reason: str | None = None) -> dict:
    """Every step in order, outside Airflow (the DAG calls the same functions one task each); `settings`
    (default: this process's) say where the services are. A sealed month is built as its next version
    (`reason` goes in its changelog); the result's `release_id` says which version was built."""
    ctx = open_release(engine, month, spec, settings, reason=reason)
    search_candidates(ctx)
    filter_candidates(ctx)
    run_sharded(ctx, extract_exemplars, resolve=True)
    finish_extraction(ctx)
    run_sharded(ctx, resolve_references)
    label_importance(ctx)
    nuggetize_exemplars(ctx)
    build_artefacts_of_tracks(ctx)
    fetch_licences(ctx)
    result = gate_release(ctx)
    if result.success:
        publish(ctx)
    with engine.connect() as conn:
        return release_counts(conn, ctx.release_id) | {"gx_success": result.success, "release_id": ctx.release_id}
