"""ReportBench's uncited claim support on a real PostgreSQL, judged by the real runner: its prepare() binds
the real `local` search (BM25 over `corpus`), and the evidence of every claim comes only from papers
published strictly before the query paper, never the query paper itself (dated before its cutoff here, so
only the exclusion keeps it out)."""

from __future__ import annotations

import json
import re

import pytest
import sqlalchemy as sa
from support.metric_support import ScriptedJudge, needs_model
from support.search_corpus import CUTOFF, add_cutoff_corpus

from deepscholar import db
from deepscholar.evaluation.judge_spec import JudgeSpec
from deepscholar.evaluation.judging.runner import judge_metric
from deepscholar.evaluation.metrics.reportbench.uncited_claim_support import METRIC
from deepscholar.search import bm25_index

RELEASE = "2025-06"
QUERY = "2506.00007"  # in the corpus, dated 2025-06-01: before the cutoff, so only its exclusion keeps it out
BEFORE = {"2401.00001", "2402.00002", "2506.00003"}  # the graph papers dated strictly before the cutoff
NEVER = {QUERY, "2506.00004", "2506.00005", "2506.00006"}  # the query paper, at / after the cutoff, undated
REPORT = ("Graph neural networks pass messages along edges to learn node representations in 2024. "
          "Deep Graph Neural Networks over-smooth when many layers are stacked on top of each other. "
          "Dense passage retrieval uses dual encoders for question answering [1]. "
          "Sequential recommenders predict the next item a user interacts with in 2023.")


@pytest.fixture(autouse=True)
def index_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("DEEPSCHOLAR_SEARCH_INDEX_DIR", str(tmp_path / "search-index"))
    monkeypatch.setenv("DEEPSCHOLAR_SEARCH_INDEX_CHECK_SECONDS", "0")
    bm25_index.forget_loaded()
    yield
    bm25_index.forget_loaded()
    METRIC.unbind(RELEASE)


@pytest.fixture
def month(engine):
    """A published month with one query (published at the cutoff) and one report with three uncited
    sentences, over the search tests' corpus."""
    add_cutoff_corpus(engine)
    with engine.begin() as conn:
        db.upsert(conn, "releases", [{"release_id": RELEASE, "status": "published"}], key=["release_id"])
        db.upsert(conn, "release_queries", [{
            "release_id": RELEASE, "arxiv_id": QUERY, "title": "Graph neural networks", "abstract": "A",
            "published": CUTOFF, "section_raw_latex": "x", "section_text": "x", "word_count": 1}],
            key=["release_id", "arxiv_id"])
        db.upsert(conn, "systems", [{"system_id": "writer", "kind": "extractive", "config": {}}], key=["system_id"])
        report_id = conn.execute(sa.text(
            "INSERT INTO reports (release_id, system_id, arxiv_id, status, text) VALUES (:r, 'writer', :q, 'ok', :t) "
            "RETURNING report_id"), {"r": RELEASE, "q": QUERY, "t": REPORT}).scalar_one()
        db.upsert(conn, "report_sources", [{"report_id": report_id, "source_idx": 1, "arxiv_id": "2302.00009",
                                            "title": "Dense passage retrieval"}], key=["report_id", "source_idx"])
    return engine


def every_sentence_supported_by_paper_1(prompt: str) -> str:
    if "Its sentences that cite nothing" in prompt:
        offered = re.findall(r"<<<\n(.*?)\n>>>", prompt, re.DOTALL)[-1]
        return json.dumps([{"sentence": int(n), "claim": text}
                           for n, text in re.findall(r"^(\d+)\. (.+)$", offered, re.MULTILINE)])
    return json.dumps({"verdict": "supported", "papers": [1], "reason": "paper 1 says so"})


def stored(engine, judge_config: str) -> tuple[dict, tuple]:
    with engine.connect() as conn:
        label = conn.execute(sa.text(
            "SELECT label FROM judgments WHERE metric = :m AND judge_config = :j AND item_key = 'uncited'"),
            {"m": METRIC.name, "j": judge_config}).scalar_one()
        score = conn.execute(sa.text(
            "SELECT value, unscored_reason, details FROM metric_scores WHERE metric = :m AND judge_config = :j"),
            {"m": METRIC.name, "j": judge_config}).one()
    return label, tuple(score)


def evidence_ids(label: dict) -> list[set[str]]:
    return [{e["arxiv_id"] for e in claim["evidence"]} for claim in label["claims"]]


def test_the_runner_binds_the_local_search_and_evidence_precedes_the_cutoff(month):
    client = ScriptedJudge(every_sentence_supported_by_paper_1)
    run = judge_metric(month, RELEASE, METRIC.name, spec=JudgeSpec.parse("openai/scripted"), client=client)
    assert (run.reports, run.unscored_reports) == (1, 0)
    label, (value, reason, details) = stored(month, "llm:openai/scripted")
    assert [c["sentence"] for c in label["claims"]] == [1, 2, 4]  # the uncited ones
    graph, deep, recommender = evidence_ids(label)
    # The two graph claims find graph papers, all before the cutoff; the query paper never, though it matches.
    assert graph and deep and graph | deep <= BEFORE and not (graph | deep | recommender) & NEVER
    assert "2506.00003" in graph  # one second before the cutoff is before it
    assert recommender == {"2301.00008"}
    assert label["search"] == {"backend": "local", "k": 5, "cutoff": CUTOFF.isoformat(), "excluded": QUERY}
    with month.connect() as conn:
        dates = dict(conn.execute(sa.text("SELECT arxiv_id, published FROM corpus")).all())
    assert all(dates[i] < CUTOFF for ids in evidence_ids(label) for i in ids)
    # One extraction and one verdict per claim with evidence; the verdict rests on the first paper shown.
    assert len(client.requests) == 4
    assert all(c["papers"] == [c["evidence"][0]["arxiv_id"]] for c in label["claims"])
    assert (value, reason, details["n_claims"], details["n_supported"]) == (1.0, None, 3, 3)


@needs_model
def test_the_local_judge_searches_the_same_way_and_never_contradicts(month):
    run = judge_metric(month, RELEASE, METRIC.name)
    assert run.reports == 1 and run.llm_requests == 0
    label, (value, reason, details) = stored(month, run.judge_config)
    # The heuristic keeps the sentences with a digit or a capitalised name after the first word.
    assert [c["sentence"] for c in label["claims"]] == [1, 2, 4]
    assert all(ids and ids <= BEFORE | {"2301.00008"} and not ids & NEVER for ids in evidence_ids(label))
    assert {c["verdict"] for c in label["claims"]} <= {"supported", "not_enough_evidence"}
    assert details["n_contradicted"] == 0 and reason is None and 0 <= value <= 1
    # The same corpus, the same report: the same judgments.
    with month.begin() as conn:
        conn.execute(sa.text("DELETE FROM metric_scores WHERE metric = :m"), {"m": METRIC.name})
    assert judge_metric(month, RELEASE, METRIC.name).reports == 1
    assert stored(month, run.judge_config) == (label, (value, reason, details))
