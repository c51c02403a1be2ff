"""max_queries over real HTTP and PostgreSQL: the demo month capped below what it would keep.

The uncapped month says which candidates survive extraction; capped, the release must keep exactly the
first `cap` survivors in its stored sample order, never download a paper after the last of them, record
the rest as not sampled, reproduce the same sample from the same seed, and let a paper that failed
transiently take its place in the sample when it is retried.
"""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa
from support.settings import replay_settings
from support.warehouse import empty_warehouse

from deepscholar.release import steps
from deepscholar.release.spec import ReleaseSpec
from deepscholar.replay.demo_snapshot import write_demo_snapshot
from deepscholar.replay.server import ReplayServer
from deepscholar.reporting import print_release_summary, release_summary

pytestmark = pytest.mark.slow  # builds releases

MONTH = "2025-06"
CAP = 3


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory):
    root = tmp_path_factory.mktemp("snapshot")
    write_demo_snapshot(root, month=MONTH)
    return root


def _extract(engine, snapshot, monkeypatch=None, **spec):
    categories = json.loads((snapshot / "manifest.json").read_text())["categories"]
    with ReplayServer(snapshot) as server:
        ctx = steps.open_release(engine, MONTH, ReleaseSpec(categories=categories, **spec), replay_settings(server))
        steps.search_candidates(ctx)
        steps.filter_candidates(ctx)
        counts = steps.extract_exemplars(ctx)
        downloaded = [r.path.rsplit("/", 1)[-1].removesuffix("v1") for r in server.requests
                      if r.path.startswith("/e-print/")]
    return ctx, counts, downloaded


def _candidates(engine) -> dict[str, dict]:
    with engine.connect() as conn:
        return {r["arxiv_id"]: dict(r) for r in conn.execute(sa.text(
            "SELECT arxiv_id, stage, status, reason, sample_rank FROM release_candidates WHERE release_id = :r"),
            {"r": MONTH}).mappings()}


@pytest.fixture(scope="module")
def survivors(db_url, snapshot) -> set[str]:
    from deepscholar import db

    engine = db.get_engine(db_url)
    empty_warehouse(engine)
    _extract(engine, snapshot, max_queries=None)
    kept = {a for a, c in _candidates(engine).items() if c["status"] == "kept"}
    empty_warehouse(engine)
    assert len(kept) > CAP + 1, "the demo month keeps too few papers to test a cap"
    return kept


def _in_rank_order(candidates: dict[str, dict]) -> list[str]:
    return sorted((a for a, c in candidates.items() if c["sample_rank"] is not None),
                  key=lambda a: candidates[a]["sample_rank"])


def test_the_first_survivors_in_sample_order_are_kept_and_nothing_after_them_is_downloaded(
        engine, snapshot, survivors):
    _, counts, downloaded = _extract(engine, snapshot, max_queries=CAP, sample_seed=5)
    candidates = _candidates(engine)
    order = _in_rank_order(candidates)
    expected = [a for a in order if a in survivors][:CAP]
    kept = [a for a in order if candidates[a]["status"] == "kept"]
    assert kept == expected and counts["kept"] == CAP
    last = order.index(expected[-1])
    assert downloaded == order[: last + 1]  # in sample order, and not one paper past the sample's last place
    assert all(candidates[a]["reason"] == "not_sampled" and candidates[a]["stage"] == "sample"
               for a in order[last + 1:])
    assert counts["not_sampled"] == len(order) - last - 1 > 0
    with engine.connect() as conn:
        queries = set(conn.execute(sa.text("SELECT arxiv_id FROM release_queries WHERE release_id = :r"),
                                   {"r": MONTH}).scalars())
    assert queries == set(expected)

    summary = release_summary(engine, MONTH)
    assert (summary["max_queries"], summary["sample_seed"], summary["queries"]) == (CAP, 5, CAP)


def test_the_same_seed_reproduces_the_sample_and_another_seed_draws_another(engine, snapshot, survivors, capsys):
    _extract(engine, snapshot, max_queries=CAP, sample_seed=5)
    first = _candidates(engine)
    empty_warehouse(engine)
    _extract(engine, snapshot, max_queries=CAP, sample_seed=5)
    assert _candidates(engine) == first
    empty_warehouse(engine)
    _extract(engine, snapshot, max_queries=CAP, sample_seed=6)
    assert _in_rank_order(_candidates(engine)) != _in_rank_order(first)

    print_release_summary(engine, MONTH)
    out = capsys.readouterr().out
    assert f"sampled (max_queries {CAP}, seed 6)" in out


def test_a_paper_retried_after_a_transient_failure_takes_its_place_in_the_sample(engine, snapshot, survivors):
    # Find the sample order of seed 5 first, then fail the second survivor's download on the next build.
    _extract(engine, snapshot, max_queries=CAP, sample_seed=5)
    order = _in_rank_order(_candidates(engine))
    victim = [a for a in order if a in survivors][1]
    empty_warehouse(engine)

    categories = json.loads((snapshot / "manifest.json").read_text())["categories"]
    with ReplayServer(snapshot) as server, pytest.MonkeyPatch.context() as mp:
        mp.setenv("DEEPSCHOLAR_HTTP_RETRIES", "0")
        spec = ReleaseSpec(categories=categories, max_queries=CAP, sample_seed=5)
        ctx = steps.open_release(engine, MONTH, spec, replay_settings(server))
        steps.search_candidates(ctx)
        steps.filter_candidates(ctx)
        server.inject_failures(f"/e-print/{victim}", [500])
        steps.extract_exemplars(ctx)
        after_failure = _candidates(engine)
        assert after_failure[victim]["status"] == "error"
        replaced = [a for a in order if after_failure[a]["status"] == "kept"]
        assert len(replaced) == CAP and victim not in replaced

        counts = steps.extract_exemplars(ctx)  # the retry: the victim is back, the last kept paper leaves
    final = _candidates(engine)
    expected = [a for a in order if a in survivors][:CAP]
    assert [a for a in order if final[a]["status"] == "kept"] == expected
    dropped = [a for a in replaced if a not in expected]
    assert dropped and all(final[a]["reason"] == "over_cap" for a in dropped)
    assert counts["over_cap"] == len(dropped)
    with engine.connect() as conn:
        left = conn.execute(sa.text("SELECT count(*) FROM exemplar_references WHERE release_id = :r "
                                    "AND arxiv_id = ANY(:a)"), {"r": MONTH, "a": dropped}).scalar()
        queries = set(conn.execute(sa.text("SELECT arxiv_id FROM release_queries WHERE release_id = :r"),
                                   {"r": MONTH}).scalars())
    assert left == 0 and queries == set(expected)
