"""A host that is down stops work in bounded time (http_guard): real HTTP to local servers that fail every
request (or a closed port), the real clients (pyalex/requests, arxiv, requests for external systems), real
PostgreSQL. Bounded is asserted as requests the server saw, never as wall time."""

from __future__ import annotations

import json
import re
import socket
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa
from werkzeug import Request, Response

from deepscholar import db
from deepscholar.errors import InfrastructureError
from deepscholar.http_guard import BREAKER, HostBreaker, HostUnavailable, host_of
from deepscholar.release.source_counts import freeze_source_counts
from deepscholar.release.spec import ReleaseSpec
from deepscholar.release.steps import ReleaseContext, extract_exemplars, resolve_references
from deepscholar.settings import Settings
from deepscholar.sources.openalex import OpenAlexSource
from deepscholar.systems.generation import generate_batch, plan_pairs
from deepscholar.systems.registry import add_system

RELEASE = "2025-06"
QUERY = "2506.00001"
CITED = [f"2401.{i:05d}" for i in range(10, 70)]  # 60 papers cited by one report: DOI batches of 50 and 10
ANSWERED = set(CITED[:50])  # OpenAlex answers their batch, then goes down
FROZEN = "2401.00099"  # frozen by an earlier run: must survive
RETRIES = 2  # per lookup, in the OpenAlex session (urllib3): 3 requests per failed lookup
N = 5  # the breaker's default


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _work(arxiv_id: str) -> dict:
    return {"id": f"https://openalex.org/W{arxiv_id[-2:]}", "title": f"Source {arxiv_id}",
            "doi": f"https://doi.org/10.48550/arxiv.{arxiv_id}", "cited_by_count": int(arxiv_id[-2:])}


def _works(works: list[dict]) -> Response:
    return Response(json.dumps({"meta": {"count": len(works), "page": 1, "per_page": 50}, "results": works,
                                "group_by": []}), content_type="application/json")


def _asked(request: Request) -> list[str]:
    """The arXiv ids of a batched DOI lookup (/works?filter=doi:10.48550/arxiv.a|...)."""
    flt = request.args.get("filter", "")
    return [d.rsplit("arxiv.", 1)[-1] for d in flt.removeprefix("doi:").split("|")] if flt.startswith("doi:") else []


class OpenAlexGoingDown:
    """Answers the DOI batch of ANSWERED (or everything once `up`); 503 for the rest."""

    def __init__(self) -> None:
        self.up = False

    def __call__(self, request: Request) -> Response:
        asked = _asked(request)
        if self.up or set(asked) <= ANSWERED:
            return _works([_work(a) for a in asked])
        return Response("upstream timeout", status=503)


@pytest.fixture
def cited_release(engine):
    with engine.begin() as conn:
        db.upsert(conn, "releases", [{"release_id": RELEASE, "status": "published"}], key=["release_id"])
        db.upsert(conn, "release_queries", [{
            "release_id": RELEASE, "arxiv_id": QUERY, "title": "Q", "abstract": "A", "section_raw_latex": "x",
            "section_text": "x", "word_count": 1}], key=["release_id", "arxiv_id"])
        db.upsert(conn, "systems", [{"system_id": "a", "kind": "extractive"}], key=["system_id"])
        report_id = conn.execute(sa.text(
            "INSERT INTO reports (release_id, system_id, arxiv_id, status, text) VALUES (:r, 'a', :q, 'ok', 'x') "
            "RETURNING report_id"), {"r": RELEASE, "q": QUERY}).scalar()
        db.upsert(conn, "report_sources", [
            {"report_id": report_id, "source_idx": i, "arxiv_id": a, "title": f"Source {a}"}
            for i, a in enumerate([*CITED, FROZEN], start=1)], key=["report_id", "source_idx"])
        db.upsert(conn, "source_cited_by", [
            {"release_id": RELEASE, "arxiv_id": FROZEN, "openalex_id": "W99", "cited_by_count": 99}],
            key=["release_id", "arxiv_id"])
    return engine


def _frozen(engine) -> dict[str, dict]:
    with engine.connect() as conn:
        return {r["arxiv_id"]: dict(r) for r in conn.execute(sa.text(
            "SELECT * FROM source_cited_by WHERE release_id = :r"), {"r": RELEASE}).mappings()}


def _openalex(url: str) -> OpenAlexSource:
    return OpenAlexSource(base_url=url, max_retries=RETRIES, backoff_seconds=0.001, timeout=5)


def test_openalex_down_stops_the_freeze_after_n_lookups_and_keeps_what_was_stored(cited_release, httpserver):
    server = OpenAlexGoingDown()
    httpserver.expect_request(re.compile(r"^/works.*")).respond_with_handler(server)
    url = httpserver.url_for("/").rstrip("/")
    settings = Settings.from_env().replace(openalex_url=url)

    with pytest.raises(HostUnavailable) as caught:
        freeze_source_counts(cited_release, RELEASE, settings=settings, openalex=_openalex(url))
    error = caught.value
    failed = len(CITED) - len(ANSWERED)  # the second batch: at least N lookups failed in one request
    assert isinstance(error, InfrastructureError) and error.host == host_of(url) and error.failures == failed >= N
    assert str(error).startswith(f"{host_of(url)} unavailable: {failed} consecutive failures")
    assert "503" in str(error) and "it will be retried" in str(error)
    # Bounded: the answered batch, then the failed batch's RETRIES + 1 requests.
    assert len(httpserver.log) == 1 + (RETRIES + 1)
    rows = _frozen(cited_release)
    assert set(rows) == ANSWERED | {FROZEN}  # nothing lost, no paper frozen as an error for the outage
    assert rows[FROZEN]["cited_by_count"] == 99 and all(rows[a]["lookup_error"] is None for a in ANSWERED)

    # The step's retry (a new Airflow process, so a closed breaker) finishes the job once OpenAlex is back.
    BREAKER.reset()
    server.up = True
    httpserver.clear_log()
    counts = freeze_source_counts(cited_release, RELEASE, settings=settings, openalex=_openalex(url))
    assert counts == {"from_exemplar": 0, "looked_up": len(CITED) - len(ANSWERED), "not_found": 0, "errors": 0,
                      "already_frozen": len(ANSWERED) + 1}
    assert len(httpserver.log) == 1
    assert {a: r["cited_by_count"] for a, r in _frozen(cited_release).items()} == {
        **{a: int(a[-2:]) for a in CITED}, FROZEN: 99}


def test_connection_refused_opens_after_the_configured_number_of_failures(cited_release, monkeypatch):
    monkeypatch.setenv("DEEPSCHOLAR_BREAKER_FAILURES", "2")
    url = f"http://127.0.0.1:{_closed_port()}"
    # The first batched request fails 50 lookups: more in a row than the configured 2.
    with pytest.raises(HostUnavailable, match=r"127\.0\.0\.1:\d+ unavailable: 50 consecutive failures .*ConnectionError"):
        freeze_source_counts(cited_release, RELEASE, settings=Settings.from_env().replace(openalex_url=url),
                             openalex=_openalex(url))
    assert set(_frozen(cited_release)) == {FROZEN}
    assert BREAKER.failures_of(host_of(url)) == 1  # one request so far
    with pytest.raises(HostUnavailable):  # the second failed request opens the breaker
        _openalex(url).work_by_doi("10.48550/arXiv.2401.00010")
    assert BREAKER.failures_of(host_of(url)) == 2
    # Open: the next call fails at once, before any connection attempt.
    with pytest.raises(HostUnavailable):
        _openalex(url).work_by_doi("10.48550/arXiv.2401.00010")


def test_an_isolated_failure_is_stored_as_before_and_a_success_resets_the_count(cited_release, httpserver):
    failing = CITED[4]  # no DOI finds this paper and its title search fails; the later batch answers

    def handler(request: Request) -> Response:
        if request.args.get("filter", "").startswith("title.search:"):
            return Response("boom", status=500)
        return _works([_work(a) for a in _asked(request) if a != failing])

    httpserver.expect_request(re.compile(r"^/works.*")).respond_with_handler(handler)
    url = httpserver.url_for("/").rstrip("/")
    counts = freeze_source_counts(cited_release, RELEASE, settings=Settings.from_env().replace(openalex_url=url),
                                  openalex=_openalex(url))
    assert counts["errors"] == 1 and counts["looked_up"] == len(CITED) - 1
    assert _frozen(cited_release)[failing]["lookup_error"].startswith("error: HTTPError: 500")
    assert BREAKER.failures_of(host_of(url)) == 0


def test_an_external_system_down_stops_the_batch_after_n_queries(engine, httpserver):
    cutoff = datetime(2025, 6, 10, tzinfo=UTC)
    with engine.begin() as conn:
        db.upsert(conn, "releases", [{"release_id": RELEASE, "status": "published"}], key=["release_id"])
        db.upsert(conn, "release_queries", [
            {"release_id": RELEASE, "arxiv_id": f"2506.{i:05d}", "title": f"Paper {i}", "abstract": "A.",
             "published": cutoff, "section_raw_latex": "x", "section_text": "x", "word_count": 1}
            for i in range(1, 9)], key=["release_id", "arxiv_id"])
    httpserver.expect_request("/report", method="POST").respond_with_data("bad gateway", status=502)
    add_system(engine, "remote", "external", {"endpoint": httpserver.url_for("/report"), "retry_wait": 0,
                                              "attempts": 2})
    pairs = plan_pairs(engine, RELEASE, ["remote"])
    assert len(pairs) == 8
    with pytest.raises(HostUnavailable, match=rf"{host_of(httpserver.url_for('/'))} unavailable: {N} consecutive"):
        generate_batch(engine, pairs)
    assert len(httpserver.log) == N * 2
    with engine.connect() as conn:
        stored = conn.execute(sa.text("SELECT status FROM reports WHERE system_id = 'remote'")).scalars().all()
    # The queries before the breaker opened are this system's failures; the rest are left for the retry.
    assert stored == ["system_error"] * (N - 1)
    assert len(plan_pairs(engine, RELEASE, ["remote"])) == 8


def _open(url: str) -> None:
    for _ in range(N):
        BREAKER.failure(host_of(url), "ConnectTimeout: test outage")


def test_release_steps_let_an_open_breaker_through_their_per_paper_handlers(engine, httpserver):
    """extract and resolve record a bad paper and go on; a host that is down stops them with nothing recorded."""
    spec = ReleaseSpec()
    settings = Settings.from_env().replace(
        arxiv_api_url=httpserver.url_for("/api/query"), arxiv_eprint_url=httpserver.url_for("/e-print"),
        openalex_url=httpserver.url_for("/openalex").rstrip("/"), arxiv_delay_seconds=0)
    published = datetime(2025, 6, 3, tzinfo=UTC)
    with engine.begin() as conn:
        db.upsert(conn, "releases", [{"release_id": RELEASE, "status": "building", "config": spec.to_dict()}],
                  key=["release_id"])
        db.upsert(conn, "papers", [{"arxiv_id": QUERY, "version": 1, "title": "T", "abstract": "A", "authors": [],
                                    "categories": ["cs.CL"], "primary_category": "cs.CL", "published": published,
                                    "updated": published}], key=["arxiv_id", "version"])
        db.upsert(conn, "release_candidates", [{"release_id": RELEASE, "arxiv_id": QUERY, "version": 1,
                                                "stage": "source", "status": "pending"}], key=["release_id", "arxiv_id"])
        db.upsert(conn, "release_queries", [{
            "release_id": RELEASE, "arxiv_id": "2506.00002", "title": "Q", "abstract": "A", "section_raw_latex": "x",
            "section_text": "x", "word_count": 1}], key=["release_id", "arxiv_id"])
        db.upsert(conn, "exemplar_references", [{
            "release_id": RELEASE, "arxiv_id": "2506.00002", "cite_key": "k", "bib_type": "article",
            "bib_title": "Dense passage retrieval for open-domain question answering", "bib_fields": {}}],
            key=["release_id", "arxiv_id", "cite_key"])
    ctx = ReleaseContext(engine, RELEASE, spec, settings)

    _open(httpserver.url_for("/"))  # arXiv API, e-prints and OpenAlex all live on this one test host
    with pytest.raises(HostUnavailable, match="ConnectTimeout: test outage"):
        extract_exemplars(ctx)
    with pytest.raises(HostUnavailable):
        resolve_references(ctx)
    assert len(httpserver.log) == 0  # no request to a host known to be down
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT status FROM release_candidates")).scalar() == "pending"
        assert conn.execute(sa.text("SELECT resolution_method, resolution_error FROM exemplar_references")).one() == (
            None, None)


def test_the_breaker_counts_streaks_times_them_and_cools_down():
    now = [0.0]
    breaker = HostBreaker(failures=3, seconds=60, clock=lambda: now[0])
    assert breaker.failure("h", "ConnectError: a") is None
    breaker.success("h")  # an answer resets the streak
    assert breaker.failure("h", "ConnectError: a") is None and breaker.failure("h", "ConnectError: b") is None
    opened = breaker.failure("h", "ConnectError: c")
    assert isinstance(opened, HostUnavailable) and opened.failures == 3 and opened.last_error == "ConnectError: c"
    with pytest.raises(HostUnavailable):
        breaker.check("h")
    breaker.check("other:80")  # per host
    now[0] = 61.0  # cooled down: calls go through again; one more failure opens it at once
    breaker.check("h")
    assert breaker.failure("h", "ConnectError: d") is not None
    # Two failures spanning the time budget open it before the count is reached.
    breaker.reset()
    assert breaker.failure("slow", "ReadTimeout", started=100.0) is None
    now[0] = 200.0
    assert breaker.failure("slow", "ReadTimeout") is not None
