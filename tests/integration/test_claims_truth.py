"""The claims track's ground truth on a small release built row by row (real PostgreSQL): one claim per
important exemplar reference, idempotent builds, the GX checks that gate them, and the LLM path over real
HTTP against OpenAIStub."""

from __future__ import annotations

import json
import re

import pytest
import sqlalchemy as sa
from support.openai_stub import OpenAIStub, first_user_text

from deepscholar import db
from deepscholar.evaluation.judging.report_contexts import load_queries
from deepscholar.evaluation.metrics.claims.query_data import GroundTruthClaim, gt_claims_of
from deepscholar.release.context import ReleaseContext
from deepscholar.release.spec import ReleaseSpec
from deepscholar.release.track_artefacts import build_track_artefacts, check_track_artefacts, enrich_release
from deepscholar.settings import current_settings

pytestmark = pytest.mark.slow  # GX's import and validation take seconds

RELEASE = "2025-06"
Q1, Q2, Q3 = "2506.01001", "2506.01002", "2506.01003"
SECTIONS = {
    Q1: ("Dense retrieval [@dpr] replaced sparse ranking [@bm25]. We train contrastively as in [@simcse; @dpr].\n\n"
         "Tools such as [@torch] help."),
    Q2: "Prior work [@a].",
    Q3: "We extend the retriever of [@rag] to citations.",
}
# (cite key, bib title, resolved arXiv id, bib DOI, important)
REFERENCES = {
    Q1: [("dpr", "Dense Passage Retrieval", "2004.04906", None, True),
         ("bm25", "Okapi at TREC-3", None, "10.1000/BM25", True),
         ("simcse", "SimCSE", "2104.08821", None, False),
         ("torch", "PyTorch", None, None, False),
         ("orphan", "A work no sentence cites", None, None, True)],
    Q2: [("a", "Some work", None, None, False)],
    Q3: [("rag", "Retrieval-Augmented Generation", "2005.11401", None, True)],
}


def build_release(engine) -> None:
    with engine.begin() as conn:
        db.upsert(conn, "releases", [{"release_id": RELEASE, "status": "published"}], key=["release_id"])
        for arxiv_id, section in SECTIONS.items():
            db.upsert(conn, "release_queries", [{
                "release_id": RELEASE, "arxiv_id": arxiv_id, "title": f"Paper {arxiv_id}",
                "abstract": "We study retrieval for citing papers.", "section_raw_latex": "x",
                "section_text": section, "word_count": 30}], key=["release_id", "arxiv_id"])
            db.upsert(conn, "exemplar_references", [{
                "release_id": RELEASE, "arxiv_id": arxiv_id, "cite_key": key, "bib_title": title,
                "resolved_arxiv_id": arxiv, "bib_doi": doi, "is_important": important}
                for key, title, arxiv, doi, important in REFERENCES[arxiv_id]],
                key=["release_id", "arxiv_id", "cite_key"])


def context(engine, judge="local", **settings) -> ReleaseContext:
    return ReleaseContext(engine, RELEASE, ReleaseSpec(judge=judge), current_settings().replace(**settings))


def claims(engine) -> list[dict]:
    with engine.connect() as conn:
        return [dict(r) for r in conn.execute(sa.text(
            "SELECT * FROM deepscholar.gt_claims WHERE release_id = :r ORDER BY arxiv_id, cite_key"),
            {"r": RELEASE}).mappings()]


def execute(engine, sql, **params) -> None:
    with engine.begin() as conn:
        conn.execute(sa.text(sql), {"r": RELEASE, **params})


def failed(result) -> dict[str, list]:
    """{failed check: its unexpected rows}."""
    return {c["name"]: c["details"].get("unexpected_rows", []) for c in result.checks if not c["success"]}


def test_local_claims_one_per_important_reference_idempotent_and_checked(engine):
    build_release(engine)
    ctx = context(engine)
    counts = build_track_artefacts(ctx, "claims")
    assert counts == {"queries": 3, "no_important": 1, "built": 2, "kept": 0, "unscored": 0, "claims": 4, "calls": 0}
    rows = claims(engine)
    assert [(r["arxiv_id"], r["cite_key"]) for r in rows] == [(Q1, "bm25"), (Q1, "dpr"), (Q1, "orphan"), (Q3, "rag")]
    by_key = {r["cite_key"]: r for r in rows}
    assert by_key["dpr"]["evidence"] == "Dense retrieval replaced sparse ranking. We train contrastively as in."
    assert by_key["dpr"]["connection"] == "Dense retrieval replaced sparse ranking."  # the first citing sentence
    assert (by_key["dpr"]["work_arxiv_id"], by_key["dpr"]["work_title"]) == ("2004.04906", "Dense Passage Retrieval")
    assert (by_key["bm25"]["work_doi"], by_key["bm25"]["work_arxiv_id"]) == ("10.1000/BM25", None)
    assert (by_key["orphan"]["evidence"], by_key["orphan"]["connection"]) == ("", "A work no sentence cites")
    assert {r["judge_config"] for r in rows} == {"local:all-MiniLM-L6-v2:claims_local_v1"}
    assert {r["prompt_version"] for r in rows} == {"claims_local_v1"}
    with engine.connect() as conn:
        recorded = conn.execute(sa.text("SELECT judge_config, prompt_versions, counts FROM "
                                        "deepscholar.release_track_artefacts WHERE release_id = :r AND track = 'claims'"),
                                {"r": RELEASE}).one()
    assert recorded == ("local:all-MiniLM-L6-v2:claims_local_v1", {"local": "claims_local_v1"}, counts)

    # A re-run changes nothing: every query is done by this judge.
    again = build_track_artefacts(ctx, "claims")
    assert (again["built"], again["kept"], again["claims"]) == (0, 2, 0)
    assert claims(engine) == rows

    # The ground truth reaches the metrics.
    assert gt_claims_of(load_queries(engine, RELEASE)[Q3]) == (
        GroundTruthClaim("rag", "Retrieval-Augmented Generation", "2005.11401", None,
                         "We extend the retriever of to citations."),)

    result = check_track_artefacts(engine, RELEASE, ["claims"])
    assert result.success, result.summary
    assert [c["name"] for c in result.checks] == [
        "claims_for_every_important_reference", "claims_connection_not_empty", "claims_of_important_references_only"]

    # A query whose claims are gone fails the gate, named; the next build restores that query alone.
    execute(engine, "DELETE FROM deepscholar.gt_claims WHERE release_id = :r AND arxiv_id = :a", a=Q1)
    result = check_track_artefacts(engine, RELEASE, ["claims"])
    assert not result.success
    assert failed(result) == {"claims_for_every_important_reference": [{"arxiv_id": Q1, "n_missing": 3}]}
    assert Q1 in json.dumps(result.checks)
    assert build_track_artefacts(ctx, "claims")["built"] == 1
    assert claims(engine)[:3] != rows[:3] and [r["connection"] for r in claims(engine)] == [r["connection"] for r in rows]
    assert check_track_artefacts(engine, RELEASE, ["claims"]).success


def test_a_claim_of_a_reference_no_longer_important_fails_until_rebuilt(engine):
    build_release(engine)
    ctx = context(engine)
    build_track_artefacts(ctx, "claims")
    execute(engine, "UPDATE deepscholar.exemplar_references SET is_important = false WHERE release_id = :r "
                    "AND cite_key = 'bm25'")
    result = check_track_artefacts(engine, RELEASE, ["claims"])
    assert failed(result) == {"claims_of_important_references_only": [
        {"arxiv_id": Q1, "cite_key": "bm25", "is_important": False}]}
    # Enrich (what `deepscholar release enrich` runs) rebuilds that query, checks and records the outcome.
    outcome = enrich_release(ctx, ["claims"])
    assert outcome["gx_success"] and outcome["tracks"]["claims"]["built"] == 1
    assert [(r["arxiv_id"], r["cite_key"]) for r in claims(engine)] == [(Q1, "dpr"), (Q1, "orphan"), (Q3, "rag")]
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT gx_success FROM deepscholar.release_track_artefacts "
                                    "WHERE release_id = :r AND track = 'claims'"), {"r": RELEASE}).scalar() is True


def judge_answer(body: dict) -> str:
    """Reads the prompt like a judge: one connection per numbered work; Q3's answers never have the right count."""
    prompt = first_user_text(body)
    works = re.findall(r"<<<\n(.*?)\n>>>", prompt, re.DOTALL)[1].split("\n")
    if Q3 in prompt:
        return json.dumps(["one", "too many"])
    return json.dumps([f"The paper relates to {line.split('Work: ', 1)[1].split(' |')[0]}." for line in works])


def test_the_llm_judge_writes_one_line_per_reference_in_one_call_per_query(engine, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    build_release(engine)
    with OpenAIStub(model_suffix="") as stub:
        stub.default = judge_answer
        ctx = context(engine, judge="openai/judge-model", judge_api_base=stub.url)
        counts = build_track_artefacts(ctx, "claims")
        asked = stub.requests
        q1_prompts = stub.bodies_where(lambda b: Q1 in first_user_text(b))
        again = build_track_artefacts(ctx, "claims")  # Q1 is kept; Q3 is asked again (from the call cache)
    stub.raise_errors()
    assert len(q1_prompts) == 1  # one call for all of Q1's important references
    prompt = first_user_text(q1_prompts[0])
    assert "1. Work: Okapi at TREC-3 | Cited in: Dense retrieval replaced sparse ranking." in prompt
    assert "3. Work: A work no sentence cites | Cited in: (no sentence of the section cites it by marker)" in prompt
    assert "exactly 3 strings" in prompt
    assert counts["built"] == 1 and counts["unscored"] == 1 and counts["claims"] == 3
    assert asked == counts["calls"] >= 3  # Q1 once; Q3 asked and re-asked until unscored
    rows = claims(engine)
    assert [(r["arxiv_id"], r["cite_key"], r["connection"]) for r in rows] == [
        (Q1, "bm25", "The paper relates to Okapi at TREC-3."), (Q1, "dpr", "The paper relates to Dense Passage Retrieval."),
        (Q1, "orphan", "The paper relates to A work no sentence cites.")]
    assert {(r["judge_config"], r["prompt_version"]) for r in rows} == {("llm:openai/judge-model:gt_claims_v1",
                                                                          "gt_claims_v1")}
    assert (again["kept"], again["built"], again["unscored"]) == (1, 0, 1)
    result = check_track_artefacts(engine, RELEASE, ["claims"])
    assert failed(result) == {"claims_for_every_important_reference": [{"arxiv_id": Q3, "n_missing": 1}]}
