"""The static site under the fault suite's hostile data: every page inert, every file inside the site.

The warehouse is test_hostile_web's: hostile report texts, titles, sources, judge explanations, metric
versions, and a judge config holding markup, which names folders of the site (and its standard window's);
plus systems whose names are hard on a file system, on the board and a track's as a roll-up stores them,
and judge-validation figures whose stored label is markup. Every page is checked as the live pages are
(test_hostile_web.assert_inert: no script, no handler, no javascript: link) and carries the CSP; every file
is inside the site's folder; each name is shown as text and its page is found.
"""

from __future__ import annotations

import pytest
from support.chromium import parse_html
from support.site_crawl import crawl
from support.site_extras import TRACK, add_track_board, add_validation_figures
from support.warehouse import empty_warehouse, store_board

from deepscholar import db
from deepscholar.site import routes
from deepscholar.site.build import build_site
from faults.test_hostile_web import (
    DIMENSIONS,
    HEADLINE_VARIANT,
    JUDGE,
    METRIC_ORDER,
    MONTHS,
    XSS,
    XSS_TEXT,
    assert_inert,
    seed,
)

# The systems table allows only [A-Za-z0-9][A-Za-z0-9._-]* (its CHECK; markup in a name is refused at
# registration, test_hostile_names.py): the names left that are hard on a file system, one too long for a file.
HOSTILE_SYSTEMS = ["a..b", "index.html", "CON", "x" * 300]


def _add_hostile_systems(engine) -> None:
    with engine.begin() as conn:
        db.upsert(conn, "systems", [{"system_id": s, "kind": "extractive"} for s in HOSTILE_SYSTEMS], key=["system_id"])
        rows, cells = [], []
        for rank, s in enumerate(HOSTILE_SYSTEMS, start=3):
            rows.append({"release_id": MONTHS[-1], "system_id": s, "judge_config": JUDGE, "n_queries": 1,
                         "n_reports": 1, "n_failed": 0, **dict.fromkeys(METRIC_ORDER, 0.25), "geometric_mean": 0.25,
                         "rank": rank, "metric_versions": {m: "v1" for m in METRIC_ORDER}})
            cells += [{"release_id": MONTHS[-1], "system_id": s, "judge_config": JUDGE, "metric": m,
                       "dimension": next(d for d, ms in DIMENSIONS.items() if m in ms),
                       "metric_position": METRIC_ORDER.index(m) + 1, "variant": HEADLINE_VARIANT[m], "mean": 0.25,
                       "n": 1, "n_unscored": 0, "is_best": False, "significant": False} for m in METRIC_ORDER]
        store_board(conn, rows, cells, METRIC_ORDER)


@pytest.fixture(scope="module")
def hostile_site(db_url, tmp_path_factory):
    engine = db.get_engine(db_url)
    empty_warehouse(engine)
    seed(engine)
    _add_hostile_systems(engine)
    # A track section of hostile system names, and judge-validation figures whose stored label is markup.
    add_track_board(engine, MONTHS[-1], JUDGE, {s: [0.5, 2.0] for s in HOSTILE_SYSTEMS})
    add_validation_figures(engine, MONTHS[-1], JUDGE, "local:" + XSS[0], label="label " + XSS_TEXT)
    out = tmp_path_factory.mktemp("hostile") / "site"
    return build_site(engine, out, with_downloads=False)


def test_every_page_of_the_site_is_inert(hostile_site):
    pages = sorted(p for p in hostile_site.files if p.endswith(".html"))
    assert len(pages) > 10
    for path in pages:
        body = (hostile_site.out / path).read_text()
        assert_inert(body)
        meta = parse_html(body).find("meta", {"http-equiv": "Content-Security-Policy"})
        assert meta is not None and "default-src 'none'" in meta.attrs["content"], path


def test_hostile_names_make_safe_files_and_show_as_text(hostile_site):
    root = hostile_site.out.resolve()
    for path in hostile_site.files:
        assert (root / path).resolve().is_relative_to(root), path
    seen, broken = crawl(hostile_site.out)
    assert broken == []
    index = parse_html((hostile_site.out / "index.html").read_text())
    core = index.find_all("table", {"class": "leaderboard"})[0]  # then the track's
    shown = [td.text() for td in core.find_all("td", {"data-metric": "system_id"})]
    for name in HOSTILE_SYSTEMS:
        assert name in shown
        system_page = [p for p in seen if p.startswith("system/") and p.endswith("/index.html")
                       and parse_html((hostile_site.out / p).read_text()).find("span", {"data-system": name})]
        assert len(system_page) == 1, name


def test_the_window_track_and_validation_pages_show_hostile_text_as_text(hostile_site):
    window = parse_html((hostile_site.out / routes.window_path(JUDGE, MONTHS[0], MONTHS[-1])).read_text())
    assert window.one("p", {"data-pooled": "true"}) and JUDGE in window.one("span", {"data-judge-config": JUDGE}).text()
    index = parse_html((hostile_site.out / "index.html").read_text())
    track = index.one("table", {"class": "leaderboard", "data-track": TRACK})
    assert sorted(tr.attrs["data-system"] for tr in track.find_all("tr", {"data-system": True})) == \
        sorted(HOSTILE_SYSTEMS)
    methodology = hostile_site.out / "methodology.html"
    if methodology.is_file():
        humans = parse_html(methodology.read_text()).one("section", {"data-section": "judge-vs-humans"})
        assert "label " + XSS_TEXT in humans.text() and JUDGE in humans.text()
