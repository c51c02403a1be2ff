"""ArxivSearch through the real `arxiv` client against the replay server: the cutoff holds either way."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import parse_qs

import pytest
import sqlalchemy as sa

from deepscholar import db
from deepscholar.replay.demo_snapshot import write_demo_snapshot
from deepscholar.replay.server import ReplayServer
from deepscholar.search import make_search
from deepscholar.search.arxiv import ArxivSearch, arxiv_terms
from deepscholar.systems.base import Query

# "Over-Smoothing in Deep Graph Neural Networks" (2303.11410) is published exactly at this instant.
CUTOFF = datetime(2023, 3, 18, 7, 11, tzinfo=UTC)
LATER_GNN = {"2303.11410", "2404.18594", "2506.01003"}  # match "graph neural networks", not before CUTOFF


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("replay_snapshot")
    write_demo_snapshot(dest)
    return dest


@pytest.fixture
def server(snapshot):
    with ReplayServer(snapshot) as srv:
        yield srv


def _search(server, **kw) -> ArxivSearch:
    return ArxivSearch(CUTOFF, api_url=server.arxiv_api_url, delay_seconds=kw.pop("delay_seconds", 0.0), **kw)


def _queries(server) -> list[str]:
    return [parse_qs(r.query)["search_query"][0] for r in server.requests if r.path == "/api/query"]


def test_results_are_before_the_cutoff_and_the_query_asks_for_that(server):
    search = _search(server)
    found = search.search("graph neural networks", k=10)
    ids = [r.arxiv_id for r in found]
    assert ids and "2303.11410" not in ids and not LATER_GNN & set(ids)
    assert {"1903.18750", "2011.03018", "2203.07036"} <= set(ids)
    assert all(r.published < CUTOFF for r in found)
    assert all(r.url == f"https://arxiv.org/abs/{r.arxiv_id}" and r.abstract and r.title for r in found)
    first = _queries(server)[0]
    assert first == "(all:graph AND all:neural AND all:networks) AND submittedDate:[199101010000 TO 202303180710]"
    assert search.name == "arxiv" and search.cutoff == CUTOFF


def test_results_on_or_after_the_cutoff_are_dropped_when_the_server_returns_them(server):
    search = _search(server, date_filter_in_query=False)
    found = search.search("graph neural networks", k=30)
    ids = {r.arxiv_id for r in found}
    assert ids and not LATER_GNN & ids
    assert all(r.published < CUTOFF for r in found)
    # The server did return them (including the one exactly at the cutoff); the tool dropped them.
    assert LATER_GNN <= set(search.history[-1]["dropped_after_cutoff"])
    assert "submittedDate" not in _queries(server)[0]


def test_or_query_tops_up_when_all_terms_find_fewer_than_k(server):
    search = _search(server)
    found = search.search("curvature heterophily", k=5)  # no single earlier paper has both words
    queries = _queries(server)
    assert len(queries) == 2 and " OR " in queries[1]
    assert {"1904.13353", "2011.03018"} <= {r.arxiv_id for r in found}
    assert all(r.published < CUTOFF for r in found)


def test_excluded_ids_and_empty_queries(server):
    search = _search(server, exclude_ids=["2011.03018v1"])
    assert "2011.03018" not in {r.arxiv_id for r in search.search("graph neural networks", k=10)}
    server.clear_requests()
    assert search.search("the of and", k=5) == [] and search.search("graph", k=0) == []
    assert _queries(server) == []
    assert arxiv_terms("Graph AND neural OR the (networks)") == ["graph", "neural", "networks"]


def test_requests_are_paced_by_the_delay(server):
    search = _search(server, delay_seconds=0.3)
    started = time.monotonic()
    search.search("curvature heterophily", k=5)  # an AND and an OR request
    assert len(_queries(server)) == 2
    assert time.monotonic() - started >= 0.3


def test_seen_papers_are_recorded_in_the_corpus_first_write_wins(server, engine):
    with engine.begin() as conn:
        db.upsert(conn, "corpus", [{"arxiv_id": "2011.03018", "title": "kept as frozen", "abstract": "",
                                    "published": datetime(2020, 11, 30, tzinfo=UTC), "source": "reference"}],
                  key=["arxiv_id"])
    _search(server, engine=engine).search("graph neural networks", k=10)
    with engine.connect() as conn:
        rows = dict(conn.execute(sa.text("SELECT arxiv_id, source FROM corpus")).all())
        kept = conn.execute(sa.text("SELECT title FROM corpus WHERE arxiv_id = '2011.03018'")).scalar()
    assert rows["1903.18750"] == "search" and rows["2011.03018"] == "reference" and kept == "kept as frozen"


def test_make_search_takes_the_endpoint_from_the_environment(server, engine, monkeypatch):
    monkeypatch.setenv("DEEPSCHOLAR_ARXIV_API_URL", server.arxiv_api_url)
    monkeypatch.setenv("DEEPSCHOLAR_ARXIV_DELAY_SECONDS", "0")
    query = Query("2023-03", "2303.11410", "Over-Smoothing in Deep Graph Neural Networks", "...", CUTOFF)
    search = make_search("arxiv", engine, query)
    assert search.name == "arxiv" and search.cutoff == CUTOFF and search.source.delay_seconds == 0
    found = search.search("over-smoothing graph neural networks", k=5)
    assert found and all(r.published < CUTOFF and r.arxiv_id != "2303.11410" for r in found)
