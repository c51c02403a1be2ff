"""The release's external edges failing: arXiv search, arXiv e-prints and OpenAlex, over real HTTP.

Each case runs the release steps of the demo month against the replay server with failures injected
where a real month meets them (a 503 or a stall on page 2 of the search, a feed cut off by a proxy, an
e-print that is gone or whose host is down, OpenAlex throttling with Retry-After), and checks two things:
the step either finishes with exactly what an undisturbed run stores, or fails with an error naming the
host (the Airflow task is retried) having written nothing half-done; and a re-run after the fault is
gone completes the month with no row lost or duplicated.

Retries are made fast with DEEPSCHOLAR_HTTP_RETRIES/BACKOFF/TIMEOUT (http_guard.http_setting), the
same knobs an operator has; the replay server's page cap makes the search paginate as a big month does.
"""

from __future__ import annotations

import json

import arxiv
import pytest
import sqlalchemy as sa
from support.settings import replay_settings
from support.warehouse import empty_warehouse

from deepscholar import db
from deepscholar.errors import InfrastructureError
from deepscholar.http_guard import BREAKER, HostUnavailable
from deepscholar.release import steps
from deepscholar.release.spec import ReleaseSpec
from deepscholar.replay.demo_snapshot import write_demo_snapshot
from deepscholar.replay.server import Delay, ReplayServer, Throttled, Truncated
from faults.conftest import assert_no_loss, unchanged, warehouse_fingerprint

pytestmark = pytest.mark.slow  # builds releases against failing hosts

MONTH = "2025-06"
RETRIES = 2  # DEEPSCHOLAR_HTTP_RETRIES in these tests: a failing call is tried 3 times
PAGE_CAP = 4  # entries per search page: the demo month's search then takes several pages
TIMEOUT = 1.0


@pytest.fixture(autouse=True)
def fast_retries(monkeypatch):
    monkeypatch.setenv("DEEPSCHOLAR_HTTP_RETRIES", str(RETRIES))
    monkeypatch.setenv("DEEPSCHOLAR_HTTP_BACKOFF_SECONDS", "0.01")
    monkeypatch.setenv("DEEPSCHOLAR_HTTP_TIMEOUT_SECONDS", str(TIMEOUT))


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory):
    root = tmp_path_factory.mktemp("snapshot")
    write_demo_snapshot(root, month=MONTH)
    return root


@pytest.fixture
def server(snapshot):
    with ReplayServer(snapshot) as srv:
        srv.app.arxiv_page_cap = PAGE_CAP
        yield srv


def _spec(snapshot) -> ReleaseSpec:
    categories = json.loads((snapshot / "manifest.json").read_text())["categories"]
    return ReleaseSpec(categories=categories, judge="local")


STEPS = ("search", "filter", "extract", "resolve")
_STEP_FUNCTIONS = {"search": steps.search_candidates, "filter": steps.filter_candidates,
                   "extract": steps.extract_exemplars, "resolve": steps.resolve_references}


def _run(ctx, upto: str) -> None:
    for name in STEPS[: STEPS.index(upto) + 1]:
        _STEP_FUNCTIONS[name](ctx)


def _outcome(engine) -> dict:
    """What the steps decided, by natural key: candidates, queries and each reference's resolution."""
    with engine.connect() as conn:
        return {
            "candidates": {(r.arxiv_id, r.stage, r.status, r.reason) for r in conn.execute(sa.text(
                "SELECT arxiv_id, stage, status, reason FROM release_candidates WHERE release_id = :r"),
                {"r": MONTH})},
            "queries": set(conn.execute(sa.text(
                "SELECT arxiv_id FROM release_queries WHERE release_id = :r"), {"r": MONTH}).scalars()),
            # Whether resolved from the cache or afresh, the identity and the frozen count must agree.
            "references": {(r[0], r[1], _kind(r[2]), *r[3:]) for r in conn.execute(sa.text(
                "SELECT arxiv_id, cite_key, resolution_method, resolved_arxiv_id, openalex_id, cited_by_count "
                "FROM exemplar_references WHERE release_id = :r"), {"r": MONTH})},
        }


def _kind(method: str | None) -> str | None:
    return method if method in (None, "unresolved") else "resolved"


def _assert_same(outcome: dict, expected: dict) -> None:
    for part in expected:
        missing, extra = expected[part] - outcome[part], outcome[part] - expected[part]
        assert not missing and not extra, f"{part}: missing {sorted(missing)[:5]}, unexpected {sorted(extra)[:5]}"


@pytest.fixture(scope="module")
def undisturbed(db_url, snapshot) -> dict:
    """The same steps with no fault injected, in a fresh warehouse: what every case must end up with."""
    engine = db.get_engine(db_url)
    empty_warehouse(engine)
    with pytest.MonkeyPatch.context() as mp, ReplayServer(snapshot) as srv:
        mp.setenv("DEEPSCHOLAR_HTTP_RETRIES", str(RETRIES))
        srv.app.arxiv_page_cap = PAGE_CAP
        ctx = steps.open_release(engine, MONTH, _spec(snapshot), replay_settings(srv))
        _run(ctx, "resolve")
        pages = sum(r.path == "/api/query" and "submittedDate" in r.query for r in srv.requests)
        doi_lookups = [r for r in srv.requests if r.path == "/works" and "filter=doi" in r.query]
    outcome = _outcome(engine)
    # DOIs are looked up 50 to a request (filter=doi:a|b|...), not one request per reference.
    assert 0 < len(doi_lookups) <= -(-len(outcome["references"]) // 50) * 2
    empty_warehouse(engine)
    BREAKER.reset()
    assert pages >= 3, f"the search took {pages} pages: too few to fail in the middle of it"
    assert outcome["queries"] and outcome["references"]
    return outcome


def _search_pages(srv: ReplayServer) -> list:
    return [r for r in srv.requests if r.path == "/api/query" and "submittedDate" in r.query]


# --- arXiv search ----------------------------------------------------------------------------------------

# (id, what page 2 onwards answers, whether the search survives it)
ARXIV_CASES = [
    ("api_503_mid_pagination_recovers", [None, 503, 503], True),
    ("api_503_mid_pagination_outage", [None] + [503] * (RETRIES + 1), False),
    ("api_timeout_mid_pagination_recovers", [None, Delay(TIMEOUT * 2)], True),
    ("api_truncated_feed_recovers", [None, Truncated(0.6)], True),
    ("api_truncated_feed_every_time", [None] + [Truncated(0.6)] * (RETRIES + 1), False),
    ("api_empty_body_mid_pagination", [None] + [Truncated(0.0)] * (RETRIES + 1), False),
]


@pytest.mark.parametrize(("injected", "survives"), [c[1:] for c in ARXIV_CASES], ids=[c[0] for c in ARXIV_CASES])
def test_arxiv_search_fails_mid_pagination(engine, server, snapshot, undisturbed, injected, survives):
    ctx = steps.open_release(engine, MONTH, _spec(snapshot), replay_settings(server))
    server.inject_failures("/api/query", injected)
    if survives:
        with unchanged(engine, allowed_to_change=["papers", "corpus", "release_candidates"]):
            steps.search_candidates(ctx)
        searched = {c for c in _outcome(engine)["candidates"]}
        assert searched == {(a, "search", "pending", None) for a, *_ in undisturbed["candidates"]}
        pages = _search_pages(server)
        assert len(pages) > len(injected) - 1, "the search stopped before its last page"
    else:
        # Page 1 arrived, page 2 never did: nothing of the month's search is stored (a partial candidate
        # list would shrink the month without a word), and the error names the host.
        with unchanged(engine):
            with pytest.raises((arxiv.ArxivError, InfrastructureError)) as raised:
                steps.search_candidates(ctx)
        assert f"127.0.0.1:{server.port}" in str(raised.value)
        assert len(_search_pages(server)) == len(injected)  # 1 good page + every attempt at page 2

    # The fault is gone: a re-run (Airflow's retry) finishes the month as if nothing had happened.
    server.clear_failures()
    before = warehouse_fingerprint(engine)
    _run(ctx, "resolve")
    assert_no_loss(before, warehouse_fingerprint(engine), allowed_to_change=[
        "papers", "corpus", "release_candidates", "release_queries", "exemplar_references", "resolution_cache"])
    _assert_same(_outcome(engine), undisturbed)


# --- arXiv e-prints --------------------------------------------------------------------------------------

def _through_filter(engine, server, snapshot):
    ctx = steps.open_release(engine, MONTH, _spec(snapshot), replay_settings(server))
    _run(ctx, "filter")
    with engine.connect() as conn:
        todo = list(conn.execute(sa.text("SELECT arxiv_id FROM release_candidates WHERE release_id = :r "
                                         "AND stage = 'source' ORDER BY arxiv_id"), {"r": MONTH}).scalars())
    assert len(todo) >= 3
    return ctx, todo


def _candidate(engine, arxiv_id: str) -> dict:
    with engine.connect() as conn:
        return dict(conn.execute(sa.text("SELECT stage, status, reason, detail FROM release_candidates "
                                         "WHERE release_id = :r AND arxiv_id = :a"),
                                 {"r": MONTH, "a": arxiv_id}).mappings().one())


EPRINT_CASES = ["eprint_404_is_the_papers", "eprint_500_then_served", "eprint_500_for_one_paper",
                "eprint_host_down"]


@pytest.mark.parametrize("case", EPRINT_CASES)
def test_eprint_failures(engine, server, snapshot, undisturbed, case):
    ctx, todo = _through_filter(engine, server, snapshot)
    victim = todo[1]
    kept_undisturbed = {a for a, stage, status, _ in undisturbed["candidates"] if status == "kept"}
    assert victim in kept_undisturbed
    tables = ["release_candidates", "release_queries", "exemplar_references"]
    before = warehouse_fingerprint(engine)

    if case == "eprint_404_is_the_papers":
        # arXiv has no source for this paper: the paper is dropped with its reason, the month goes on.
        server.inject_failures(f"/e-print/{victim}", [404])
        steps.extract_exemplars(ctx)
        row = _candidate(engine, victim)
        assert (row["stage"], row["status"], row["reason"]) == ("source", "skipped", "no_source")
        assert victim in row["detail"]
        assert _outcome(engine)["queries"] == kept_undisturbed - {victim}
        assert_no_loss(before, warehouse_fingerprint(engine), tables)
        return
    if case == "eprint_500_then_served":
        server.inject_failures(f"/e-print/{victim}", [500, 503])
        steps.extract_exemplars(ctx)
        assert _outcome(engine)["queries"] == kept_undisturbed
        assert_no_loss(before, warehouse_fingerprint(engine), tables)
        return
    if case == "eprint_500_for_one_paper":
        # One paper's download keeps failing after its retries: it is kept as an error with the cause,
        # and picked up again by the next run; the other papers are not held back.
        server.inject_failures(f"/e-print/{victim}", [500] * (RETRIES + 1))
        steps.extract_exemplars(ctx)
        row = _candidate(engine, victim)
        assert row["status"] == "error" and "HTTP 500" in row["detail"] and victim in row["detail"]
        assert _outcome(engine)["queries"] == kept_undisturbed - {victim}
    else:
        # The e-print host is down: the circuit breaker stops the step after a few papers with one error
        # naming the host, instead of marking every paper of the month as failed.
        server.inject_failures("/e-print/", [500] * 1000)
        with pytest.raises(HostUnavailable) as raised:
            steps.extract_exemplars(ctx)
        assert raised.value.host == f"127.0.0.1:{server.port}"
        attempts = [r for r in server.requests if r.path.startswith("/e-print/")]
        assert len(attempts) <= 5 * (RETRIES + 1), "the step went on calling a host that is down"
        with engine.connect() as conn:
            skipped = conn.execute(sa.text("SELECT count(*) FROM release_candidates WHERE release_id = :r "
                                           "AND status = 'skipped' AND stage = 'source'"), {"r": MONTH}).scalar()
        assert skipped == 0, "a host outage was recorded as papers without a source"
        BREAKER.reset()  # Airflow's retry is a new process, with a closed breaker
    assert_no_loss(before, warehouse_fingerprint(engine), tables)

    server.clear_failures()
    again = warehouse_fingerprint(engine)
    steps.extract_exemplars(ctx)
    steps.resolve_references(ctx)
    assert_no_loss(again, warehouse_fingerprint(engine), [*tables, "corpus", "resolution_cache"])
    _assert_same(_outcome(engine), undisturbed)


# --- OpenAlex --------------------------------------------------------------------------------------------

OPENALEX_CASES = ["openalex_429_retry_after_honoured", "openalex_429_past_retries", "openalex_down"]


@pytest.mark.parametrize("case", OPENALEX_CASES)
def test_openalex_failures(engine, server, snapshot, undisturbed, case):
    ctx = steps.open_release(engine, MONTH, _spec(snapshot), replay_settings(server))
    _run(ctx, "extract")
    tables = ["exemplar_references", "corpus", "resolution_cache"]
    before = warehouse_fingerprint(engine)
    server.clear_requests()

    if case == "openalex_429_retry_after_honoured":
        server.inject_failures("/works", [Throttled(1), Throttled(1)])
        steps.resolve_references(ctx)
        works = [r for r in server.requests if r.path.startswith("/works")]
        assert [r.status for r in works[:3]] == [429, 429, 200]
        # The client waited what the server asked before asking again (urllib3 honours Retry-After).
        assert works[0].path == works[1].path == works[2].path
        assert works[1].time - works[0].time >= 0.95 and works[2].time - works[1].time >= 0.95
        assert_no_loss(before, warehouse_fingerprint(engine), tables)
        _assert_same(_outcome(engine), undisturbed)
        return
    if case == "openalex_429_past_retries":
        # Throttled on every attempt of one batched DOI lookup: the references of that batch are left for
        # the next run with the cause recorded — neither resolved nor declared unresolvable — the others
        # are all stored, and the step fails so that Airflow retries it.
        server.inject_failures("/works", [Throttled(0)] * (RETRIES + 1))
        with pytest.raises(InfrastructureError, match="references could not be looked up") as raised:
            steps.resolve_references(ctx)
        with engine.connect() as conn:
            pending = conn.execute(sa.text(
                "SELECT resolution_method, resolution_error FROM exemplar_references WHERE release_id = :r "
                "AND resolution_error IS NOT NULL"), {"r": MONTH}).all()
            stored = conn.execute(sa.text("SELECT count(*) FROM exemplar_references WHERE release_id = :r "
                                          "AND resolution_method IS NOT NULL"), {"r": MONTH}).scalar()
        assert pending and stored and f"{len(pending)} of {len(pending) + stored} references" in str(raised.value)
        assert all(p.resolution_method is None and p.resolution_error.startswith("openalex: 429")
                   and len(p.resolution_error) < 400 for p in pending)
    else:
        server.inject_failures("/works", [503] * 1000)
        with pytest.raises(HostUnavailable) as raised:
            steps.resolve_references(ctx)
        assert raised.value.host == f"127.0.0.1:{server.port}"
        with engine.connect() as conn:
            unresolved = conn.execute(sa.text(
                "SELECT count(*) FROM exemplar_references WHERE release_id = :r "
                "AND resolution_method = 'unresolved'"), {"r": MONTH}).scalar()
        assert unresolved <= sum(m == "unresolved" for _, _, m, *_ in undisturbed["references"]), \
            "an OpenAlex outage made references unresolvable"
        BREAKER.reset()
    assert_no_loss(before, warehouse_fingerprint(engine), tables)

    server.clear_failures()
    again = warehouse_fingerprint(engine)
    steps.resolve_references(ctx)
    assert_no_loss(again, warehouse_fingerprint(engine), tables)
    _assert_same(_outcome(engine), undisturbed)


def test_openalex_down_while_extraction_resolves(engine, server, snapshot, undisturbed, caplog):
    """Deployed, extraction resolves the references of the papers it keeps as it goes (resolve=True). An
    OpenAlex outage then must not cost the month its papers: every paper is extracted as undisturbed,
    the lookups stop after the first failure (not one outage per paper), the references wait for the
    resolve step, which fails while the host is down and completes the month once it is back."""
    ctx = steps.open_release(engine, MONTH, _spec(snapshot), replay_settings(server))
    _run(ctx, "filter")
    server.clear_requests()
    server.inject_failures("/works", [503] * 1000)
    with caplog.at_level("WARNING", logger="deepscholar.release"):
        steps.extract_exemplars(ctx, resolve=True)
    assert "extraction leaves reference lookups to the resolve step" in caplog.text
    with engine.connect() as conn:
        kept = set(conn.execute(sa.text("SELECT arxiv_id FROM release_queries WHERE release_id = :r"),
                                {"r": MONTH}).scalars())
        pending = conn.execute(sa.text("SELECT count(*) FROM exemplar_references WHERE release_id = :r "
                                       "AND resolution_method IS NULL"), {"r": MONTH}).scalar()
    assert kept == undisturbed["queries"]
    assert pending > 0
    works_calls = [r for r in server.requests if r.path.startswith("/works")]
    assert len(works_calls) <= 5 * (RETRIES + 1), "extraction kept calling a host that is down"
    with pytest.raises(InfrastructureError):
        steps.resolve_references(ctx)
    BREAKER.reset()
    server.clear_failures()
    steps.resolve_references(ctx)
    _assert_same(_outcome(engine), undisturbed)


def test_extraction_that_resolves_as_it_goes_ends_as_the_two_steps_do(engine, server, snapshot, undisturbed):
    ctx = steps.open_release(engine, MONTH, _spec(snapshot), replay_settings(server))
    _run(ctx, "filter")
    steps.extract_exemplars(ctx, resolve=True)
    server.clear_requests()
    assert steps.resolve_references(ctx) == {"arxiv": 0, "openalex": 0, "unresolved": 0}
    assert not server.requests, "the resolve step looked up references extraction had resolved"
    _assert_same(_outcome(engine), undisturbed)
