"""RACE's rubric built by an LLM release judge over real HTTP (the direct OpenAI-compatible path) against
OpenAIStub answered by the scripted judge (support/judge_stub.py), on a small release in real PostgreSQL:
N weight samples per query, each its own cached request, their mean stored with the samples."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from support.judge_stub import scripted_judge
from support.openai_stub import OpenAIStub, first_user_text

from deepscholar import db
from deepscholar.evaluation.metrics.race.rubrics import DIMENSIONS
from deepscholar.release.context import ReleaseContext
from deepscholar.release.spec import ReleaseSpec
from deepscholar.release.track_artefacts import build_track_artefacts, check_track_artefacts
from deepscholar.settings import current_settings

RELEASE = "2025-07"
Q1, Q2, Q3 = "2507.01001", "2507.01002", "2507.01003"
JUDGE = "openai/judge-model"
BROKEN_SAMPLE = 3  # Q3's sample 3 is never answered in the required shape


def build_release(engine) -> None:
    with engine.begin() as conn:
        db.upsert(conn, "releases", [{"release_id": RELEASE, "status": "published"}], key=["release_id"])
        db.upsert(conn, "release_queries", [{
            "release_id": RELEASE, "arxiv_id": q, "title": f"Paper {q} on dense retrieval",
            "abstract": f"Abstract of {q}.", "section_raw_latex": "x", "section_text": "Prior work [@a].",
            "word_count": 3} for q in (Q1, Q2, Q3)], key=["release_id", "arxiv_id"])


def is_weights(body: dict) -> bool:
    return '"instruction_following": w3' in first_user_text(body)


def answer(body: dict) -> str:
    if is_weights(body) and Q3 in first_user_text(body) and body.get("seed") == BROKEN_SAMPLE:
        return "About a quarter each."
    return scripted_judge(body)


def context(engine, stub, samples: int) -> ReleaseContext:
    settings = current_settings().replace(judge_api_base=stub.url, race_weight_samples=samples)
    return ReleaseContext(engine, RELEASE, ReleaseSpec(judge=JUDGE), settings)


def rubric_rows(engine) -> list[dict]:
    with engine.connect() as conn:
        return [dict(r) for r in conn.execute(sa.text(
            "SELECT arxiv_id, dimension, weight, raw_weight, renormalised, criteria, weight_samples, judge_config, "
            "prompt_version FROM deepscholar.race_rubrics WHERE release_id = :r ORDER BY arxiv_id, dimension"),
            {"r": RELEASE}).mappings()]


def weight_seeds(stub, arxiv_id: str) -> list[int]:
    return sorted(b["seed"] for b in stub.bodies_where(lambda b: is_weights(b) and arxiv_id in first_user_text(b)))


@pytest.fixture
def stub(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    with OpenAIStub(model_suffix="") as server:
        server.default = answer
        yield server
    server.raise_errors()


def test_five_weight_samples_per_query_each_cached_and_their_mean_stored(engine, stub):
    build_release(engine)
    counts = build_track_artefacts(context(engine, stub, 5), "race")
    assert (counts["built"], counts["unscored"], counts["weight_samples"], counts["weight_samples_unscored"]) == (
        3, 0, 5, 1)
    # Five weight requests per query, one per seed; Q3's broken sample also its two re-asks.
    assert weight_seeds(stub, Q1) == weight_seeds(stub, Q2) == [0, 1, 2, 3, 4]
    assert weight_seeds(stub, Q3) == [0, 1, 2, 3, 3, 3, 4]
    assert all(b["temperature"] == 1.0 for b in stub.bodies_where(is_weights))
    assert stub.requests == counts["calls"] == 5 + 5 + 7 + 3 * len(DIMENSIONS)

    rows = rubric_rows(engine)
    assert len(rows) == 3 * len(DIMENSIONS)
    assert {(r["judge_config"], r["prompt_version"]) for r in rows} == {
        (f"llm:{JUDGE}:race_weights_v1.x5+race_criteria_v1", "race_weights_v1.x5+race_criteria_v1")}
    for arxiv_id in (Q1, Q2, Q3):
        mine = [r for r in rows if r["arxiv_id"] == arxiv_id]
        assert sum(r["weight"] for r in mine) == pytest.approx(1.0, abs=1e-9)
        for row in mine:  # the stored weight is the mean of the stored samples that parsed
            used = [s for s in row["weight_samples"] if "weight" in s]
            assert [s["sample"] for s in row["weight_samples"]] == [0, 1, 2, 3, 4]
            assert row["weight"] == pytest.approx(sum(s["weight"] for s in used) / len(used))
            assert len(used) == (4 if arxiv_id == Q3 else 5)
    q3 = next(r for r in rows if r["arxiv_id"] == Q3)
    assert q3["weight_samples"][BROKEN_SAMPLE] == {
        "sample": BROKEN_SAMPLE, "unscored": "unparseable after 3 answers: not valid JSON (Expecting value at line 1 "
                                            "column 1)"}
    # The samples differ (the scripted judge answers by seed): the spread is on record.
    q1 = [r for r in rows if r["arxiv_id"] == Q1]
    assert any(len({s["weight"] for s in r["weight_samples"]}) > 1 for r in q1)
    with engine.connect() as conn:
        recorded = conn.execute(sa.text("SELECT judge_config, prompt_versions FROM deepscholar.release_track_artefacts "
                                        "WHERE release_id = :r AND track = 'race'"), {"r": RELEASE}).one()
    assert recorded == (f"llm:{JUDGE}:race_weights_v1.x5+race_criteria_v1",
                        {"weights": "race_weights_v1.x5", "criteria": "race_criteria_v1"})

    # A rebuild keeps every query (done by this judge config): no call at all.
    asked = stub.requests
    again = build_track_artefacts(context(engine, stub, 5), "race")
    assert (again["kept"], again["built"], again["calls"], stub.requests) == (3, 0, 0, asked)

    # Rubrics gone, built again: every sample is its own cache entry, so each gets its stored answer back and
    # no request is sent; the rows come out the same.
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM deepscholar.race_rubrics WHERE release_id = :r"), {"r": RELEASE})
    rebuilt = build_track_artefacts(context(engine, stub, 5), "race")
    assert rebuilt["built"] == 3 and rebuilt["calls"] == counts["calls"] and stub.requests == asked
    assert rubric_rows(engine) == rows


def test_another_sample_count_is_another_judge_config_and_replaces_the_rubric(engine, stub):
    build_release(engine)
    build_track_artefacts(context(engine, stub, 5), "race")
    five = {(r["arxiv_id"], r["dimension"]): r for r in rubric_rows(engine)}
    asked = stub.requests
    # Three samples are the first three of five (same temperature and seeds): all from the cache.
    counts = build_track_artefacts(context(engine, stub, 3), "race")
    assert (counts["kept"], counts["built"], counts["replaced"], counts["stale"], stub.requests) == (0, 3, 3, 0, asked)
    three = rubric_rows(engine)
    assert {r["judge_config"] for r in three} == {f"llm:{JUDGE}:race_weights_v1.x3+race_criteria_v1"}
    for row in three:
        assert row["weight_samples"] == five[(row["arxiv_id"], row["dimension"])]["weight_samples"][:3]
        assert row["criteria"] == five[(row["arxiv_id"], row["dimension"])]["criteria"]
    # One sample: the deterministic call of before sampling (temperature 0): a new request per query. Q3's is
    # never answered here: its rows of N = 3 stay, counted as stale and still saying which config made them.
    stub.default = lambda body: "No." if is_weights(body) and Q3 in first_user_text(body) else answer(body)
    one = build_track_artefacts(context(engine, stub, 1), "race")
    assert (one["built"], one["replaced"], one["unscored"], one["stale"]) == (2, 2, 1, 1)
    assert stub.requests == asked + 2 + 3  # Q1, Q2 once; Q3 asked and re-asked twice
    assert {b.get("temperature") for b in stub.bodies[asked:]} == {0}
    assert {(r["arxiv_id"], r["judge_config"], len(r["weight_samples"])) for r in rubric_rows(engine)} == {
        (Q1, f"llm:{JUDGE}:race_weights_v1+race_criteria_v1", 1), (Q2, f"llm:{JUDGE}:race_weights_v1+race_criteria_v1", 1),
        (Q3, f"llm:{JUDGE}:race_weights_v1.x3+race_criteria_v1", 3)}


@pytest.mark.slow  # GX's import and validation take seconds
def test_sampled_weights_pass_the_gate(engine, stub):
    build_release(engine)
    build_track_artefacts(context(engine, stub, 5), "race")
    result = check_track_artefacts(engine, RELEASE, ["race"])
    assert result.success, result.summary


def test_the_local_judge_is_not_sampled(engine):
    build_release(engine)
    settings = current_settings().replace(race_weight_samples=5)
    counts = build_track_artefacts(ReleaseContext(engine, RELEASE, ReleaseSpec(judge="local"), settings), "race")
    assert (counts["built"], counts["calls"], counts["weight_samples"]) == (3, 0, 0)
    rows = rubric_rows(engine)
    assert {(r["judge_config"], r["prompt_version"]) for r in rows} == {
        ("local:all-MiniLM-L6-v2:race_local_v1", "race_local_v1")}
    assert all(r["weight_samples"] == [] for r in rows)
    assert {r["dimension"]: r["weight"] for r in rows if r["arxiv_id"] == Q1} == {
        "comprehensiveness": 0.3, "insight": 0.3, "instruction_following": 0.2, "readability": 0.2}
