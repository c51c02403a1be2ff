"""Generation on a hand-made published release: planning, storage, failures and idempotent re-runs."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from deepscholar import db
from deepscholar.release.context import ReleaseNotPublished
from deepscholar.systems.base import Report, Source, System, register_system
from deepscholar.systems.generation import (
    batch_pairs,
    generate_release,
    list_reports,
    plan_pairs,
)
from deepscholar.systems.registry import add_system, set_active

CUTOFF = datetime(2025, 6, 10, tzinfo=UTC)


@register_system("test_cites_corpus")
class CitesCorpus(System):
    """Cites one search result: enough to exercise storage, citations and leakage."""

    def generate(self, query, search):
        hits = search.search(query.title, k=3)
        sources = [Source(idx=i + 1, title=h.title, snippet=h.abstract, arxiv_id=h.arxiv_id)
                   for i, h in enumerate(hits)]
        text = " ".join(f"Prior work {s.title} is relevant [{s.idx}]." for s in sources)
        return Report(text=text, sources=sources)


@register_system("test_broken")
class Broken(System):
    uses_search = False

    def generate(self, query, search):
        raise RuntimeError("model server exploded")


def _release(engine, release_id="2025-06", status="published", n_queries=3):
    with engine.begin() as conn:
        db.upsert(conn, "releases", [{"release_id": release_id, "status": status}], key=["release_id"])
        db.upsert(conn, "release_queries", [
            {"release_id": release_id, "arxiv_id": f"2506.0000{i}", "title": f"Dense retrieval study {i}",
             "abstract": "We study dense retrieval.", "published": CUTOFF, "section_raw_latex": "x",
             "section_text": "x", "word_count": 1} for i in range(n_queries)], key=["release_id", "arxiv_id"])
        db.upsert(conn, "corpus", [
            {"arxiv_id": "2401.00001", "title": "Dense retrieval", "abstract": "Dense retrieval for QA.",
             "published": datetime(2024, 1, 5, tzinfo=UTC), "source": "test"},
            {"arxiv_id": "2507.00001", "title": "Dense retrieval later", "abstract": "Dense retrieval again.",
             "published": datetime(2025, 7, 5, tzinfo=UTC), "source": "test"}], key=["arxiv_id"])


def test_generation_needs_a_published_release(engine):
    _release(engine, status="failed")
    add_system(engine, "good", "test_cites_corpus")
    with pytest.raises(ReleaseNotPublished, match="failed, not published"):
        plan_pairs(engine, "2025-06")
    with pytest.raises(ReleaseNotPublished, match="does not exist"):
        plan_pairs(engine, "2030-01")


def test_a_failing_system_is_recorded_and_the_others_complete(engine):
    _release(engine)
    add_system(engine, "good", "test_cites_corpus")
    add_system(engine, "broken", "test_broken")
    summary = generate_release(engine, "2025-06")
    assert summary == {"pairs": 6, "ok": 3, "system_error": 3}
    reports = {(r["system_id"], r["arxiv_id"]): r for r in list_reports(engine, "2025-06")}
    assert all(r["status"] == "system_error" and "model server exploded" in r["error"]
               for (s, _), r in reports.items() if s == "broken")
    good = [r for (s, _), r in reports.items() if s == "good"]
    # The local search drops the post-cutoff paper, so nothing leaks and every [n] resolves.
    assert all(r["n_sources"] == 1 and r["leaked_sources"] == 0 and r["n_unresolved_citations"] == 0 for r in good)


def test_rerun_only_retries_failures_and_never_duplicates(engine):
    _release(engine)
    add_system(engine, "good", "test_cites_corpus")
    add_system(engine, "broken", "test_broken")
    generate_release(engine, "2025-06")
    counts = db.row_counts(engine)
    assert [p["system_id"] for p in plan_pairs(engine, "2025-06")] == ["broken"] * 3
    generate_release(engine, "2025-06")
    assert db.row_counts(engine) == counts


def test_named_systems_narrow_the_plan_and_inactive_ones_are_skipped(engine):
    _release(engine)
    add_system(engine, "a", "test_cites_corpus")
    add_system(engine, "b", "test_cites_corpus")
    set_active(engine, "b", False)
    assert {p["system_id"] for p in plan_pairs(engine, "2025-06")} == {"a"}
    assert {p["system_id"] for p in plan_pairs(engine, "2025-06", ["b"])} == {"b"}
    with pytest.raises(LookupError, match="unknown systems: zzz"):
        plan_pairs(engine, "2025-06", ["zzz"])


def test_each_pair_carries_the_lane_of_its_system_provider(engine):
    _release(engine, n_queries=1)
    add_system(engine, "offline_one", "test_cites_corpus")
    add_system(engine, "claude_one", "test_cites_corpus", {"model": "anthropic/claude-sonnet-4"})
    assert {p["system_id"]: p["lane"] for p in plan_pairs(engine, "2025-06")} == {
        "offline_one": "offline", "claude_one": "anthropic"}


def test_file_imported_external_systems_are_not_planned(engine):
    _release(engine)
    with engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO systems (system_id, kind, config) VALUES "
                             "('imported', 'external', '{\"source\": \"x.jsonl\"}')"))
    assert plan_pairs(engine, "2025-06") == []


def test_batches_stay_under_the_map_limit_and_keep_every_pair():
    pairs = [{"i": i} for i in range(2500)]
    batches = batch_pairs(pairs, max_tasks=1000)
    assert len(batches) <= 1000
    assert [p for b in batches for p in b] == pairs
    assert batch_pairs(pairs[:7], max_tasks=1000) == [[p] for p in pairs[:7]]
