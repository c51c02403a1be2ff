"""Knowledge cutoffs against real Postgres: a system whose model may have seen a month's papers is shown
on that month's board but not ranked, in the roll-up, the CLI, the SQL views and the page."""

from __future__ import annotations

import csv
import io
import json
import urllib.request
from datetime import date

import pytest
import sqlalchemy as sa
from integration.test_leaderboard import JUDGE, seed_month
from support.chromium import parse_html, serve

from deepscholar import cli
from deepscholar.errors import InvalidInput
from deepscholar.evaluation.boards.board_versions import list_versions, publish_board
from deepscholar.evaluation.boards.contamination import contamination
from deepscholar.evaluation.boards.leaderboard import format_leaderboard, load_leaderboard
from deepscholar.evaluation.boards.rollup import roll_up
from deepscholar.systems.registry import add_system, parse_cutoff, set_knowledge_cutoff
from deepscholar.web import create_app


def test_the_rule():
    june = date(2025, 6, 1)
    assert contamination(date(2025, 6, 1), True, june) == "may_have_seen"  # the first query's day is covered
    assert contamination(date(2025, 5, 31), True, june) is None
    assert contamination(None, True, june) == "cutoff_unknown"
    assert contamination(date(2030, 1, 1), False, june) is None  # no model: no cutoff applies
    assert contamination(date(2020, 1, 1), True, None) == "may_have_seen"  # undated queries: cannot rule it out
    assert parse_cutoff("2025-02") == date(2025, 2, 28) and parse_cutoff("2024-02") == date(2024, 2, 29)
    assert parse_cutoff("unknown") is None and parse_cutoff("2025-06-15") == date(2025, 6, 15)
    for bad in ("2025-13", "June 2025", "2025-02-30"):
        with pytest.raises(InvalidInput, match="invalid knowledge cutoff"):
            parse_cutoff(bad)


def _month_with_cutoffs(engine) -> str:
    month = seed_month(engine, n_queries=6)
    release = month["release_id"]
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE release_queries SET published = '2025-01-10T12:00:00+00' WHERE release_id = :r"),
                     {"r": release})
        # Systems that write from a model (the seed's are extractive): alpha's cutoff covers January, beta's does
        # not, gamma's is unknown.
        conn.execute(sa.text("UPDATE systems SET model_knowledge = true, knowledge_cutoff = CASE system_id "
                             "WHEN 'alpha' THEN date '2025-03-31' WHEN 'beta' THEN date '2024-12-31' END"))
    return release


def test_a_system_that_may_have_seen_the_papers_is_shown_not_ranked_everywhere(engine, db_url, monkeypatch, capsys):
    release = _month_with_cutoffs(engine)
    rows = roll_up(engine, release, JUDGE, n_boot=200)
    by_system = {r["system_id"]: r for r in rows}
    # alpha is the best system by its scores, but its model's cutoff covers the month: unranked, never best.
    assert [(r["system_id"], r["rank"], r["contamination"]) for r in rows] == [
        ("beta", 1, None), ("gamma", 2, "cutoff_unknown"), ("alpha", None, "may_have_seen")]
    assert by_system["alpha"]["geometric_mean"] > by_system["beta"]["geometric_mean"]
    board = load_leaderboard(engine, release, JUDGE)
    assert not any(d["is_best"] for d in board[-1]["metrics"].values())
    assert board[-1]["knowledge_cutoff"] == date(2025, 3, 31)

    table = format_leaderboard(board, "table")
    assert "alpha‡" in table and "gamma°" in table and "may have seen these papers" in table
    alpha_line = next(line for line in table.splitlines() if "alpha‡" in line)
    assert alpha_line.startswith("–")
    as_json = {r["system_id"]: r for r in json.loads(format_leaderboard(board, "json"))}
    assert (as_json["alpha"]["rank"], as_json["alpha"]["contamination"]) == (None, "may_have_seen")
    csv_rows = list(csv.DictReader(io.StringIO(format_leaderboard(board, "csv"))))
    assert (csv_rows[-1]["system_id"], csv_rows[-1]["contamination"], csv_rows[-1]["knowledge_cutoff"]) == (
        "alpha", "may_have_seen", "2025-03-31")

    with engine.connect() as conn:
        view = conn.execute(sa.text("SELECT system_id, rank, contamination, knowledge_cutoff FROM leaderboard "
                                    "ORDER BY system_id")).all()
        n_systems = conn.execute(sa.text("SELECT DISTINCT n_systems FROM board_agreement")).scalars().all()
    assert view[0] == ("alpha", None, "may_have_seen", date(2025, 3, 31))
    assert n_systems in ([], [2])  # the core alone has no pair; never alpha in one

    with serve(create_app(lambda: engine)) as base:
        page = parse_html(urllib.request.urlopen(f"{base}/?release={release}").read().decode())
        row = page.one("tr", {"data-system": "alpha"})
        assert row.one("td", {"data-metric": "rank"}).text() == "—"
        badge = row.one("span", {"data-contamination": "may_have_seen"})
        assert badge.attrs["data-knowledge-cutoff"] == "2025-03-31" and "may have seen" in badge.text()
        assert page.one("tr", {"data-system": "gamma"}).find("span", {"data-contamination": "cutoff_unknown"})
        api = json.loads(urllib.request.urlopen(f"{base}/api/leaderboard?release={release}").read())
        assert {r["system_id"]: r["rank"] for r in api["rows"]}["alpha"] is None


def test_registering_and_correcting_a_cutoff_reaches_the_board_as_a_new_version(engine, db_url, monkeypatch, capsys):
    release = _month_with_cutoffs(engine)
    roll_up(engine, release, JUDGE, n_boot=200)
    publish_board(engine, release, JUDGE)

    monkeypatch.setenv("DEEPSCHOLAR_DB_URL", db_url)
    assert cli.main(["systems", "cutoff", "alpha", "2024-12"]) == 0  # corrected: before the month
    roll_up(engine, release, JUDGE, n_boot=200)
    change = list_versions(engine, release, JUDGE)[0]["changes"]
    assert change.startswith("vs v1:") and "ranked again (knowledge cutoff before the month): alpha" in change
    assert load_leaderboard(engine, release, JUDGE)[0]["system_id"] == "beta"  # v1 is still what readers see
    publish_board(engine, release, JUDGE)
    assert load_leaderboard(engine, release, JUDGE)[0]["system_id"] == "alpha"

    # Registration: a model-free kind has no cutoff to check; an LLM kind takes one.
    assert add_system(engine, "extractive_cutoff", "extractive", {}) == "registered"
    assert add_system(engine, "llm_cutoff", "deepscholar_base", {"model": "openai/gpt-4o"},
                      knowledge_cutoff="2024-10") == "registered"
    with engine.connect() as conn:
        got = dict(conn.execute(sa.text("SELECT system_id, (knowledge_cutoff, model_knowledge)::text FROM systems "
                                        "WHERE system_id LIKE '%cutoff'")).all())
    assert got == {"extractive_cutoff": "(,f)", "llm_cutoff": "(2024-10-31,t)"}
    assert add_system(engine, "llm_cutoff", "deepscholar_base", {"model": "openai/gpt-4o"},
                      knowledge_cutoff="2024-11-30") == "updated"
    with pytest.raises(InvalidInput):
        set_knowledge_cutoff(engine, "llm_cutoff", "soon")
    capsys.readouterr()
    assert cli.main(["systems", "list"]) == 0
    listed = capsys.readouterr().out
    assert "2024-11-30" in listed and "n/a (no model)" in listed
