"""A reference resolved before is not searched for again; its cited-by count is still the new
release's own (real HTTP to the replay server, real PostgreSQL).

The demo month is resolved once, its release deleted (the cache stays), and built again a month later
from the same world, in which every paper has been cited more. The references must now come from
resolution_cache (no arXiv or OpenAlex title search for them), resolve to exactly what a warehouse
without the cache resolves them to, and carry the counts OpenAlex gives at the second build.
(Two demo months are two unrelated synthetic worlds — one title names different papers in each — so
one world built twice stands for "a later month cites the same papers".)
"""

from __future__ import annotations

import json
import shutil

import pytest
import sqlalchemy as sa
from support.settings import replay_settings
from support.warehouse import empty_warehouse

from deepscholar.release import steps
from deepscholar.release.spec import ReleaseSpec
from deepscholar.replay.demo_snapshot import write_demo_snapshot
from deepscholar.replay.server import ReplayServer

pytestmark = pytest.mark.slow  # builds releases twice

MONTH = "2025-06"


def _resolve(engine, snapshot, month: str) -> list:
    categories = json.loads((snapshot / "manifest.json").read_text())["categories"]
    with ReplayServer(snapshot) as server:
        ctx = steps.open_release(engine, month, ReleaseSpec(categories=categories), replay_settings(server))
        for step in (steps.search_candidates, steps.filter_candidates):
            step(ctx)
        server.clear_requests()
        # Extraction resolves the references of the papers it keeps as it goes; the resolve step the rest.
        steps.extract_exemplars(ctx)
        steps.resolve_references(ctx)
        return [r for r in server.requests if not r.path.startswith("/e-print/")]


def _references(engine, month: str) -> dict[tuple[str, str], tuple]:
    with engine.connect() as conn:
        return {(r.arxiv_id, r.cite_key): r for r in conn.execute(sa.text(
            "SELECT arxiv_id, cite_key, resolution_method, resolved_arxiv_id, openalex_id, resolved_doi, "
            "cited_by_count FROM exemplar_references WHERE release_id = :r"), {"r": month})}


def _grow_citations(snapshot, by: int) -> None:
    works = snapshot / "openalex" / "works.jsonl"
    rows = [json.loads(line) for line in works.read_text().splitlines() if line.strip()]
    for row in rows:
        row["cited_by_count"] = int(row.get("cited_by_count") or 0) + by
    works.write_text("".join(json.dumps(row) + "\n" for row in rows))


@pytest.fixture
def worlds(tmp_path):
    """The month's world, and the same world a month later (every paper cited 1000 times more)."""
    now, later = tmp_path / "now", tmp_path / "later"
    write_demo_snapshot(now, month=MONTH)
    shutil.copytree(now, later)
    _grow_citations(later, by=1000)
    return now, later


def test_references_resolved_before_come_from_the_cache_with_fresh_counts(engine, worlds):
    now, later = worlds
    fresh_requests = _resolve(engine, later, MONTH)  # what a warehouse without the cache resolves
    fresh = _references(engine, MONTH)
    empty_warehouse(engine)

    _resolve(engine, now, MONTH)
    with engine.begin() as conn:  # the release goes, the cache stays
        conn.execute(sa.text("DELETE FROM releases WHERE release_id = :r"), {"r": MONTH})
        assert conn.execute(sa.text("SELECT count(*) FROM resolution_cache")).scalar() > 0
    cached_requests = _resolve(engine, later, MONTH)
    second = _references(engine, MONTH)

    resolved = {k for k, r in fresh.items() if r.resolution_method != "unresolved"}
    hits = {k: r for k, r in second.items() if r.resolution_method.startswith("cache_")}
    missed = {k: (fresh[k].resolution_method, second[k].resolution_method) for k in resolved - set(hits)}
    assert not missed, f"resolved before, yet not taken from the cache: {missed}"
    # The same identity as without the cache, and the later counts (grown by 1000), not the first build's.
    assert set(second) == set(fresh)
    for key, row in second.items():
        expected = fresh[key]
        assert (row.resolved_arxiv_id, row.openalex_id, row.resolved_doi, row.cited_by_count) == (
            expected.resolved_arxiv_id, expected.openalex_id, expected.resolved_doi, expected.cited_by_count), key
    assert all(r.cited_by_count >= 1000 for r in hits.values() if r.openalex_id)

    def searches(requests) -> int:
        return sum(("search_query=ti" in r.query) or ("title.search" in r.query) for r in requests)

    unresolved = len(fresh) - len(resolved)
    assert searches(cached_requests) <= 3 * unresolved < searches(fresh_requests)
    # The cached works' counts come in batches (filter=ids.openalex), not one request per reference.
    batched = [r for r in cached_requests if "ids.openalex" in r.query]
    assert 0 < len(batched) <= -(-len(hits) // 50) * 2
    assert len(cached_requests) < len(fresh_requests) / 3
