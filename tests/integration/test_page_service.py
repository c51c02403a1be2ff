"""The leaderboard page as a web service (real PostgreSQL, uvicorn on a real socket, httpx as the client):
an unchanged board is a 304 for a conditional request, a changed one is not; an unreachable warehouse or a
pool with no free connection is a 503 with Retry-After in seconds, never a hang."""

from __future__ import annotations

import socket
import time

import httpx
import pytest
import sqlalchemy as sa
from support.chromium import serve
from support.page_board import JUDGE, MONTH, SYSTEMS, seed_board, seed_report

from deepscholar import db
from deepscholar.settings import current_settings
from deepscholar.web import create_app
from deepscholar.web.freshness import STAMP_MARK

BOARD_ROUTES = ["/", "/history", f"/versions?release={MONTH}&judge_config={JUDGE}", "/api/leaderboard",
                "/api/history", f"/api/versions?release={MONTH}&judge_config={JUDGE}"]


def test_an_unchanged_board_is_a_304_and_a_new_version_is_not(engine):
    seed_board(engine)
    with serve(create_app(lambda: engine)) as url, httpx.Client(base_url=url, timeout=30) as client:
        tags = {}
        for route in BOARD_ROUTES:
            first = client.get(route)
            assert first.status_code == 200, (route, first.text[:300])
            tag = first.headers["etag"]
            assert first.headers["cache-control"] == "no-cache"
            again = client.get(route, headers={"If-None-Match": tag})
            assert again.status_code == 304 and again.content == b"" and again.headers["etag"] == tag, route
            assert again.headers["x-content-type-options"] == "nosniff"  # the guards' headers on a 304 too
            assert client.get(route, headers={"If-None-Match": '"other", W/' + tag}).status_code == 304
            assert client.get(route, headers={"If-None-Match": '"other"'}).status_code == 200
            tags[route] = tag
        # Another query string is another page; another mount (the Airflow plugin's prefix) another tag.
        assert client.get("/", params={"release": MONTH}).headers["etag"] != tags["/"]
        # A re-judged month's next board version changes every board read's tag: the client gets the new page.
        seed_board(engine, version=2)
        for route in BOARD_ROUTES:
            fresh = client.get(route, headers={"If-None-Match": tags[route]})
            assert fresh.status_code == 200 and fresh.headers["etag"] != tags[route], route
        # A report's page is kept by what it shows: a re-judged score or a deleted one is a new tag.
        assert client.get("/report/999999").status_code == 404
        report_id = seed_report(engine)
        report_page = client.get(f"/report/{report_id}")
        assert report_page.status_code == 200 and b"rescored" not in report_page.content
        tag = report_page.headers["etag"]
        assert client.get(f"/report/{report_id}", headers={"If-None-Match": tag}).status_code == 304
        with engine.begin() as conn:
            conn.execute(sa.text("UPDATE deepscholar.metric_scores SET unscored_reason = 'rescored', value = NULL "
                                 "WHERE report_id = :r"), {"r": report_id})
        rescored = client.get(f"/report/{report_id}", headers={"If-None-Match": tag})
        assert rescored.status_code == 200 and rescored.headers["etag"] != tag and b"rescored" in rescored.content
        with engine.begin() as conn:
            conn.execute(sa.text("DELETE FROM deepscholar.metric_scores WHERE report_id = :r"), {"r": report_id})
        emptied = client.get(f"/report/{report_id}", headers={"If-None-Match": rescored.headers["etag"]})
        assert emptied.status_code == 200 and b"rescored" not in emptied.content
        # A system's page is conditional too, and its registration is part of its tag.
        system_page = client.get(f"/system/{SYSTEMS[0]}")
        assert system_page.status_code == 200 and "etag" in system_page.headers
        assert client.get(f"/system/{SYSTEMS[0]}",
                          headers={"If-None-Match": system_page.headers["etag"]}).status_code == 304
        assert client.get(f"/system/{SYSTEMS[1]}").headers["etag"] != system_page.headers["etag"]
        with engine.begin() as conn:
            conn.execute(sa.text("UPDATE deepscholar.systems SET version = 'v2-registered' WHERE system_id = :s"),
                         {"s": SYSTEMS[0]})
        changed = client.get(f"/system/{SYSTEMS[0]}", headers={"If-None-Match": system_page.headers["etag"]})
        assert changed.status_code == 200 and changed.headers["etag"] != system_page.headers["etag"]
        assert b"v2-registered" in changed.content and b"v2-registered" not in system_page.content


def test_a_board_read_is_rendered_once_per_board_stamp(engine):
    """A later reader of the same page under the same board stamp gets the kept rendering for one statement
    (the stamp), with or without a conditional request; readers arriving together after a new board version
    share one build."""
    from concurrent.futures import ThreadPoolExecutor

    seed_board(engine)
    statements: list[str] = []

    def record(conn, cursor, statement, *args) -> None:
        statements.append(statement)

    sa.event.listen(engine, "before_cursor_execute", record)
    try:
        with serve(create_app(lambda: engine)) as url, httpx.Client(base_url=url, timeout=30) as client:
            # The app's first request reads the views' tables once (freshness.PageStamps); a 404 is not kept.
            assert client.get("/versions", params={"release": "2099-01", "judge_config": JUDGE}).status_code == 404
            per_build = {}
            for route in BOARD_ROUTES:
                statements.clear()
                first = client.get(route)
                per_build[route] = len(statements)
                statements.clear()
                again = client.get(route)
                assert again.status_code == first.status_code == 200, route
                assert again.content == first.content and again.headers["etag"] == first.headers["etag"], route
                assert again.headers["content-type"] == first.headers["content-type"], route
                assert len(statements) == 1 and STAMP_MARK in statements[0], (route, statements)
                assert per_build[route] > 1, route
            seed_board(engine, version=2)
            statements.clear()
            with ThreadPoolExecutor(12) as pool:
                answers = list(pool.map(lambda _: client.get("/"), range(12)))
            assert {a.status_code for a in answers} == {200} and len({a.content for a in answers}) == 1
            assert len({a.headers["etag"] for a in answers}) == 1
            builds = [s for s in statements if STAMP_MARK not in s]
            assert len(builds) == per_build["/"] - 1, "twelve readers of a new version: one build"
            # A missing page is not kept: asked again, it is looked up again (and still a 404).
            for _ in range(2):
                statements.clear()
                assert client.get("/versions", params={"release": "2099-01", "judge_config": JUDGE}).status_code == 404
                assert len(statements) > 1
    finally:
        sa.event.remove(engine, "before_cursor_execute", record)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again on exit: nothing listens there


def test_an_unreachable_warehouse_is_a_503_in_seconds(monkeypatch):
    monkeypatch.setenv("DEEPSCHOLAR_WEB_DB_WAIT_SECONDS", "2")
    monkeypatch.setenv("DEEPSCHOLAR_DB_CONNECT_RETRIES", "6")  # the tasks' patience: the page must not use it
    url = f"postgresql+psycopg2://nobody@127.0.0.1:{_closed_port()}/warehouse"
    with serve(create_app(lambda: db.reader_engine(url))) as base, httpx.Client(base_url=base, timeout=60) as client:
        for route in ("/", "/api/leaderboard"):
            started = time.monotonic()
            answer = client.get(route)
            assert time.monotonic() - started < 10, route
            assert answer.status_code == 503 and answer.headers["retry-after"] == "30", route
            assert "unreachable" in answer.text


def test_a_pool_with_no_free_connection_is_a_503_naming_no_secret(engine, db_url, monkeypatch):
    seed_board(engine)
    monkeypatch.setenv("DEEPSCHOLAR_WEB_DB_WAIT_SECONDS", "1")
    monkeypatch.setenv("DEEPSCHOLAR_DB_POOL_SIZE", "1")
    reader = db.reader_engine(db_url)
    assert reader.pool.size() == current_settings().db_pool_size == 1
    with serve(create_app(lambda: reader)) as base, httpx.Client(base_url=base, timeout=60) as client:
        assert client.get("/").status_code == 200
        with reader.connect() as held:  # the one connection, busy elsewhere (a long report page, say)
            held.execute(sa.text("SELECT 1"))
            started = time.monotonic()
            answer = client.get("/api/leaderboard")
            assert time.monotonic() - started < 8
        assert answer.status_code == 503 and answer.json() == {
            "error": "Every warehouse connection of this server is busy; try again in a few seconds."}
        assert client.get("/api/leaderboard").status_code == 200  # free again: served


@pytest.mark.parametrize("route", ["/", "/api/leaderboard"])
def test_a_huge_if_none_match_is_read_bounded(engine, route):
    seed_board(engine)
    with serve(create_app(lambda: engine)) as url:
        answer = httpx.get(url + route, headers={"If-None-Match": ", ".join(['"x"'] * 2000)}, timeout=30)
    assert answer.status_code == 200


def test_a_months_category_boards_are_computed_once_per_board_stamp(engine, monkeypatch):
    """The page's category boards (seconds of bootstrap for a real month) are computed once per roll-up,
    also when readers arrive together; a new board version computes them again."""
    from concurrent.futures import ThreadPoolExecutor

    from deepscholar.evaluation.boards import pooled

    seed_board(engine)
    computed = []
    real = pooled.category_boards

    def counted(*args, **kwargs):  # the real computation, counted
        computed.append(args[1])
        time.sleep(0.3)  # long enough for the readers below to arrive while it runs
        return real(*args, **kwargs)

    monkeypatch.setattr(pooled, "category_boards", counted)
    with serve(create_app(lambda: engine)) as url:
        def view(_):
            return httpx.get(url + "/", timeout=30).status_code

        with ThreadPoolExecutor(8) as readers:
            assert set(readers.map(view, range(8))) == {200}
        assert len(computed) == 1
        assert view(0) == 200 and len(computed) == 1
        seed_board(engine, version=2)
        assert view(0) == 200 and len(computed) == 2
