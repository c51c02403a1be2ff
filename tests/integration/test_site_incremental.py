"""The incremental site build on real Postgres: a build that reuses an earlier one writes the bytes a full build
of the same warehouse writes, file for file, and renders again every part a change touches (issue 48).

The warehouse is the leaderboard page's fixture (test_leaderboard_page.seed: three months of boards, two judges
in the latest, the latest month's reports). The changes are the ones a month brings: a new month's board, a new
version of an earlier month's board, a report scored again, and a change of what the pages link to.
"""

from __future__ import annotations

import json
import logging
import shutil

import pytest
import sqlalchemy as sa
from support import warehouse
from support.warehouse import empty_warehouse
from test_leaderboard_page import LATEST, LLM, METRIC_ORDER, MONTHS, _board_rows, _history_means, seed

from deepscholar.site import routes
from deepscholar.site.build import KEYS_FILE, MANIFEST_FILE, SiteBuild, build_site
from deepscholar.site.documents import DOCS_DIR


@pytest.fixture
def seeded(engine):
    empty_warehouse(engine)
    return seed(engine)


def assert_same_site(incremental: SiteBuild, full: SiteBuild) -> None:
    """The same files with the same bytes (read back: a reused file's hash is taken from the earlier manifest)."""
    assert incremental.files == full.files
    assert (incremental.out / MANIFEST_FILE).read_bytes() == (full.out / MANIFEST_FILE).read_bytes()
    for path in full.files:
        assert (incremental.out / path).read_bytes() == (full.out / path).read_bytes(), path


def _month_files(build: SiteBuild, month: str) -> set[str]:
    return {p for p in build.files if p.startswith((f"board/{month}/", f"api/board/{month}/", f"downloads/{month}/"))}


def test_a_new_month_and_a_new_board_version_render_their_parts_and_reuse_the_rest(engine, seeded, tmp_path):
    site = tmp_path / "site"
    first = build_site(engine, site)
    assert first.reused == {} and first.rendered == {"board": 3, "reports": 1, "export": 3, "system": 3}
    with engine.begin() as conn:  # version 2 of January's board, and April's first board
        january = {s: [min(1.0, v + 0.02) for v in m] for s in LATEST if (m := _history_means(s, MONTHS[0]))}
        warehouse.store_board(conn, *_board_rows(MONTHS[0], LLM, january), METRIC_ORDER, version=2)
        april = {s: [min(1.0, v + 0.01) for v in m] for s, m in LATEST.items()}
        warehouse.store_board(conn, *_board_rows("2025-04", LLM, april), METRIC_ORDER)
    again = build_site(engine, site, previous=site)
    full = build_site(engine, tmp_path / "full", workers=2)  # forked workers write the same bytes as one process
    assert_same_site(again, full)
    assert again.reused == {"board": 1, "reports": 1, "export": 2}, again.reused  # February; March's reports
    # January, April, and March: no longer the latest board, its page stops linking the standard windows.
    assert again.rendered == {"board": 3, "export": 2, "system": 3}, again.rendered
    # No stale page of the changed month: its board shows version 2, and version 1 has a page of its own.
    assert first.files[routes.board_path(MONTHS[0], LLM)] != again.files[routes.board_path(MONTHS[0], LLM)]
    assert routes.version_path(MONTHS[0], LLM, 1) in again.files and routes.board_path("2025-04", LLM) in again.files
    assert _month_files(first, MONTHS[1]) == _month_files(again, MONTHS[1])
    assert all(first.files[p] == again.files[p] for p in _month_files(first, MONTHS[1]))
    # What the next build reuses by: each part's key, files and links.
    keys = json.loads((site / KEYS_FILE).read_text())["parts"]
    assert set(keys) == {f"{kind}/{m}" for kind in ("board", "export") for m in [*MONTHS, "2025-04"]} | {
        f"reports/{MONTHS[-1]}"} | {f"system/{s}" for s in LATEST}
    assert routes.board_path(MONTHS[1], LLM) in keys[f"board/{MONTHS[1]}"]["files"]


def test_changed_rows_without_a_new_board_version_render_their_month_again(engine, seeded, tmp_path):
    """A report scored again (a judge re-run, not rolled up yet) and human labels imported for February: no link
    changes, only rows, and each month they belong to is rendered again."""
    site = tmp_path / "site"
    first = build_site(engine, site, with_downloads=False)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE deepscholar.metric_scores SET value = 0.125 WHERE report_id = :r "
                             "AND metric = 'organization' AND judge_config = :j"), {"r": seeded["hostile"], "j": LLM})
        conn.execute(sa.text(
            "INSERT INTO deepscholar.human_agreement_stats (release_id, judge_config, metric, report, n_labels) "
            "VALUES (:m, :j, 'relevance_rate', CAST(:r AS jsonb), 2)"),
            {"m": MONTHS[1], "j": LLM, "r": json.dumps({"metric": "relevance_rate", "percent": "high"})})
    again = build_site(engine, site, previous=site, with_downloads=False)
    assert_same_site(again, build_site(engine, tmp_path / "full", with_downloads=False))
    page = routes.report_path(seeded["hostile"])
    assert first.files[page] != again.files[page] and "0.125" in (site / page).read_text()
    assert 'data-trust="true"' in (site / routes.board_path(MONTHS[1], LLM)).read_text()
    assert again.rendered.get("reports") == 1 and again.reused.get("board") == 1, (again.reused, again.rendered)


def test_what_a_page_links_to_is_part_of_its_key(engine, seeded, tmp_path):
    """Without docs/SUBMITTING.md every page's navigation loses "How to submit": nothing can be reused."""
    site = tmp_path / "site"
    build_site(engine, site, with_downloads=False)
    docs = tmp_path / "docs"
    docs.mkdir()
    if (DOCS_DIR / "METRICS.md").is_file():
        shutil.copy(DOCS_DIR / "METRICS.md", docs / "METRICS.md")
    again = build_site(engine, site, previous=site, with_downloads=False, docs=docs)
    assert again.reused == {} and sum(again.rendered.values()) == 3 + 1 + 3
    assert_same_site(again, build_site(engine, tmp_path / "full", with_downloads=False, docs=docs))
    assert "submit.html" not in (site / "index.html").read_text()


def test_an_unreadable_or_incomplete_earlier_build_is_rendered_again(engine, seeded, tmp_path, caplog):
    site = tmp_path / "site"
    first = build_site(engine, site, with_downloads=False)
    (site / routes.board_path(MONTHS[1], LLM)).unlink()  # one file of February's boards lost
    again = build_site(engine, site, previous=site, with_downloads=False)
    assert again.rendered.get("board") == 1 and again.reused.get("board") == 2
    assert again.files == first.files
    (site / KEYS_FILE).write_text("{not json")
    with caplog.at_level(logging.WARNING, logger="deepscholar.site.parts"):
        third = build_site(engine, site, previous=site, with_downloads=False)
    assert third.reused == {} and third.files == first.files
    assert "no earlier build to reuse" in caplog.text and "every part is rendered" in caplog.text


def test_the_cli_reuses_its_folder_unless_told_full(engine, db_url, seeded, tmp_path, monkeypatch, capsys):
    from deepscholar import cli

    monkeypatch.setenv("DEEPSCHOLAR_DB_URL", db_url)
    out = str(tmp_path / "site")
    runs = []
    for extra in ([], [], ["--full"]):
        assert cli.main(["site", "build", "--out", out, "--no-downloads", "--json", *extra]) == 0
        runs.append(json.loads(capsys.readouterr().out))
    assert runs[0]["reused"] == {} and runs[2]["reused"] == {}
    assert runs[1]["reused"] == {"board": 3, "reports": 1, "system": 3} and runs[1]["rendered"] == {}
    assert runs[0]["site"] == runs[1]["site"] == runs[2]["site"]
    assert cli.main(["site", "build", "--out", out, "--no-downloads"]) == 0
    assert "reused: board 3 of 3 months, reports 1 of 1 months, system 3 of 3 systems" in capsys.readouterr().out


def test_the_dags_refresh_builds_in_its_folder_and_reuses_it(engine, seeded, tmp_path, caplog):
    from deepscholar.site.publish import refresh_site

    folder, target = tmp_path / "site-build", str(tmp_path / "published")
    build, done = refresh_site(engine, target, folder)
    assert build.out == folder and build.reused == {} and (folder / KEYS_FILE).is_file()
    again, published = refresh_site(engine, target, folder)
    assert again.rendered == {} and again.reused["board"] == 3 and published.unchanged
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "notes.txt").write_text("mine")
    with caplog.at_level(logging.WARNING, logger="deepscholar.site.publish"):
        elsewhere, _ = refresh_site(engine, target, junk)
    assert elsewhere.files == build.files and (junk / "notes.txt").read_text() == "mine"
    assert "building in a temporary folder instead" in caplog.text
