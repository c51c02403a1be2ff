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
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from support.chromium import parse_html, serve
from support.site_crawl import crawl
from support.site_extras import TRACK, add_track_board, add_validation_figures
from support.warehouse import empty_warehouse
from test_leaderboard_page import LLM, LOCAL, MONTHS, seed

from deepscholar import cli
from deepscholar.site import routes
from deepscholar.site.build import MANIFEST_FILE, STAMP_FILE, build_site
from deepscholar.site.documents import DOCS_DIR
from deepscholar.web import create_app

# The latest month's track board (FACT: accuracy, and effective citations: a count), beside the core board.
FACT = {"deepscholar_base": [0.61, 3.5], "extractive": [0.42, 1.25], "oracle": [0.9, 5.0]}
WINDOW = (LLM, MONTHS[0], MONTHS[-1])  # the one standard window: three months under the LLM judge


def seed_site(engine) -> dict:
    """The page's fixture, a track section on its latest board and the judge-validation figures of its month."""
    seeded = seed(engine)
    add_track_board(engine, MONTHS[-1], LLM, FACT)
    seeded["figures"] = add_validation_figures(engine, MONTHS[-1], LLM, LOCAL)
    return seeded


@pytest.fixture
def built(engine, tmp_path):
    empty_warehouse(engine)
    seeded = seed_site(engine)
    build = build_site(engine, tmp_path / "site")
    return engine, build, seeded


def _cells(dom, **attrs) -> list[tuple]:
    return [(tr.attrs.get("data-system"), td.attrs.get("data-metric"), td.attrs.get("data-value"), td.text())
            for table in dom.find_all("table", {"class": "leaderboard", **attrs})
            for tr in table.find_all("tr", {"data-system": True}) for td in tr.find_all("td")]


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
            routes.versions_path(MONTHS[0], LLM), "history.html", "downloads.html", routes.window_path(*WINDOW)} <= pages
    # The latest board carries its track section (and the agreement between the boards), as the live page does.
    index = parse_html((build.out / "index.html").read_text())
    track = index.one("table", {"class": "leaderboard", "data-track": TRACK})
    assert [tr.attrs["data-system"] for tr in track.find_all("tr", {"data-system": True})] == \
        sorted(FACT, key=lambda s: -FACT[s][0])
    assert index.one("table", {"class": "agreement"}).find("tr", {"data-pair": True}) is not None
    for name in ("methodology.html", "submit.html"):
        doc = {"methodology.html": "METRICS.md", "submit.html": "SUBMITTING.md"}[name]
        assert (name in pages) == (DOCS_DIR / doc).is_file(), name
    # Each month's export is downloadable from the site, and every board's JSON.
    assert f"downloads/{MONTHS[-1]}/leaderboard_systems.csv" in seen
    assert {routes.api_board_path(MONTHS[-1], LOCAL), routes.api_window_path(*WINDOW)} <= seen


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
            assert _cells(live) == _cells(site) and len(_cells(site)) > 20, (release, judge)  # tracks' too
        assert (build.out / "api/leaderboard.json").read_bytes() == _get(f"{url}/api/leaderboard")
        assert (build.out / "api/history.json").read_bytes() == _get(f"{url}/api/history")
    index = parse_html((build.out / "index.html").read_text())
    assert index.find_all("table", {"class": "leaderboard"})[0].attrs["data-release"] == MONTHS[-1]
    assert index.find("form") is None, "no pooled-window form: a static site cannot compute one"
    assert all("Register" not in a.text() for a in index.one("nav").find_all("a"))


def test_a_system_has_a_page_of_every_month_per_judge_and_a_small_page_per_month(built):
    """The system's own page holds the charts and every month's scores and links each month's reports; a
    month's page lists that month's reports only (a year's site stays small: bench/site.py) and links back."""
    engine, build, _ = built
    system = "deepscholar_base"
    judges = sorted({LLM, LOCAL})
    overview_path = routes.system_path(system)
    overview = parse_html((build.out / overview_path).read_text())
    assert overview.find("svg", {"data-chart": "system-history"}) is not None
    assert overview.find("tr", {"data-report-id": True}) is None
    default = next(e.attrs["data-judge-config"] for e in overview.find_all(None, {"data-judge-config": True})
                   if e.tag == "span" or "aria-current" in e.attrs)
    with engine.connect() as conn:
        months = {j: [r[0] for r in conn.exec_driver_sql(
            "SELECT DISTINCT release_id FROM deepscholar.leaderboard_history WHERE system_id = %s "
            "AND judge_config = %s ORDER BY 1", (system, j))] for j in judges}
    assert all(months.values()) and default in judges
    assert [tr.attrs["data-release"] for tr in overview.one("table", {"class": "system-history"})
            .find_all("tr", {"data-release": True})] == months[default]
    month_links = overview.one("p", {"data-selector": "release"}).find_all("a")
    assert [a.attrs["data-release"] for a in month_links] == months[default]
    for a in month_links:
        assert urlsplit(a.attrs["href"]).path == routes.relative_href(
            routes.system_path(system, default, a.attrs["data-release"]), overview_path)
    for judge in judges:
        own = overview_path if judge == default else routes.system_path(system, judge)
        assert (build.out / own).is_file(), judge
        for month in months[judge]:
            path = routes.system_path(system, judge, month)
            page = parse_html((build.out / path).read_text())
            assert page.find("svg") is None and page.find("table", {"class": "system-history"}) is None, path
            with engine.connect() as conn:
                stored = conn.exec_driver_sql("SELECT count(*) FROM deepscholar.reports WHERE system_id = %s "
                                              "AND release_id = %s", (system, month)).scalar()
            assert len(page.find_all("tr", {"data-report-id": True})) == stored, path
            back = page.one("a", {"data-overview-link": "true"}).attrs["href"]
            assert back == routes.relative_href(own, path), path


def test_a_standard_window_is_the_live_window_board_and_the_cli_s(built, db_url, monkeypatch, capsys):
    engine, build, _ = built
    judge, start, end = WINDOW
    site = parse_html((build.out / routes.window_path(*WINDOW)).read_text())
    query = urlencode({"from": start, "to": end, "judge_config": judge})
    with serve(create_app(lambda: engine)) as url:
        live = parse_html(_get(f"{url}/?{query}").decode())
        assert (build.out / routes.api_window_path(*WINDOW)).read_bytes() == _get(f"{url}/api/leaderboard?{query}")
        # The live page links the same standard windows, by the link the site turned into its file.
        link = live.one("p", {"data-standard-windows": "true"}).one("a", {"data-window": f"{start}..{end}"})
        parts = urlsplit(link.attrs["href"])
        params = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        assert routes.SiteMap(windows={WINDOW: "Last 3 months"}).target(parts.path, params) == \
            routes.window_path(*WINDOW)
    assert _cells(site) == _cells(live) and len(_cells(site)) > 20
    assert site.one("p", {"data-pooled": "true"}) and site.find("form") is None
    assert site.one("p", {"data-window-form": "live-only"})
    current = site.one("p", {"data-standard-windows": "true"}).one("a", {"aria-current": "true"})
    assert current.attrs["data-window"] == f"{start}..{end}"
    monkeypatch.setenv("DEEPSCHOLAR_DB_URL", db_url)
    capsys.readouterr()
    assert cli.main(["leaderboard", "--from", start, "--to", end, "--judge", judge, "--format", "json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    table = site.one("table", {"class": "leaderboard", "data-release": f"{start}..{end}"})
    assert [tr.attrs["data-system"] for tr in table.find_all("tr", {"data-system": True})] == \
        [r["system_id"] for r in printed]
    for row in printed:
        means = {m: d["mean"] for m, d in row["metrics"].items()} | {"geometric_mean": row["geometric_mean"]}
        for metric, mean in means.items():
            cell = table.cell(row["system_id"], metric)
            assert cell.attrs["data-value"] == ("" if mean is None else repr(mean)), (row["system_id"], metric)
    # Only the standard windows are files; any other window stays a live page's (its link is left as text).
    sm = routes.SiteMap(windows={WINDOW: "Last 3 months"})
    assert sm.target("/", {"from": MONTHS[1], "to": end, "judge_config": judge}) is None
    assert sm.target("/", {"from": start, "to": end, "judge_config": LOCAL}) is None


def test_the_methodology_shows_the_stored_judge_validation_figures(built):
    engine, build, seeded = built
    if "methodology.html" not in build.files:
        pytest.skip("docs/METRICS.md is absent: the site has no methodology page")
    dom = parse_html((build.out / "methodology.html").read_text())
    figures = seeded["figures"]

    def values(section: str) -> list[str]:
        table = dom.one("section", {"data-section": section}).one("table")
        return [td.attrs["data-value"] for td in table.find_all("td", {"data-value": True})]

    assert values("judge-vs-humans") == [repr(figures["humans"]), repr(figures["kappa"]), "0.78"]
    assert values("judge-vs-judge")[0] == repr(figures["pair_tau"])
    assert values("judge-vs-judge-items")[0] == repr(figures["items_agree"])
    assert values("judge-drift") == [repr(figures["drift"]), "0.7", "0.1"]  # agreement, floor, largest drop
    contents = [a.attrs["href"] for a in dom.one("nav", {"class": "contents"}).find_all("a")]
    for anchor in contents:
        assert dom.find(None, {"id": anchor[1:]}) is not None, anchor
    assert any("conformance" in a for a in contents) and "#judge-validation" in contents


def test_a_warehouse_without_validation_figures_says_so_in_one_line(engine):
    from deepscholar.site.validation import NONE_STORED, validation_sections

    empty_warehouse(engine)
    (only,) = validation_sections(engine)
    assert NONE_STORED in only["html"] and only["rows"] == []


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
