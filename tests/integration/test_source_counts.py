"""Freezing the cited-by counts of report sources: real Postgres, real pyalex over HTTP to a local server."""

from __future__ import annotations

import json
import re

import pytest
import sqlalchemy as sa
from support.warehouse import one_query_release
from werkzeug import Request, Response

from deepscholar import db
from deepscholar.evaluation.judging.report_contexts import load_reports
from deepscholar.evaluation.metrics.core.document_importance import METRIC as DI
from deepscholar.release.source_counts import freeze_source_counts
from deepscholar.settings import Settings

RELEASE = "2025-06"
QUERY = "2506.00001"
FOUND, MISSING, FROM_EXEMPLAR = "2401.00001", "2401.00002", "2401.00003"
BROKEN, FROZEN = "2401.00004", "2401.00007"


class FakeOpenAlex:
    """Answers /works?filter=doi:a|b|... (arXiv DOIs) and /works?filter=title.search:... like OpenAlex; 403
    for the title search of BROKEN (a lookup that fails for one paper)."""

    def __init__(self) -> None:
        self.works = {FOUND: {"id": "https://openalex.org/W111", "title": "Found paper",
                              "doi": f"https://doi.org/10.48550/arxiv.{FOUND}",
                              "publication_date": "2024-01-02", "cited_by_count": 42}}
        self.fail = {BROKEN}

    def __call__(self, request: Request) -> Response:
        flt = request.args.get("filter", "")
        if flt.startswith("title.search:"):
            if any(f"{a}".replace(".", " ") in flt for a in self.fail):
                return self._json({"error": "Forbidden", "message": "nope"}, 403)
            return self._json({"meta": {"count": 0, "page": 1, "per_page": 5}, "results": [], "group_by": []})
        wanted = [d.rsplit("arxiv.", 1)[-1] for d in flt.removeprefix("doi:").split("|")]
        found = [{"doi": f"https://doi.org/10.48550/arxiv.{a}", **self.works[a]} for a in wanted if a in self.works]
        return self._json({"meta": {"count": len(found), "page": 1, "per_page": 50}, "results": found,
                           "group_by": []})

    @staticmethod
    def _json(payload: dict, status: int = 200) -> Response:
        return Response(json.dumps(payload), status=status, content_type="application/json")


@pytest.fixture
def openalex(httpserver):
    fake = FakeOpenAlex()
    httpserver.expect_request(re.compile(r"^/works.*")).respond_with_handler(fake)
    return fake


def _report(conn, system_id: str, status: str, text: str, sources: list[tuple[int, str | None]]) -> int:
    report_id = conn.execute(sa.text(
        "INSERT INTO reports (release_id, system_id, arxiv_id, status, text) VALUES (:r, :s, :q, :st, :t) "
        "RETURNING report_id"), {"r": RELEASE, "s": system_id, "q": QUERY, "st": status, "t": text}).scalar()
    if sources:
        db.upsert(conn, "report_sources", [
            {"report_id": report_id, "source_idx": i, "arxiv_id": a, "title": f"Source {a}",
             "url": None if a else "https://example.org/blog"} for i, a in sources],
            key=["report_id", "source_idx"])
    return report_id


@pytest.fixture
def release(engine):
    """A published release: one query, exemplar references (one with a count, one without), three systems."""
    with engine.begin() as conn:
        one_query_release(conn, RELEASE, QUERY)
        db.upsert(conn, "exemplar_references", [
            {"release_id": RELEASE, "arxiv_id": QUERY, "cite_key": "ex", "resolved_arxiv_id": FROM_EXEMPLAR,
             "openalex_id": "W333", "cited_by_count": 77, "is_important": True},
            # Resolved on arXiv but OpenAlex gave no count at release time: still looked up for reports.
            {"release_id": RELEASE, "arxiv_id": QUERY, "cite_key": "nocount", "resolved_arxiv_id": MISSING,
             "openalex_id": None, "cited_by_count": None, "is_important": True},
        ], key=["release_id", "arxiv_id", "cite_key"])
        db.upsert(conn, "corpus", [
            {"arxiv_id": FOUND, "title": "Found paper", "source": "test"},
            {"arxiv_id": MISSING, "title": "A paper OpenAlex never heard of", "source": "test"},
        ], key=["arxiv_id"])
        db.upsert(conn, "systems", [{"system_id": s, "kind": "extractive"} for s in ("a", "b", "broken")],
                  key=["system_id"])
        ok = _report(conn, "a", "ok", "One [1]. Two [2]. Three [3]. Four [4]. Blog [5].",
                     [(1, FOUND), (2, MISSING), (3, FROM_EXEMPLAR), (4, BROKEN), (5, None)])
        _report(conn, "b", "ok", "Again [1]. Old [2].", [(1, FOUND), (2, FROZEN)])
        _report(conn, "broken", "system_error", None, [(1, "2401.00009")])
        db.upsert(conn, "source_cited_by", [
            {"release_id": RELEASE, "arxiv_id": FROZEN, "openalex_id": "W777", "cited_by_count": 5}],
            key=["release_id", "arxiv_id"])
    return ok


def _rows(engine) -> dict[str, dict]:
    with engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT * FROM source_cited_by WHERE release_id = :r"),
                            {"r": RELEASE}).mappings()
        return {r["arxiv_id"]: dict(r) for r in rows}


def _runtime(httpserver) -> Settings:
    return Settings.from_env().replace(openalex_url=httpserver.url_for("/").rstrip("/"),
                                       openalex_email="bench@example.org")


def test_freeze_looks_up_once_and_reruns_make_no_request(engine, release, openalex, httpserver):
    counts = freeze_source_counts(engine, RELEASE, settings=_runtime(httpserver))
    assert counts == {"from_exemplar": 1, "looked_up": 1, "not_found": 1, "errors": 1, "already_frozen": 1}
    rows = _rows(engine)
    assert set(rows) == {FOUND, MISSING, FROM_EXEMPLAR, BROKEN, FROZEN}  # not the failed report's source
    assert (rows[FOUND]["openalex_id"], rows[FOUND]["cited_by_count"], rows[FOUND]["lookup_error"]) == (
        "W111", 42, None)
    assert (rows[FROM_EXEMPLAR]["openalex_id"], rows[FROM_EXEMPLAR]["cited_by_count"]) == ("W333", 77)
    assert rows[MISSING]["cited_by_count"] is None and rows[MISSING]["lookup_error"].startswith("not_found:")
    assert rows[BROKEN]["cited_by_count"] is None
    assert rows[BROKEN]["lookup_error"].startswith("error: HTTPError")
    assert rows[FROZEN]["cited_by_count"] == 5

    # The DOIs (arXiv DOIs) in one request, then a title search only for the papers no DOI found; none for
    # the exemplar's paper or the already frozen one. The polite e-mail rides along.
    requests = [(r.path, r.args.get("filter")) for r, _ in httpserver.log]
    assert requests == [
        ("/works", f"doi:10.48550/arxiv.{FOUND}|10.48550/arxiv.{MISSING}|10.48550/arxiv.{BROKEN}"),
        ("/works", "title.search:a paper openalex never heard of"),
        ("/works", "title.search:source 2401 00004"),
    ]
    assert httpserver.log[0][0].headers.get("From") == "bench@example.org"

    again = freeze_source_counts(engine, RELEASE, settings=_runtime(httpserver))
    assert again == {"from_exemplar": 0, "looked_up": 0, "not_found": 0, "errors": 0, "already_frozen": 5}
    assert len(httpserver.log) == 3
    assert _rows(engine) == rows  # looked_up_at included: nothing rewritten


def test_retrying_errors_touches_only_failed_lookups(engine, release, openalex, httpserver):
    freeze_source_counts(engine, RELEASE, settings=_runtime(httpserver))
    before = _rows(engine)
    openalex.fail.clear()
    openalex.works[BROKEN] = {"id": "https://openalex.org/W444", "title": "Broken", "cited_by_count": 9}
    httpserver.clear_log()
    counts = freeze_source_counts(engine, RELEASE, settings=_runtime(httpserver), retry_errors=True)
    assert counts == {"from_exemplar": 0, "looked_up": 1, "not_found": 0, "errors": 0, "already_frozen": 4}
    assert len(httpserver.log) == 1
    after = _rows(engine)
    assert (after[BROKEN]["cited_by_count"], after[BROKEN]["lookup_error"]) == (9, None)
    assert {k: v for k, v in after.items() if k != BROKEN} == {k: v for k, v in before.items() if k != BROKEN}


def test_frozen_counts_reach_document_importance(engine, release, openalex, httpserver):
    freeze_source_counts(engine, RELEASE, settings=_runtime(httpserver))
    (ctx,) = load_reports(engine, [release])
    assert {s.arxiv_id: s.cited_by_count for s in ctx.cited_arxiv_sources()} == {
        FOUND: 42, MISSING: None, FROM_EXEMPLAR: 77, BROKEN: None}
    (score,) = DI.score(ctx, [])
    # S with counts: 42, 77 -> median 59.5; S* with counts: 77 (the other exemplar reference has none).
    assert score.value == pytest.approx(59.5 / 77)
    assert score.details["sources_missing_count"] == [MISSING, BROKEN]


def test_a_release_without_cited_arxiv_papers_needs_no_openalex(engine, httpserver):
    with engine.begin() as conn:
        db.upsert(conn, "releases", [{"release_id": RELEASE, "status": "published"}], key=["release_id"])
    counts = freeze_source_counts(engine, RELEASE, settings=_runtime(httpserver))
    assert counts == {"from_exemplar": 0, "looked_up": 0, "not_found": 0, "errors": 0, "already_frozen": 0}
    assert httpserver.log == []


def test_concurrent_freezes_look_each_paper_up_once(engine, release, openalex, httpserver):
    """Document-importance tasks of several systems may start together (one mapped task per system)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(3) as pool:
        runs = list(pool.map(lambda _: freeze_source_counts(engine, RELEASE, settings=_runtime(httpserver)),
                             range(3)))
    assert sorted(r["looked_up"] for r in runs) == [0, 0, 1]
    assert sorted(r["already_frozen"] for r in runs) == [1, 5, 5]
    assert len(httpserver.log) == 3
