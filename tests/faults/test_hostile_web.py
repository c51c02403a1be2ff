"""The leaderboard page under attack: stored XSS in every view, injection in every query parameter.

The app is served by uvicorn on a real socket and read with urllib, as a browser would fetch it; the HTML is
parsed with the stdlib parser (tests/support/chromium.parse_html). Hostile text sits in every stored field the
pages show (report text, paper and source titles, snippets, judge explanations and unscored reasons, report
errors, judge config names, metric versions). tests/integration/test_leaderboard_page.py checks one hostile
report in headless Chromium; this file covers each field and each view, and the parameters.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from urllib.parse import quote, urlencode

import pytest
import sqlalchemy as sa
from support.chromium import parse_html, serve
from support.warehouse import empty_warehouse, store_board

from deepscholar import db
from deepscholar.evaluation.metrics import registry
from deepscholar.web import create_app
from faults.conftest import assert_no_loss, warehouse_fingerprint

# Labels, order and headline variants come from the metric registry, as the page's do.
METRIC_ORDER = registry.metric_names(registry.CORE)
DIMENSIONS = registry.dimensions()
HEADLINE_VARIANT = {m: registry.headline_variant(m) for m in METRIC_ORDER}
MONTHS = ["2025-05", "2025-06"]
QUERY = "2506.00001"
SYSTEMS = ["alpha", "beta"]
XSS = [
    '<script>document.title="pwned"</script>',
    '"><img src=x onerror=alert(1)>',
    "'><svg onload=alert(1)>",
    "</td></tr></table><script>alert(2)</script>",
    "javascript:alert(3)",
]
XSS_TEXT = " ".join(XSS)
JUDGE = "llm:openai/" + XSS[1]  # a judge config is a model string the operator typed
# Markdown a system may write to smuggle markup through the report renderer (beta's report text).
MARKDOWN_XSS = ("## Findings\n\n- [click](javascript:alert(5))\n- <a href=\"javascript:alert(6)\">raw link</a>\n"
                "- ![pic](data:image/png;base64,AAAA)\n- <javascript:alert(7)>\n- [paper](https://example.org/p)\n\n"
                "<script>alert(8)</script>\n")


def seed(engine) -> int:
    with engine.begin() as conn:
        db.upsert(conn, "releases", [{"release_id": m, "status": "published", "window_start": f"{m}-01T00:00:00+00:00"}
                                     for m in MONTHS], key=["release_id"])
        db.upsert(conn, "systems", [{"system_id": s, "kind": "extractive"} for s in SYSTEMS], key=["system_id"])
        db.upsert(conn, "release_queries", [{
            "release_id": m, "arxiv_id": QUERY, "title": "Title " + XSS_TEXT, "abstract": "Abstract " + XSS_TEXT,
            "section_raw_latex": "x", "section_text": "x", "word_count": 1} for m in MONTHS],
            key=["release_id", "arxiv_id"])
        db.upsert(conn, "reports", [{
            "release_id": m, "system_id": s, "arxiv_id": QUERY, "status": "ok" if s == "alpha" else "system_error",
            "text": f"Report [1] {XSS_TEXT} [2]." if s == "alpha" else MARKDOWN_XSS,
            "error": None if s == "alpha" else "error " + XSS_TEXT}
            for m in MONTHS for s in SYSTEMS], key=["release_id", "system_id", "arxiv_id"])
        report_id = conn.execute(sa.text(
            "SELECT report_id FROM deepscholar.reports WHERE system_id = 'alpha' AND release_id = :m"),
            {"m": MONTHS[-1]}).scalar_one()
        db.upsert(conn, "report_sources", [
            {"report_id": report_id, "source_idx": 1, "arxiv_id": "2401.00001", "url": XSS[4],
             "title": "Source " + XSS_TEXT, "snippet": "Snippet " + XSS_TEXT},
            {"report_id": report_id, "source_idx": 2, "arxiv_id": None, "url": 'https://example.org/"><script>alert(4)</script>',
             "title": XSS[0], "snippet": XSS[1]},
        ], key=["report_id", "source_idx"])
        scores = [{"report_id": report_id, "metric": m, "judge_config": JUDGE, "variant": HEADLINE_VARIANT[m],
                   "metric_version": "v " + XSS[0], "value": None if m == "organization" else 0.5,
                   "unscored_reason": "reason " + XSS_TEXT if m == "organization" else None, "n_items": 1,
                   "details": {"note": XSS_TEXT}} for m in METRIC_ORDER]
        db.upsert(conn, "metric_scores", scores, key=["report_id", "metric", "judge_config", "variant"])
        conn.execute(sa.text(
            "INSERT INTO deepscholar.judgments (report_id, metric, judge_config, item_key, metric_version, label, "
            "unscored_reason, explanation, n_calls) VALUES (:r, :m, :j, :k, 'v1', CAST(:label AS jsonb), :u, :x, 1)"), [
            {"r": report_id, "m": "citation_precision", "j": JUDGE, "k": "s1:c1 " + XSS[0],
             "label": json.dumps({"supported": True, "why": XSS_TEXT}), "u": None, "x": "explained " + XSS_TEXT},
            {"r": report_id, "m": "organization", "j": JUDGE, "k": "order:AB", "label": None,
             "u": "unscored " + XSS_TEXT, "x": None}])
        board, cells = [], []
        for m in MONTHS:
            for rank, s in enumerate(SYSTEMS, start=1):
                board.append({"release_id": m, "system_id": s, "judge_config": JUDGE, "n_queries": 1, "n_reports": 1,
                              "n_failed": 0, **dict.fromkeys(METRIC_ORDER, 0.5), "geometric_mean": 0.5,
                              "rank": rank, "metric_versions": {mt: "v " + XSS[0] for mt in METRIC_ORDER}})
                cells += [{"release_id": m, "system_id": s, "judge_config": JUDGE, "metric": mt,
                           "dimension": next(d for d, ms in DIMENSIONS.items() if mt in ms),
                           "metric_position": METRIC_ORDER.index(mt) + 1, "variant": HEADLINE_VARIANT[mt],
                           "mean": 0.5, "n": 1, "n_unscored": 0, "is_best": rank == 1, "significant": False,
                           "runner_up": XSS[0]} for mt in METRIC_ORDER]
        # As the roll-up stores a board: leaderboard_systems (the wide `leaderboard` is a view) and the means
        # in leaderboard_metrics.
        store_board(conn, board, cells, METRIC_ORDER)
    return report_id


@pytest.fixture(scope="module")
def site(db_url):
    engine = db.get_engine(db_url)
    empty_warehouse(engine)
    report_id = seed(engine)
    before = warehouse_fingerprint(engine)
    with serve(create_app(lambda: engine)) as url:
        yield url, report_id
    assert_no_loss(before, warehouse_fingerprint(engine))  # the page only reads, whatever it is sent


def get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:
            return resp.status, resp.headers.get("Content-Type", ""), resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Content-Type", ""), exc.read().decode()


def assert_inert(body: str) -> None:
    """Nothing in the page can run: no script or event-handler element, no javascript: link."""
    dom = parse_html(body)
    assert dom.find_all("script") == [] and dom.find_all("img") == [] and dom.find_all("svg", {"onload": True}) == []
    for el in dom.iter():
        assert not [a for a in el.attrs if a.lower().startswith("on")], (el.tag, el.attrs)
        for a in ("href", "src", "action", "formaction"):
            assert not el.attrs.get(a, "").strip().lower().startswith(("javascript:", "data:")), (el.tag, el.attrs)
    for payload in XSS[:4]:
        assert payload not in body


VIEW_CASES = [
    pytest.param("/", id="board"),
    pytest.param(f"/?release={MONTHS[0]}", id="board-of-an-older-month"),
    pytest.param("/history", id="history"),
    pytest.param("/system/alpha", id="system-page"),
    pytest.param(f"/system/beta?release={MONTHS[-1]}", id="system-page-with-failed-report"),
    pytest.param("/report/{rid}", id="report-drilldown"),
    pytest.param("/report/{rid}?judge_config=" + quote(JUDGE, safe=""), id="report-drilldown-one-judge"),
]


@pytest.mark.parametrize("path", VIEW_CASES)
def test_stored_xss_comes_out_escaped(site, path):
    url, rid = site
    status, ctype, body = get(url + path.format(rid=rid))
    assert status == 200 and ctype.startswith("text/html"), (status, body[:300])
    assert_inert(body)
    text = parse_html(body).text()
    assert XSS[0] in text or XSS[1] in text, "the hostile text is shown as text, not dropped"


def test_drilldown_shows_every_hostile_field_as_text(site):
    url, rid = site
    _, _, body = get(f"{url}/report/{rid}")
    dom = parse_html(body)
    assert dom.one("div", {"data-report-text": str(rid)}).text() == f"Report [1] {XSS_TEXT} [2]."
    sources = {tr.attrs["data-source-idx"]: tr for tr in dom.find_all("tr", {"data-source-idx": True})}
    assert sources["1"].find("a") is None  # javascript: never becomes a link
    link = sources["2"].one("a").attrs["href"]
    assert link == 'https://example.org/"><script>alert(4)</script>'  # an attribute value, quoted
    expl = dom.one("tr", {"data-item-key": "s1:c1 " + XSS[0]}).one("td", {"data-field": "explanation"})
    assert expl.text() == "explained " + XSS_TEXT


def test_report_markdown_renders_but_smuggles_no_markup(site):
    url, _ = site
    _, _, listing = get(f"{url}/system/beta?release={MONTHS[-1]}")
    (row,) = parse_html(listing).find_all("tr", {"data-report-id": True})
    status, _, body = get(f"{url}/report/{row.attrs['data-report-id']}")
    assert status == 200
    assert_inert(body)
    text = parse_html(body).one("div", {"data-report-text": row.attrs["data-report-id"]})
    assert text.one("h4").text() == "Findings"  # markdown structure is kept ...
    assert len(text.one("ul").find_all("li")) == 5
    assert [a.attrs["href"] for a in text.find_all("a")] == ["https://example.org/p"]  # ... links only to the web
    assert "nofollow" in text.one("a").attrs["rel"]
    shown = text.text()
    for payload in ("javascript:alert(5)", '<a href="javascript:alert(6)">', "<script>alert(8)</script>"):
        assert payload in shown  # shown as text, not dropped


API_CASES = [
    pytest.param("/api/leaderboard", id="api-board"),
    pytest.param("/api/history", id="api-history"),
]


@pytest.mark.parametrize("path", API_CASES)
def test_api_serves_hostile_text_as_json_only(site, path):
    url, _ = site
    status, ctype, body = get(url + path)
    assert status == 200 and ctype.startswith("application/json")
    data = json.loads(body)
    assert (data.get("judge_config") or data["rows"][0]["judge_config"]) == JUDGE


HOSTILE_VALUES = {
    "sql": "x'; DROP TABLE reports; --",
    "html": '"><img src=x onerror=alert(1)><script>alert(1)</script>',
    "nul": "2025-06\x00<script>",
    "long": "a" * 10_000,
    "path": "../../etc/passwd",
    "lookalike": "２０２５-０６",
    "newline": "2025-06\r\nSet-Cookie: x=1",
}
PARAMS = {
    "board-release": lambda v: "/?" + urlencode({"release": v}),
    "board-judge": lambda v: "/?" + urlencode({"judge_config": v}),
    "api-release": lambda v: "/api/leaderboard?" + urlencode({"release": v}),
    "api-history-system": lambda v: "/api/history?" + urlencode({"system_id": v, "judge_config": v}),
    "history-judge": lambda v: "/history?" + urlencode({"judge_config": v}),
    "system-name": lambda v: "/system/" + quote(v, safe=""),
    "system-release": lambda v: "/system/alpha?" + urlencode({"release": v}),
    "report-judge": lambda v: "/report/{rid}?" + urlencode({"judge_config": v}),
    "report-id": lambda v: "/report/" + quote(v, safe=""),
}
INJECTION_CASES = [pytest.param(param, value, id=f"{param}-{name}")
                   for param in PARAMS for name, value in HOSTILE_VALUES.items()] + [
    pytest.param("report-id", "99999999999999999999", id="report-id-beyond-bigint"),
    pytest.param("report-id", "-1", id="report-id-negative"),
]


@pytest.mark.parametrize(("param", "value"), INJECTION_CASES)
def test_hostile_query_parameters_give_4xx_or_an_escaped_not_found(site, param, value):
    url, rid = site
    status, ctype, body = get(url + PARAMS[param](value).replace("{rid}", str(rid)))
    if status == 200:  # a filter that matches nothing: an empty list, or the page says "not found"
        assert param == "api-history-system" or (param == "report-judge" and 'data-judge-missing="true"' in body)
    else:
        assert 400 <= status < 500, (status, body[:300])
    if ctype.startswith("text/html"):
        assert_inert(body)
        assert "\x00" not in body
        if any(c in value for c in "<>\"'&"):
            assert value not in body  # echoed escaped, if at all
    else:
        json.loads(body)
