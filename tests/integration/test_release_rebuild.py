"""A month whose gate failed is re-built once its sources are fixed, and then publishes (library path).

The DAG-level version (the benchmark run starting by itself afterwards) is in
tests/dags/test_scheduled_month.py; this pins the release step that makes a re-build worth doing:
references that resolved to nothing are looked up again, while a plain re-run keeps every row.
"""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa
from support.demo_month import write_unresolvable_snapshot
from support.settings import replay_settings

from deepscholar.release.spec import ReleaseSpec
from deepscholar.release.steps import build_release
from deepscholar.replay.demo_snapshot import write_demo_snapshot
from deepscholar.replay.server import ReplayServer

MONTH = "2025-06"
pytestmark = pytest.mark.slow


def _build(engine, snapshot):
    categories = json.loads((snapshot / "manifest.json").read_text())["categories"]
    with ReplayServer(snapshot) as server:
        return build_release(engine, MONTH, ReleaseSpec(categories=categories, judge="local"),
                             replay_settings(server))


def _unresolved(engine) -> int:
    with engine.connect() as conn:
        return conn.execute(sa.text("SELECT count(*) FROM exemplar_references "
                                    "WHERE resolution_method = 'unresolved'")).scalar_one()


def test_a_failed_month_rebuilt_from_fixed_sources_resolves_again_and_publishes(engine, tmp_path):
    good = tmp_path / "good"
    write_demo_snapshot(good, month=MONTH)
    # The referenced papers are missing from arXiv and OpenAlex: nothing resolves and the gate fails.
    broken = write_unresolvable_snapshot(good, tmp_path / "broken", MONTH)

    assert _build(engine, broken)["gx_success"] is False
    before = _unresolved(engine)
    assert before > 0
    # Re-running against the same broken sources changes nothing and still fails.
    assert _build(engine, broken)["gx_success"] is False
    assert _unresolved(engine) == before

    counts = _build(engine, good)
    assert counts["gx_success"] is True
    with engine.connect() as conn:
        status = conn.execute(sa.text("SELECT status FROM releases WHERE release_id = :r"), {"r": MONTH}).scalar()
        keys = conn.execute(sa.text("SELECT count(*), count(DISTINCT (arxiv_id, cite_key)) "
                                    "FROM exemplar_references")).one()
    assert status == "published"
    assert _unresolved(engine) < before
    assert keys[0] == keys[1]  # looked up again in place: no duplicated reference rows


def _rows_digest(engine, release_id: str) -> tuple:
    """Every row of the release's queries, references and nuggets, and its releases row's seal."""
    with engine.connect() as conn:
        rows = tuple(conn.execute(sa.text(
            f"SELECT md5(coalesce(string_agg(to_jsonb(t)::text, '|' ORDER BY to_jsonb(t)::text), '')) "
            f"FROM {table} t WHERE release_id = :r"), {"r": release_id}).scalar_one()
            for table in ("release_queries", "exemplar_references", "nuggets"))
        seal = conn.execute(sa.text("SELECT status, manifest_hash, manifest, published_at FROM releases "
                                    "WHERE release_id = :r"), {"r": release_id}).one()
    return rows, tuple(seal)


def test_rebuilding_a_published_month_makes_its_next_version_and_leaves_it_intact(engine, tmp_path):
    from deepscholar.scheduling import current_release

    snapshot = tmp_path / "good"
    write_demo_snapshot(snapshot, month=MONTH)
    first = _build(engine, snapshot)
    assert first["gx_success"] is True and first["release_id"] == MONTH
    before = _rows_digest(engine, MONTH)
    assert before[1][0] == "published" and before[1][1] is not None  # sealed at publication
    assert current_release(engine, MONTH) == MONTH

    categories = json.loads((snapshot / "manifest.json").read_text())["categories"]
    with ReplayServer(snapshot) as server:
        second = build_release(engine, MONTH, ReleaseSpec(categories=categories, judge="local"),
                               replay_settings(server), reason="nugget judge fixed")
    v2 = f"{MONTH}.v2"
    assert second["release_id"] == v2 and second["gx_success"] is True  # its queries are no duplicates of M's
    assert _rows_digest(engine, MONTH) == before
    with engine.connect() as conn:
        log = conn.execute(sa.text("SELECT * FROM release_changelog")).mappings().one()
        v2_row = conn.execute(sa.text("SELECT base_id, version, manifest_hash, window_start FROM releases "
                                      "WHERE release_id = :r"), {"r": v2}).one()
    assert (log["release_id"], log["previous_release"], log["reason"]) == (v2, MONTH, "nugget judge fixed")
    assert log["published_at"] is not None and f"vs {MONTH}; manifest {before[1][1][:12]}" in log["changes"]
    # The same sources and judge: the same sample and rows, so nothing changed and the hash says so.
    assert log["changes"].startswith("0 queries added, 0 removed, 0 changed") and log["changes"].endswith("(same rows)")
    assert (v2_row.base_id, v2_row.version, v2_row.manifest_hash) == (MONTH, 2, before[1][1])
    assert current_release(engine, MONTH) == v2  # the benchmark side now works on the correction
