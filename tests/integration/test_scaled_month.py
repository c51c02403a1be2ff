"""A month made like a real one (replay/scale_snapshot.py, scaled down), released the way it is deployed:
extraction and resolution in slices at once, the hosts keeping their rate limits (real HTTP to the replay
server, real Postgres).

Checks what a month at scale depends on: the slices together stop at the cap and download no e-print of a
paper the sample does not reach, no host is ever asked faster than its interval, every reference is
looked up (title searches batched), and running the steps again asks nothing and changes nothing.
"""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa
from support.settings import replay_settings

from deepscholar.release import steps
from deepscholar.release.spec import ReleaseSpec
from deepscholar.replay.scale_snapshot import ScaleSpec, write_scale_snapshot
from deepscholar.replay.server import ReplayServer

pytestmark = pytest.mark.slow  # builds a scaled month

CAP = 20
# Small enough to run in seconds, large enough that a busy machine's thread wake-ups (tens of ms) stay
# well under the half interval at which the replay server throttles.
INTERVALS = {"/api/query": 0.1, "/e-print/": 0.1, "/works": 0.02}


@pytest.fixture(scope="module")
def scaled(tmp_path_factory):
    root = tmp_path_factory.mktemp("scaled")
    manifest = write_scale_snapshot(root, ScaleSpec(candidates=240, pass_share=0.25, refs_per_paper=12, seed=3))
    return root, manifest


def _counts(engine, month: str) -> dict:
    with engine.connect() as conn:
        return {table: conn.execute(sa.text(f"SELECT count(*) FROM {table} WHERE release_id = :r"),
                                    {"r": month}).scalar()
                for table in ("release_candidates", "release_queries", "exemplar_references")}


def _release(ctx) -> None:
    steps.run_sharded(ctx, steps.extract_exemplars, resolve=True)
    steps.finish_extraction(ctx)
    steps.run_sharded(ctx, steps.resolve_references)


def test_a_scaled_month_in_slices_keeps_the_cap_the_rate_limits_and_every_reference(engine, scaled, monkeypatch):
    root, manifest = scaled
    month = manifest["month"]
    monkeypatch.setenv("DEEPSCHOLAR_RELEASE_SHARDS", "3")
    monkeypatch.setenv("DEEPSCHOLAR_OPENALEX_INTERVAL_SECONDS", str(INTERVALS["/works"]))
    with ReplayServer(root) as server:
        server.app.min_intervals = dict(INTERVALS)
        spec = ReleaseSpec(categories=manifest["categories"], max_queries=CAP, sample_seed=1)
        ctx = steps.open_release(engine, month, spec,
                                 replay_settings(server, arxiv_delay_seconds=INTERVALS["/api/query"]))
        steps.search_candidates(ctx)
        steps.filter_candidates(ctx)
        _release(ctx)
        requests = server.requests
        pacing = json.loads(json.dumps(server.app.pacing))

        assert all(stats["throttled"] == 0 for stats in pacing.values()), pacing
        with engine.connect() as conn:
            by_reason = dict(conn.execute(sa.text(
                "SELECT coalesce(reason, status), count(*) FROM release_candidates WHERE release_id = :r "
                "GROUP BY 1"), {"r": month}).all())
            refs = conn.execute(sa.text(
                "SELECT resolution_method, count(*) FROM exemplar_references WHERE release_id = :r GROUP BY 1"),
                {"r": month}).all()
        assert by_reason["kept"] == CAP and by_reason.get("not_sampled", 0) > 0, by_reason
        # An e-print was fetched for each paper the sample reached, none for the papers it never reached.
        reached = sum(n for reason, n in by_reason.items() if reason not in ("not_sampled", "not_v1", "no_venue"))
        eprints = [r for r in requests if r.path.startswith("/e-print/")]
        assert len(eprints) == len({r.path for r in eprints}) == reached
        methods = dict(refs)
        assert None not in methods, "references left pending"
        total = sum(methods.values())
        assert methods.get("unresolved", 0) <= 0.15 * total, methods
        title_requests = [r for r in requests if r.path == "/api/query" and "search_query=ti" in r.query]
        assert len(title_requests) < methods.get("arxiv_title_search", 0), "title searches were not batched"

        before = _counts(engine, month)
        server.clear_requests()
        _release(ctx)
        assert server.requests == [] and _counts(engine, month) == before
