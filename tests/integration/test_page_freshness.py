"""A page's freshness follows from what it reads (web/freshness.py), on a real PostgreSQL and real HTTP.

Every route's statements are planned by PostgreSQL (EXPLAIN), which names the base tables each reads, views
expanded; each of those must be declared for the page, so a page that starts reading another table fails
here until its freshness says how that table's writes show. And the stale 304 that an uncovered table gives
is shown: a view made to read a new table is refused while nothing covers the table, serves a 304 that never
goes stale when the table is declared but not stamped (what the hand-kept table list did), and a fresh page
once a source covers it.
"""

from __future__ import annotations

import os
from dataclasses import replace

import httpx
import pytest
import sqlalchemy as sa
from support.chromium import serve
from support.page_board import JUDGE, MONTH, SYSTEMS, seed_board, seed_report
from support.warehouse import throwaway_warehouse

from deepscholar.web import create_app, freshness


def _seed(engine) -> int:
    seed_board(engine)
    return seed_report(engine)


def _planned_tables(engine, statements: list[tuple[str, object]]) -> dict[str, str]:
    """{base table: a statement reading it}, as PostgreSQL plans the statements (views expanded)."""
    found: dict[str, str] = {}

    def walk(plan, statement: str) -> None:
        if isinstance(plan, dict):
            if "Relation Name" in plan:
                found.setdefault(plan["Relation Name"], " ".join(statement.split())[:160])
            for value in plan.values():
                walk(value, statement)
        elif isinstance(plan, list):
            for value in plan:
                walk(value, statement)

    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        for statement, params in statements:
            cursor.execute("EXPLAIN (FORMAT JSON) " + statement, params)
            walk(cursor.fetchone()[0], statement)
    finally:
        raw.close()
    return found


def test_every_table_a_page_reads_is_declared_for_it(engine):
    report_id = _seed(engine)
    routes = {"board": ["/", f"/?release={MONTH}&version=1", f"/?from={MONTH}&to={MONTH}"],
              "history": ["/history"], "versions": [f"/versions?release={MONTH}&judge_config={JUDGE}"],
              "system": [f"/system/{SYSTEMS[0]}", f"/system/{SYSTEMS[0]}?release={MONTH}"],
              "report": [f"/report/{report_id}"], "api-board": ["/api/leaderboard"],
              "api-window": [f"/api/leaderboard?from={MONTH}&to={MONTH}"],
              "api-history": [f"/api/history?system_id={SYSTEMS[0]}"],
              "api-versions": [f"/api/versions?release={MONTH}&judge_config={JUDGE}"]}
    assert set(routes) == set(freshness.PAGES)
    statements: list[tuple[str, object]] = []

    def record(conn, cursor, statement, parameters, *args) -> None:
        if statement.lstrip().upper().startswith(("SELECT", "WITH")) and freshness.STAMP_MARK not in statement \
                and "pg_rewrite" not in statement:
            statements.append((statement, parameters))

    with engine.connect() as conn:
        declared = {name: set().union(*freshness.base_tables(conn, page.reads).values())
                    for name, page in freshness.PAGES.items()}
    sa.event.listen(engine, "before_cursor_execute", record)
    try:
        with serve(create_app(lambda: engine)) as url, httpx.Client(base_url=url, timeout=60) as client:
            for page, paths in routes.items():
                for path in paths:
                    statements.clear()
                    answer = client.get(path)
                    assert answer.status_code in (200, 404), (path, answer.text[:300])  # a window of no scores
                    read = _planned_tables(engine, list(statements))
                    assert read, path
                    undeclared = {t: s for t, s in read.items() if t not in declared[page]}
                    assert not undeclared, (f"{path} reads tables the {page!r} page does not declare in "
                                            f"web/freshness.py PAGES: {undeclared}")
    finally:
        sa.event.remove(engine, "before_cursor_execute", record)


@pytest.fixture
def own_warehouse():
    """A warehouse of this test's own: it changes a view, which the session's database must not keep."""
    with throwaway_warehouse("deepscholar_freshness_", database=os.environ.get("DEEPSCHOLAR_TEST_DB", "auto"),
                             set_home=False) as (engine, _home):
        yield engine


def _conditional_note(client: httpx.Client, tag: str) -> tuple[int, str]:
    answer = client.get("/api/history", headers={"If-None-Match": tag})
    return answer.status_code, answer.headers["etag"]


def test_a_table_read_but_not_stamped_serves_a_stale_304_and_a_declared_source_does_not(own_warehouse, monkeypatch):
    engine = own_warehouse
    _seed(engine)
    with engine.begin() as conn:  # a migration makes the history view read a table of notes
        conn.execute(sa.text("CREATE TABLE deepscholar.month_notes (release_id text PRIMARY KEY, note text)"))
        conn.execute(sa.text("INSERT INTO deepscholar.month_notes VALUES (:m, 'first')"), {"m": MONTH})
        definition = conn.execute(sa.text("SELECT pg_get_viewdef('deepscholar.leaderboard_history')")).scalar()
        conn.execute(sa.text(f"""
            CREATE OR REPLACE VIEW deepscholar.leaderboard_history AS
            SELECT h.*, n.note FROM ({definition.rstrip().rstrip(';')}) h
            LEFT JOIN deepscholar.month_notes n ON n.release_id = h.release_id"""))

    def note(text: str) -> None:
        with engine.begin() as conn:
            conn.execute(sa.text("UPDATE deepscholar.month_notes SET note = :n"), {"n": text})

    # Nothing says how month_notes' writes show: the page is refused, naming the table, never served stale.
    with serve(create_app(lambda: engine)) as url, httpx.Client(base_url=url, timeout=60) as client:
        refused = client.get("/api/history")
        assert refused.status_code == 500 and "cannot tell when it changes" in refused.text
        assert client.get("/").status_code == 200  # a page that does not read the view is served

    # Declared as shown "as of the roll-up" (no stamp of its own, as the hand-kept list had it): stale.
    history = freshness.PAGES["api-history"]
    monkeypatch.setitem(freshness.PAGES, "api-history", replace(history, as_of_rollup=frozenset({"month_notes"})))
    with serve(create_app(lambda: engine)) as url, httpx.Client(base_url=url, timeout=60) as client:
        first = client.get("/api/history")
        assert [r["note"] for r in first.json()["rows"]] == ["first", "first"]
        note("second")
        assert _conditional_note(client, first.headers["etag"]) == (304, first.headers["etag"]), "stale"
        assert [r["note"] for r in client.get("/api/history").json()["rows"]] == ["first", "first"], "kept, stale"

    # With a source for it, the next write is a new tag and the new note.
    monkeypatch.setitem(freshness.PAGES, "api-history", history)
    monkeypatch.setattr(freshness, "SOURCES", (*freshness.SOURCES, freshness.Source(
        frozenset({"month_notes"}), "(SELECT count(*) || '.' || sum(xmin::text::bigint) FROM month_notes)")))
    with serve(create_app(lambda: engine)) as url, httpx.Client(base_url=url, timeout=60) as client:
        first = client.get("/api/history")
        assert [r["note"] for r in first.json()["rows"]] == ["second", "second"]
        assert _conditional_note(client, first.headers["etag"])[0] == 304  # unchanged: still a 304
        note("third")
        status, tag = _conditional_note(client, first.headers["etag"])
        assert status == 200 and tag != first.headers["etag"]
        assert [r["note"] for r in client.get("/api/history").json()["rows"]] == ["third", "third"]
