"""Board versions against real Postgres: a published board never changes; a different roll-up is the next
version, readers see the latest published one, and every version stays readable (CLI, SQL, page)."""

from __future__ import annotations

import json
import urllib.request

import sqlalchemy as sa
from integration.test_leaderboard import JUDGE, Board, _values, seed_month
from support.chromium import parse_html, serve

from deepscholar import cli
from deepscholar.evaluation.boards.board_versions import list_versions, publish_board
from deepscholar.evaluation.boards.leaderboard import load_leaderboard
from deepscholar.evaluation.boards.leaderboard_quality import check_leaderboard
from deepscholar.evaluation.boards.rollup import roll_up
from deepscholar.web import create_app

TABLES = ("leaderboard_systems", "leaderboard_metrics", "track_boards", "track_board_metrics", "board_agreement")


def _rows_of(engine, version: int) -> dict[str, list[str]]:
    """Every stored row of one board version, as text (computed_at included: nothing may be rewritten)."""
    with engine.connect() as conn:
        return {t: sorted(conn.execute(sa.text(
            f"SELECT to_jsonb(x)::text FROM {t} x WHERE board_version = :v"), {"v": version}).scalars())
            for t in TABLES}


def _versions(engine, release_id: str) -> list[tuple[int, str]]:
    return [(v["board_version"], v["status"]) for v in reversed(list_versions(engine, release_id, JUDGE))]


def _bump_metric_version(engine, metric: str) -> None:
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE metric_scores SET metric_version = metric_version || '+v2' WHERE metric = :m"),
                     {"m": metric})


def test_a_published_board_is_never_rewritten_and_a_different_roll_up_is_the_next_version(engine):
    month = seed_month(engine, n_queries=6)
    release = month["release_id"]
    first = roll_up(engine, release, JUDGE, n_boot=200)
    assert {r["board_version"] for r in first} == {1}
    assert _versions(engine, release) == [(1, "draft")]

    # A draft is rewritten in place: a changed score changes version 1, no new version.
    with engine.begin() as conn:
        conn.execute(sa.text("""
            UPDATE metric_scores SET value = 0.01 WHERE metric = 'organization' AND report_id IN (
                SELECT report_id FROM reports WHERE system_id = 'gamma')"""))
    roll_up(engine, release, JUDGE, n_boot=200)
    assert _versions(engine, release) == [(1, "draft")]

    with engine.begin() as conn:  # epsilon has no ok report under JUDGE: inactive, so not required on the board
        conn.execute(sa.text("UPDATE systems SET active = false WHERE system_id = 'epsilon'"))
    assert check_leaderboard(engine, release, JUDGE).success
    assert publish_board(engine, release, JUDGE)["status"] == "published"
    published = _rows_of(engine, 1)

    # Unchanged inputs: the published version is the result; nothing is written.
    roll_up(engine, release, JUDGE, n_boot=200)
    assert _versions(engine, release) == [(1, "published")]
    assert _rows_of(engine, 1) == published

    # A new metric version: version 2 (a draft), version 1 untouched and still what readers see.
    _bump_metric_version(engine, "citation_precision")
    second = roll_up(engine, release, JUDGE, n_boot=200)
    assert {r["board_version"] for r in second} == {2}
    assert _versions(engine, release) == [(1, "published"), (2, "draft")]
    assert _rows_of(engine, 1) == published
    v2 = list_versions(engine, release, JUDGE)[0]
    assert v2["changes"].startswith("vs v1: metric versions citation_precision d1+citation_precision_v1 → ")
    board = load_leaderboard(engine, release, JUDGE)
    assert board[0]["board_version"] == 1
    assert board[0]["metrics"]["citation_precision"]["metric_version"] == "d1+citation_precision_v1"

    # The gate and publication act on the newest version; readers then see it, and version 1 stays readable.
    assert check_leaderboard(engine, release, JUDGE).success
    assert publish_board(engine, release, JUDGE)["board_version"] == 2
    assert load_leaderboard(engine, release, JUDGE)[0]["board_version"] == 2
    old = load_leaderboard(engine, release, JUDGE, board_version=1)
    assert old[0]["metrics"]["citation_precision"]["metric_version"] == "d1+citation_precision_v1"
    assert _rows_of(engine, 1) == published
    with engine.connect() as conn:
        # The wide view shows the version readers see; leaderboard_versions every version.
        assert set(conn.execute(sa.text("SELECT board_version FROM leaderboard")).scalars()) == {2}
        assert conn.execute(sa.text("SELECT count(DISTINCT board_version) FROM leaderboard_versions")).scalar() == 2
        assert conn.execute(sa.text(
            "SELECT board_version, is_current FROM leaderboard_board_versions ORDER BY 1")).all() == [
            (1, False), (2, True)]


def test_a_backfilled_system_and_a_new_build_open_versions_that_say_so(engine, db_url, monkeypatch, capsys):
    month = seed_month(engine, n_queries=5)
    release = month["release_id"]
    roll_up(engine, release, JUDGE, n_boot=200)
    publish_board(engine, release, JUDGE)

    with engine.begin() as conn:  # a system registered later, backfilled over the month
        b = Board(conn)
        b.system("zeta")
        for qi, a in enumerate(month["queries"]):
            b.scores(b.report(release, "zeta", a), _values(0.95, qi, 4))
    roll_up(engine, release, JUDGE, n_boot=200)
    change = list_versions(engine, release, JUDGE)[0]["changes"]
    assert "systems added: zeta" in change and "ranks alpha 1→2" in change, change
    publish_board(engine, release, JUDGE)

    with engine.begin() as conn:  # beta's reports regenerated by a new build
        conn.execute(sa.text("UPDATE reports SET system_build = 'extractive:2' WHERE system_id = 'beta'"))
    roll_up(engine, release, JUDGE, n_boot=200)
    versions = list_versions(engine, release, JUDGE)
    assert [v["board_version"] for v in versions] == [3, 2, 1]
    assert versions[0]["changes"] == "vs v2: new builds of beta"
    assert versions[0]["system_builds"]["beta"] == ["extractive:2"]

    monkeypatch.setenv("DEEPSCHOLAR_DB_URL", db_url)
    capsys.readouterr()
    assert cli.main(["leaderboard", "--release", release, "--versions", "--format", "json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(v["board_version"], v["status"], v["is_current"]) for v in listed] == [
        (3, "draft", False), (2, "published", True), (1, "published", False)]


def test_the_page_shows_the_version_with_a_link_to_every_version(engine):
    month = seed_month(engine, n_queries=4)
    release = month["release_id"]
    roll_up(engine, release, JUDGE, n_boot=100)
    publish_board(engine, release, JUDGE)
    _bump_metric_version(engine, "organization")
    roll_up(engine, release, JUDGE, n_boot=100)
    publish_board(engine, release, JUDGE)
    with serve(create_app(lambda: engine)) as base:
        page = parse_html(urllib.request.urlopen(f"{base}/?release={release}&judge_config={JUDGE}").read().decode())
        line = page.find(attrs={"data-board-version": "2"})
        assert line is not None and "metric versions organization" in line.text(), line.text()
        link = line.one("a", {"data-versions-link": "true"}).attrs["href"]
        history = parse_html(urllib.request.urlopen(f"{base}{link}").read().decode())
        rows = history.find_all("tr", {"data-board-version": True})
        assert [(r.attrs["data-board-version"], r.attrs.get("data-current")) for r in rows] == [
            ("2", "true"), ("1", None)]
        assert "metric versions organization" in rows[0].one("td", {"data-changes": "true"}).text()
        old = parse_html(urllib.request.urlopen(
            f"{base}/?release={release}&judge_config={JUDGE}&version=1").read().decode())
        assert "Not the current version" in old.one("p", {"data-board-version": "1"}).text()
        api = json.loads(urllib.request.urlopen(f"{base}/api/leaderboard?release={release}&version=1").read())
        assert api["board_version"] == 1 and [v["board_version"] for v in api["versions"]] == [2, 1]


def test_history_and_latest_show_a_corrected_month_once_by_its_newest_version_with_a_board(engine):
    seed_month(engine, "2025-01", n_queries=4)
    seed_month(engine, "2025-01.v2", n_queries=4)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE releases SET window_start = '2025-01-01T00:00:00Z', base_id = '2025-01', "
                             "version = CASE release_id WHEN '2025-01' THEN 1 ELSE 2 END"))
    roll_up(engine, "2025-01", JUDGE, n_boot=100)
    with engine.connect() as conn:
        assert set(conn.execute(sa.text("SELECT release_id FROM leaderboard_history")).scalars()) == {"2025-01"}
    roll_up(engine, "2025-01.v2", JUDGE, n_boot=100)
    with engine.connect() as conn:
        history = conn.execute(sa.text("SELECT DISTINCT release_id, month FROM leaderboard_history")).all()
        latest = set(conn.execute(sa.text("SELECT release_id FROM leaderboard_latest")).scalars())
        # The old version's board stays readable by its own id.
        old = conn.execute(sa.text("SELECT count(*) FROM leaderboard WHERE release_id = '2025-01'")).scalar()
    assert [(r, m.isoformat()) for r, m in history] == [("2025-01.v2", "2025-01-01")]
    assert latest == {"2025-01.v2"} and old == 3
