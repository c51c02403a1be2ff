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
