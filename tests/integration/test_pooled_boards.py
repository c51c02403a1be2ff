"""Boards over a window of months, one primary category, or the queries published after a date: from the
CLI, SQL and the page, computed from the stored per-query scores with the roll-up's own statistics."""

from __future__ import annotations

import json
import urllib.request

import pytest
import sqlalchemy as sa
from integration.test_analyst_queries import CATEGORIES, MONTHS, N_QUERIES, seed_history
from integration.test_leaderboard import JUDGE
from support.chromium import parse_html, serve

from deepscholar import cli
from deepscholar.evaluation.boards import pooled
from deepscholar.evaluation.boards.board_versions import publish_board
from deepscholar.evaluation.boards.leaderboard import load_leaderboard
from deepscholar.evaluation.boards.rollup import DEFAULT_N_BOOT, roll_up
from deepscholar.evaluation.boards.selection import current_releases
from deepscholar.web import create_app

pytestmark = pytest.mark.slow  # seeds three months of boards


@pytest.fixture
def history(engine):
    return seed_history(engine)


def _cli_json(monkeypatch, capsys, db_url, *args) -> list[dict]:
    monkeypatch.setenv("DEEPSCHOLAR_DB_URL", db_url)
    capsys.readouterr()
    assert cli.main(["leaderboard", *args, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def _date_the_queries(engine) -> None:
    """Query i of month M published on day i + 1 of M."""
    with engine.begin() as conn:
        conn.execute(sa.text("""
            UPDATE release_queries SET published = to_date(release_id, 'YYYY-MM')
                + (CAST(substr(arxiv_id, 6) AS integer) - 1) * interval '1 day'"""))


def test_a_pooled_board_of_one_month_is_that_months_stored_board(history):
    engine = history
    roll_up(engine, "2025-03", JUDGE, n_boot=DEFAULT_N_BOOT)
    stored = {r["system_id"]: r for r in load_leaderboard(engine, "2025-03", JUDGE)}
    rows = pooled.pooled_board(engine, current_releases(engine, "2025-03", "2025-03"), JUDGE)
    assert [r["system_id"] for r in rows] == sorted(stored, key=lambda s: stored[s]["rank"])
    for r in rows:
        s = stored[r["system_id"]]
        assert (r["rank"], r["n_queries"], r["n_reports"], r["n_failed"]) == (
            s["rank"], s["n_queries"], s["n_reports"], s["n_failed"])
        for key in ("geometric_mean", "geometric_mean_ci_low", "geometric_mean_ci_high"):
            assert r[key] == pytest.approx(s[key], abs=1e-12), key
        for m, d in r["metrics"].items():
            for key in ("mean", "n", "n_unscored", "ci_low", "ci_high", "is_best", "significant", "p_value"):
                assert d[key] == pytest.approx(s["metrics"][m][key], abs=1e-12), (m, key)


def _board_figures(rows: list[dict]) -> dict:
    return {r["system_id"]: (r["rank"], r["n_reports"], r["n_failed"], r["geometric_mean"],
                             {m: (d["mean"], d["n"], d["n_unscored"], d["ci_low"], d["ci_high"])
                              for m, d in r["metrics"].items()}) for r in rows}


def _kept(engine, release_id: str) -> int:
    with engine.connect() as conn:
        return conn.execute(sa.text("SELECT count(*) FROM board_query_scores WHERE release_id = :r"),
                            {"r": release_id}).scalar_one()


def test_a_pooled_board_counts_the_scores_each_months_current_board_counted(history):
    engine = history
    march = current_releases(engine, "2025-03", "2025-03")
    published = _board_figures(pooled.pooled_board(engine, march, JUDGE))
    assert published["tail"][4]["citation_precision"][2] == 1  # an unscored query (NaN) stays unscored
    assert published["tail"][4]["claim_coverage"][1] == N_QUERIES - 2  # a never-judged one stays absent
    publish_board(engine, "2025-03", JUDGE)
    with engine.begin() as conn:  # lead's citation precision re-judged after publication
        conn.execute(sa.text("""
            UPDATE metric_scores m SET value = 0.0 FROM reports r
            WHERE r.report_id = m.report_id AND r.release_id = '2025-03' AND r.system_id = 'lead'
              AND m.metric = 'citation_precision' AND m.value IS NOT NULL"""))
    assert _board_figures(pooled.pooled_board(engine, march, JUDGE)) == published  # what the board counted
    roll_up(engine, "2025-03", JUDGE, n_boot=DEFAULT_N_BOOT)  # a draft v2: readers still see v1
    assert _board_figures(pooled.pooled_board(engine, march, JUDGE)) == published
    publish_board(engine, "2025-03", JUDGE)
    v2 = _board_figures(pooled.pooled_board(engine, march, JUDGE))
    assert v2["lead"][4]["citation_precision"][0] == 0.0
    assert v2["lead"][3] == 0.0 and v2["mid"][1:] == published["mid"][1:]  # a zero mean: a zero geometric mean

    # A month whose current board was rolled up before scores were kept with it: its scores are read, the
    # board is the same, and its next roll-up (unchanged, published) keeps them.
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM board_queries WHERE release_id = '2025-03'"))
    assert _kept(engine, "2025-03") == 0
    live = _board_figures(pooled.pooled_board(engine, march, JUDGE))
    assert live.keys() == v2.keys()
    for system, (rank, n_reports, n_failed, gm, metrics) in live.items():
        assert (rank, n_reports, n_failed) == v2[system][:3]
        assert gm == pytest.approx(v2[system][3], abs=1e-12)
        for m, figures in metrics.items():
            assert figures == pytest.approx(v2[system][4][m], abs=1e-12, nan_ok=True), (system, m)
    roll_up(engine, "2025-03", JUDGE, n_boot=DEFAULT_N_BOOT)
    assert _kept(engine, "2025-03") > 0


def test_window_category_and_published_after_from_the_cli_and_sql(history, db_url, monkeypatch, capsys):
    engine = history
    rows = _cli_json(monkeypatch, capsys, db_url, "--from", "2025-01", "--to", "2025-02")
    assert {r["release_id"] for r in rows} == {"2025-01..2025-02"}
    assert {r["n_queries"] for r in rows} == {2 * N_QUERIES}
    assert [r["rank"] for r in rows] == [1, 2, 3]
    with engine.connect() as conn:
        sql = {(s, m): (mean, n) for s, m, mean, n in conn.execute(sa.text(
            "SELECT system_id, metric, mean, n FROM leaderboard_window(date '2025-01-01', date '2025-02-28', :j) "
            "WHERE family = 'core'"), {"j": JUDGE})}
    for r in rows:  # the CLI's pooled means are the SQL function's
        for m, d in r["metrics"].items():
            assert (d["mean"], d["n"]) == (pytest.approx(sql[(r["system_id"], m)][0], abs=1e-12),
                                           sql[(r["system_id"], m)][1])
        low, high = r["geometric_mean_ci"]
        assert low <= r["geometric_mean"] <= high
    # The leader over the window: the pooled geometric mean, not either month's rank.
    assert rows[0]["system_id"] in ("lead", "mid")

    cat = _cli_json(monkeypatch, capsys, db_url, "--release", "2025-03", "--category", CATEGORIES[0])
    assert {r["n_queries"] for r in cat} == {N_QUERIES // 2}
    assert all("rank_change" in r and "overall_rank" in r for r in cat)
    assert all(r["rank_change"] == r["overall_rank"] - r["rank"] for r in cat)

    _date_the_queries(engine)
    after = _cli_json(monkeypatch, capsys, db_url, "--from", "2025-01", "--to", "2025-03", "--after", "2025-02-28")
    roll_up(engine, "2025-03", JUDGE, n_boot=DEFAULT_N_BOOT)
    march = {r["system_id"]: r for r in load_leaderboard(engine, "2025-03", JUDGE)}
    assert {r["n_queries"] for r in after} == {N_QUERIES}
    for r in after:
        assert r["geometric_mean"] == pytest.approx(march[r["system_id"]]["geometric_mean"], abs=1e-12)


def test_a_cutoff_inside_the_window_unranks_until_the_window_starts_after_it(history, db_url, monkeypatch, capsys):
    engine = history
    _date_the_queries(engine)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE systems SET knowledge_cutoff = date '2025-02-15', model_knowledge = true "
                             "WHERE system_id = 'lead'"))
    window = _cli_json(monkeypatch, capsys, db_url, "--from", "2025-01", "--to", "2025-03")
    lead = next(r for r in window if r["system_id"] == "lead")
    assert (lead["rank"], lead["contamination"]) == (None, "may_have_seen")
    assert sorted(r["rank"] for r in window if r["rank"] is not None) == [1, 2]
    clean = _cli_json(monkeypatch, capsys, db_url, "--from", "2025-01", "--to", "2025-03", "--after", "2025-02-15")
    lead = next(r for r in clean if r["system_id"] == "lead")
    assert lead["contamination"] is None and lead["rank"] == 1


def test_the_page_has_a_window_selector_and_category_boards(history, monkeypatch):
    engine = history
    monkeypatch.setenv("DEEPSCHOLAR_CATEGORY_MIN_QUERIES", "3")
    with serve(create_app(lambda: engine)) as base:
        page = parse_html(urllib.request.urlopen(f"{base}/?judge_config={JUDGE}").read().decode())
        form = page.one("form", {"data-window-selector": "true"})
        assert [o.attrs["value"] for o in form.find_all("option")] == MONTHS * 2
        tables = page.find_all("table", {"data-category": True})
        assert sorted(t.attrs["data-category"] for t in tables) == list(CATEGORIES)
        overall = {r.attrs["data-system"]: int(r.attrs["data-rank"])
                   for r in page.one("table", {"class": "leaderboard"}).find_all("tr", {"data-rank": True})}
        for t in tables:
            for row in t.find_all("tr", {"data-rank": True}):
                change = int(row.attrs["data-rank-change"])
                assert change == overall[row.attrs["data-system"]] - int(row.attrs["data-rank"])
        pooled_page = parse_html(urllib.request.urlopen(
            f"{base}/?from=2025-01&to=2025-02&judge_config={JUDGE}").read().decode())
        assert pooled_page.one("p", {"data-pooled": "true"})
        cells = pooled_page.one("table", {"class": "leaderboard"}).find_all("td", {"data-metric": "geometric_mean"})
        assert len(cells) == 3
        # The standard windows (selection.standard_windows): linked from the latest board and from each other,
        # not from an earlier month's board; the API answers a window's board as the page shows it.
        windows = page.one("p", {"data-standard-windows": "true"}).find_all("a")
        assert [a.attrs["data-window"] for a in windows] == ["latest", f"{MONTHS[0]}..{MONTHS[-1]}"]
        older = parse_html(urllib.request.urlopen(f"{base}/?release={MONTHS[0]}&judge_config={JUDGE}").read().decode())
        assert older.find("p", {"data-standard-windows": "true"}) is None and older.find("form") is not None
        answer = json.loads(urllib.request.urlopen(
            f"{base}/api/leaderboard?from=2025-01&to=2025-02&judge_config={JUDGE}").read())
        assert answer["release_id"] == "2025-01..2025-02" and len(answer["releases"]) == 2
        assert [repr(r["geometric_mean"]) for r in answer["rows"]] == [c.attrs["data-value"] for c in cells]
    monkeypatch.setenv("DEEPSCHOLAR_CATEGORY_MIN_QUERIES", "4")  # 3 queries per category: none shown
    with serve(create_app(lambda: engine)) as base:
        page = parse_html(urllib.request.urlopen(f"{base}/?judge_config={JUDGE}").read().decode())
        assert page.find("table", {"data-category": True}) is None


def _text(monkeypatch, capsys, db_url, *args) -> str:
    monkeypatch.setenv("DEEPSCHOLAR_DB_URL", db_url)
    capsys.readouterr()
    assert cli.main(["leaderboard", *args]) == 0
    return capsys.readouterr().out


def _kept_boards(engine) -> dict[str, tuple[str, str]]:
    with engine.connect() as conn:
        return {r.view: (r.stamp, r.rows_json) for r in conn.execute(sa.text(
            "SELECT selection->>'view' || ':' || coalesce(selection->>'category', '') AS view, stamp, rows_json "
            "FROM pooled_boards"))}


def _tamper(engine, view: str) -> None:
    """Rename the top system in the kept rows of one view: a read of the store shows it, a recompute does not."""
    with engine.begin() as conn:
        conn.execute(sa.text("""
            UPDATE pooled_boards SET rows_json = replace(rows_json, '"system_id": "lead"', '"system_id": "kept"')
            WHERE selection->>'view' || ':' || coalesce(selection->>'category', '') = :v"""), {"v": view})


def test_a_pooled_board_is_kept_read_back_in_every_format_and_recomputed_when_its_inputs_change(
        history, db_url, monkeypatch, capsys):
    engine = history
    window = ("--from", "2025-01", "--to", "2025-03")
    category = ("--release", "2025-03", "--category", CATEGORIES[0])
    computed = {(a, f): _text(monkeypatch, capsys, db_url, *a, "--format", f)
                for a in (window, category) for f in ("table", "json", "csv", "markdown")}
    kept = _kept_boards(engine)
    assert set(kept) == {"window:", f"category:{CATEGORIES[0]}"}  # one row a selection, whatever the format
    # Read back: the same bytes in every format (dates, NaN and nested details survive the store).
    for (args, fmt), text in computed.items():
        assert _text(monkeypatch, capsys, db_url, *args, "--format", fmt) == text, (args, fmt)
    # ... and it is the store that answers: a tampered row shows.
    _tamper(engine, "window:")
    assert "kept" in _text(monkeypatch, capsys, db_url, *window)

    # Each input changes the stamp, and the board is computed again.
    def recomputed(change_sql: str, params: dict | None = None) -> None:
        _tamper(engine, "window:")
        before = _kept_boards(engine)["window:"][0]
        with engine.begin() as conn:
            conn.execute(sa.text(change_sql), params or {})
        assert "kept" not in _text(monkeypatch, capsys, db_url, *window), change_sql
        assert _kept_boards(engine)["window:"][0] != before, change_sql

    recomputed("UPDATE systems SET knowledge_cutoff = date '2020-01-01' WHERE system_id = 'mid'")
    recomputed("UPDATE reports SET status = status WHERE release_id = '2025-02' AND system_id = 'tail' "
               "AND arxiv_id = (SELECT min(arxiv_id) FROM reports WHERE release_id = '2025-02')")
    recomputed("UPDATE release_queries SET published = published WHERE release_id = '2025-01'")
    # A score re-judged after publication is not what the month's board counted: the kept board stands until
    # the month's next board version is the current one.
    publish_board(engine, "2025-02", JUDGE)
    _tamper(engine, "window:")
    with engine.begin() as conn:
        conn.execute(sa.text("""
            UPDATE metric_scores m SET value = 0.0 FROM reports r
            WHERE r.report_id = m.report_id AND r.release_id = '2025-02' AND r.system_id = 'lead'
              AND m.metric = 'citation_precision' AND m.value IS NOT NULL"""))
    roll_up(engine, "2025-02", JUDGE, n_boot=DEFAULT_N_BOOT)  # a draft v2: readers still count v1
    assert "kept" in _text(monkeypatch, capsys, db_url, *window)
    publish_board(engine, "2025-02", JUDGE)
    assert "kept" not in _text(monkeypatch, capsys, db_url, *window)


def test_a_selection_that_reads_live_scores_is_never_kept_and_the_store_stays_bounded(
        history, db_url, monkeypatch, capsys):
    from deepscholar.evaluation.boards import pooled_store

    engine = history
    with engine.begin() as conn:  # March's board predates the kept per-query scores
        conn.execute(sa.text("DELETE FROM board_queries WHERE release_id = '2025-03'"))
    _text(monkeypatch, capsys, db_url, "--from", "2025-01", "--to", "2025-03")
    assert _kept_boards(engine) == {}
    monkeypatch.setattr(pooled_store, "KEEP", 2)
    for args in (("--from", "2025-01", "--to", "2025-01"), ("--from", "2025-01", "--to", "2025-02"),
                 ("--from", "2025-02", "--to", "2025-02")):
        _text(monkeypatch, capsys, db_url, *args)
    with engine.connect() as conn:
        kept = conn.execute(sa.text("SELECT selection->'releases' FROM pooled_boards ORDER BY computed_at")).scalars()
        assert list(kept) == [["2025-01", "2025-02"], ["2025-02"]]  # the two most recently computed
