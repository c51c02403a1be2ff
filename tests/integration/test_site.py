"""The static site against the live page, on real Postgres: same numbers, same JSON, every link a file.

The warehouse is the leaderboard page's fixture (test_leaderboard_page.seed: three months, two judges in the
latest, reports with a hostile text). The live app is served by uvicorn for the comparison; the site is built
by `deepscholar site build`'s function. Links are followed with the stdlib HTML parser from index.html:
every internal link is a file of the site, and every page is reached. Publishing is checked on a local folder
here and on S3 (moto's server over HTTP) in test_site_publish.py; Chromium reads it in test_site_browser.py.
"""

from __future__ import annotations

import json
import urllib.request
from urllib.parse import urlencode

import pytest
from support.chromium import parse_html, serve
from support.site_crawl import crawl
from support.warehouse import empty_warehouse
from test_leaderboard_page import LLM, LOCAL, MONTHS, seed

from deepscholar.site import routes
from deepscholar.site.build import MANIFEST_FILE, STAMP_FILE, build_site
from deepscholar.site.documents import DOCS_DIR
from deepscholar.web import create_app


@pytest.fixture
def built(engine, tmp_path):
    empty_warehouse(engine)
    seeded = seed(engine)
    build = build_site(engine, tmp_path / "site")
    return engine, build, seeded


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as resp:
        return resp.read()


def test_every_page_is_reached_from_the_index_and_every_link_is_a_file(built):
    _, build, seeded = built
    seen, broken = crawl(build.out)
    assert broken == []
    pages = {p for p in build.files if p.endswith(".html")}
    assert pages - seen == set(), "pages no link reaches"
    assert {routes.report_path(i) for i in seeded["ids"].values()} <= pages
    assert {routes.board_path(MONTHS[-1], LLM), routes.board_path(MONTHS[-1], LOCAL),
            routes.versions_path(MONTHS[0], LLM), "history.html", "downloads.html"} <= pages
    for name in ("methodology.html", "submit.html"):
        doc = {"methodology.html": "METRICS.md", "submit.html": "SUBMITTING.md"}[name]
        assert (name in pages) == (DOCS_DIR / doc).is_file(), name
    # Each month's export is downloadable from the site, and every board's JSON.
    assert f"downloads/{MONTHS[-1]}/leaderboard_systems.csv" in seen
    assert routes.api_board_path(MONTHS[-1], LOCAL) in seen


def test_the_site_shows_what_the_live_page_and_api_show(built):
    engine, build, _ = built
    with serve(create_app(lambda: engine)) as url:
        for (release, judge) in [(MONTHS[-1], LLM), (MONTHS[-1], LOCAL), (MONTHS[0], LLM)]:
            query = urlencode({"release": release, "judge_config": judge})
            assert (build.out / routes.api_board_path(release, judge)).read_bytes() == \
                _get(f"{url}/api/leaderboard?{query}"), (release, judge)
            live = parse_html(_get(f"{url}/?{query}").decode())
            site = parse_html((build.out / routes.board_path(release, judge)).read_text())
            for dom in (live, site):
                assert dom.find("table", {"class": "leaderboard"}) is not None
            cells = [(td.attrs.get("data-system"), td.attrs.get("data-metric"), td.attrs.get("data-value"), td.text())
                     for dom in (live, site) for td in dom.one("table", {"class": "leaderboard"}).find_all("td")]
            half = len(cells) // 2
            assert cells[:half] == cells[half:] and half > 20, (release, judge)
        assert (build.out / "api/leaderboard.json").read_bytes() == _get(f"{url}/api/leaderboard")
        assert (build.out / "api/history.json").read_bytes() == _get(f"{url}/api/history")
    index = parse_html((build.out / "index.html").read_text())
    assert index.one("table", {"class": "leaderboard"}).attrs["data-release"] == MONTHS[-1]
    assert index.find("form") is None, "no pooled-window form: a static site cannot compute one"
    assert all("Register" not in a.text() for a in index.one("nav").find_all("a"))


def test_same_warehouse_same_bytes_but_the_stamp(built, tmp_path):
    engine, first, _ = built
    again = build_site(engine, tmp_path / "again")
    assert again.files == first.files
    for path in first.files:
        assert (first.out / path).read_bytes() == (again.out / path).read_bytes(), path
    assert (first.out / MANIFEST_FILE).read_bytes() == (again.out / MANIFEST_FILE).read_bytes()
    assert json.loads((again.out / STAMP_FILE).read_text())["site"] == first.digest
    # A rebuild into the same folder replaces it whole; a folder holding anything else is refused.
    build_site(engine, first.out, with_reports=False, with_downloads=False)
    assert not (first.out / "report").exists() and not (first.out / "downloads").exists()
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(Exception, match="something other than a built site"):
        build_site(engine, other)
    assert (other / "notes.txt").read_text() == "mine"


def test_a_new_month_rewrites_only_the_pages_that_show_it(built, tmp_path):
    from test_leaderboard_page import LATEST, _board_rows, store_board

    from deepscholar.site.publish import publish_site

    engine, first, _ = built
    target = tmp_path / "published"
    publish_site(first, str(target))
    with engine.begin() as conn:  # April's board: the release row exists (building), its board is rolled up
        store_board(conn, *_board_rows("2025-04", LLM, {s: [min(1.0, v + 0.01) for v in m] for s, m in LATEST.items()}))
    second = build_site(engine, tmp_path / "second")
    changed = {p for p in second.files if first.files.get(p) != second.files[p]}
    assert routes.board_path("2025-04", LLM) in changed and "index.html" in changed and "history.html" in changed
    unchanged_month = {p for p in first.files if p.startswith(f"board/{MONTHS[0]}/")}
    assert unchanged_month and not unchanged_month & changed, "an earlier month's board pages stay as they were"
    assert all(not p.startswith("report/") for p in changed), "no report of an earlier month changed"
    done = publish_site(second, str(target))
    assert (done.uploaded, done.reused) == (len(changed), len(second.files) - len(changed))
    assert (target / "current" / routes.board_path("2025-04", LLM)).is_file()


def test_the_cli_builds_and_publishes_and_refuses_in_one_line(engine, db_url, tmp_path, monkeypatch, capsys):
    from deepscholar import cli

    empty_warehouse(engine)
    seed(engine)
    monkeypatch.setenv("DEEPSCHOLAR_DB_URL", db_url)
    monkeypatch.setenv("DEEPSCHOLAR_SITE_URL", (tmp_path / "published").as_uri())
    assert cli.main(["site", "build", "--out", str(tmp_path / "site"), "--no-downloads", "--json"]) == 0
    built = json.loads(capsys.readouterr().out)
    assert built["files"] == len(json.loads((tmp_path / "site" / MANIFEST_FILE).read_text())["files"])
    assert cli.main(["site", "publish", "--from", str(tmp_path / "site")]) == 0
    assert "published build" in capsys.readouterr().out
    assert (tmp_path / "published" / "current" / "index.html").is_file()
    assert cli.main(["site", "publish", "--from", str(tmp_path / "site")]) == 0
    assert "nothing written" in capsys.readouterr().out
    (tmp_path / "file").write_text("x")
    for argv in (["site", "build", "--out", str(tmp_path / "file")], ["site", "publish", "--from", str(tmp_path)]):
        assert cli.main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert err.startswith("deepscholar: error:") and "\n" not in err, err
