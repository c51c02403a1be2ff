"""The leaderboard page as a person sees it: real Postgres, the app served by uvicorn, headless Chromium.

The fixture stores three months of a small leaderboard (two judge configs in the latest month), the
reports of the latest month with their sources, scores and judgments, and one hostile report text.
The pages must show exactly the numbers the SQL views hold (cut to 3 decimals as displayed), the drill-down
must show every judgment and escape everything, and the history chart must have one point per month.
The plugin test loads plugins/ through Airflow's own plugins manager and mounts the app as the API
server does.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urljoin

# Airflow reads its home at first import (the plugin test imports it); never touch ~/airflow.
os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="airflow_home_"))

import pytest  # noqa: E402
import sqlalchemy as sa  # noqa: E402
from support import warehouse  # noqa: E402
from support.chromium import dump_dom, parse_html, serve  # noqa: E402

from deepscholar import cli, db  # noqa: E402
from deepscholar.evaluation.boards.leaderboard import load_leaderboard  # noqa: E402
from deepscholar.evaluation.metrics import registry  # noqa: E402
from deepscholar.web import create_app  # noqa: E402
from deepscholar.web.render import format_value  # noqa: E402

# Chromium and the Airflow plugin make most of these slow (marked one by one); the trust table's test is fast.
slow = pytest.mark.slow

# Labels, order and headline variants come from the metric registry, as the page's do.
METRIC_ORDER = registry.metric_names(registry.CORE)
DIMENSIONS = registry.dimensions()
HEADLINE_VARIANT = {m: registry.headline_variant(m) for m in METRIC_ORDER}
PROJECT_ROOT = Path(__file__).resolve().parents[2]
MONTHS = ["2025-01", "2025-02", "2025-03"]
LLM = "llm:openai/gpt-4.1"
LOCAL = "local:all-MiniLM-L6-v2:v1"
QUERIES = ["2503.00001", "2503.00002"]
# Latest month, LLM judge: the seven means per system. 0.34851 shows as 0.348, truncated like the paper's
# Table 2 (a rounding page would show 0.349); extractive has a zero metric, so its geometric mean is 0 and it must still be shown.
LATEST = {
    "deepscholar_base": [0.80949, 0.34851, 0.59049, 0.16651, 0.00849, 0.78751, 0.89949],
    "extractive": [0.612, 0.2014, 0.4, 0.1, 0.0, 0.3, 0.45],
    "oracle": [0.7, 0.5, 0.9, 0.6, 0.3, 0.95, 0.97],
}
LATEST_LOCAL = {
    "deepscholar_base": [0.5, 0.41, 0.62, 0.2, 0.05, 0.7, 0.8],
    "extractive": [0.45, 0.3, 0.5, 0.15, 0.02, 0.35, 0.5],
}
SIGNIFICANT_METRICS = {"relevance_rate", "claim_coverage"}
HOSTILE_TEXT = ('Prior work <script>document.title="pwned"</script> studies retrieval [1]. '
                '<img src=x onerror="document.title=\'owned\'"> Later work extends it [2].\n'
                "Second paragraph & more </div></main>.")




def shown(x: float) -> str:
    """Three decimals cut, not rounded, as the paper's Table 2 prints them."""
    return f"{math.floor(x * 1000 + 1e-9) / 1000:.3f}"

def _gm(means: list[float]) -> float:
    return 0.0 if min(means) <= 0 else math.prod(means) ** (1 / len(means))


def _history_means(system: str, month: str) -> list[float] | None:
    if month == MONTHS[-1]:
        return LATEST[system]
    if system == "oracle" and month == MONTHS[0]:
        return None  # registered in February: a gap in its history, not a zero
    shift = 0.02 * (MONTHS.index(month) + 1)
    return [round(max(0.01, min(1.0, v - 0.1 + shift)), 4) for v in LATEST[system]]


def _board_rows(month: str, judge: str, table: dict[str, list[float]]):
    rows, metric_rows = [], []
    ranked = sorted(table, key=lambda s: -_gm(table[s]))
    for system, means in table.items():
        gm = _gm(means)
        rows.append({
            "release_id": month, "system_id": system, "judge_config": judge,
            "n_queries": 2, "n_reports": 2, "n_failed": 1 if system == "extractive" else 0,
            **dict(zip(METRIC_ORDER, means, strict=True)),
            "geometric_mean": gm, "geometric_mean_ci_low": max(0.0, gm - 0.04),
            "geometric_mean_ci_high": min(1.0, gm + 0.04), "rank": ranked.index(system) + 1,
            "metric_versions": {m: f"d1+{m}_v1" for m in METRIC_ORDER},
        })
        for m, mean in zip(METRIC_ORDER, means, strict=True):
            best = max(table, key=lambda s, m=m: table[s][METRIC_ORDER.index(m)]) == system
            unscored = 1 if (system == "deepscholar_base" and m == "nugget_coverage") else 0
            metric_rows.append({
                "release_id": month, "system_id": system, "judge_config": judge, "metric": m,
                "dimension": next(d for d, ms in DIMENSIONS.items() if m in ms),
                "metric_position": METRIC_ORDER.index(m) + 1, "variant": HEADLINE_VARIANT[m], "mean": mean, "n": 2 - unscored, "n_unscored": unscored,
                "ci_low": max(0.0, mean - 0.05), "ci_high": min(1.0, mean + 0.05), "is_best": best,
                "significant": best and m in SIGNIFICANT_METRICS,
                "p_value": (0.01 if m in SIGNIFICANT_METRICS else 0.2) if best else None,
            })
    return rows, metric_rows


def store_board(conn, rows: list[dict], metric_rows: list[dict]) -> None:
    """Store a board as the roll-up does: leaderboard_systems (the wide `leaderboard` is a view over it) and
    leaderboard_metrics, which holds the means."""
    warehouse.store_board(conn, rows, metric_rows, METRIC_ORDER)


def seed(engine) -> dict:
    """A three-month leaderboard and the latest month's reports, scores and judgments."""
    with engine.begin() as conn:
        db.upsert(conn, "releases", [
            {"release_id": m, "status": "published", "window_start": f"{m}-01T00:00:00+00:00"} for m in MONTHS
        ] + [{"release_id": "2025-04", "status": "building", "window_start": "2025-04-01T00:00:00+00:00"}],
            key=["release_id"])
        db.upsert(conn, "systems", [{"system_id": s, "kind": s} for s in LATEST], key=["system_id"])
        db.upsert(conn, "release_queries", [
            {"release_id": MONTHS[-1], "arxiv_id": q, "title": f"Query paper {q} <em>", "abstract": "abstract",
             "section_raw_latex": "x", "section_text": "x", "word_count": 1} for q in QUERIES],
            key=["release_id", "arxiv_id"])
        db.upsert(conn, "reports", [
            {"release_id": MONTHS[-1], "system_id": s, "arxiv_id": q, "status": "ok",
             "text": HOSTILE_TEXT if (s, q) == ("deepscholar_base", QUERIES[0]) else f"{s} on {q} [1]."}
            for s in LATEST for q in QUERIES], key=["release_id", "system_id", "arxiv_id"])
        ids = {(r.system_id, r.arxiv_id): r.report_id for r in conn.execute(sa.text(
            "SELECT system_id, arxiv_id, report_id FROM deepscholar.reports"))}
        hostile = ids[("deepscholar_base", QUERIES[0])]
        db.upsert(conn, "report_sources", [
            {"report_id": hostile, "source_idx": 1, "arxiv_id": "2401.00001", "url": "javascript:alert(1)",
             "title": "Retrieval <b>augmented</b> generation", "snippet": "snippet <script>x</script>"},
            {"report_id": hostile, "source_idx": 2, "arxiv_id": "2402.00002",
             "url": "https://arxiv.org/abs/2402.00002", "title": "Dense passage retrieval", "snippet": "dpr"},
        ], key=["report_id", "source_idx"])
        scores = []
        for (system, q), rid in ids.items():
            for i, m in enumerate(METRIC_ORDER):
                value = 0.25 * ((i + len(system) + len(q)) % 5)
                unscored = rid == hostile and m == "nugget_coverage"
                scores.append({
                    "report_id": rid, "metric": m, "judge_config": LLM, "variant": HEADLINE_VARIANT[m],
                    "metric_version": f"d1+{m}_v1", "value": None if unscored else value,
                    "unscored_reason": "1 of 1 items unscored; first: nuggets:0-9: answer not JSON" if unscored
                    else None, "n_items": 1, "details": {}})
        scores.append({"report_id": hostile, "metric": "nugget_coverage", "judge_config": LLM, "variant": "all",
                       "metric_version": "d1+nugget_coverage_v1", "value": None,
                       "unscored_reason": "1 of 1 items unscored; first: nuggets:0-9: answer not JSON",
                       "n_items": 1, "details": {}})
        scores.append({"report_id": hostile, "metric": "organization", "judge_config": LOCAL, "variant": "score",
                       "metric_version": "d1+organization_v1", "value": 0.75, "unscored_reason": None,
                       "n_items": 2, "details": {}})
        db.upsert(conn, "metric_scores", scores, key=["report_id", "metric", "judge_config", "variant"])
        judgments = [
            ("organization", LLM, "order:AB", {"preferred": "report"}, None, "<i>clearer</i> structure"),
            ("organization", LLM, "order:BA", {"preferred": "exemplar"}, None, "the exemplar groups topics"),
            ("nugget_coverage", LLM, "nuggets:0-9", None, "answer not JSON: <oops>", None),
            ("relevance_rate", LLM, "src:2401.00001", {"grade": 2}, None, "on topic"),
            ("citation_precision", LLM, "s10:c1", {"supported": False}, None, "not in the abstract"),
            ("citation_precision", LLM, "s2:c1", {"supported": True}, None, "stated in the abstract"),
            ("claim_coverage", LLM, "s1", {"min_window": 0}, None, "covered by its own citation"),
            ("organization", LOCAL, "order:AB", {"preferred": "report"}, None,
             "local embedding judge (all-MiniLM-L6-v2), not an LLM: cosine 0.71"),
        ]
        # SQL NULL, not JSON null, for an unscored item's label (the table's CHECK), as the runner writes it.
        conn.execute(sa.text(
            "INSERT INTO deepscholar.judgments (report_id, metric, judge_config, item_key, metric_version, label, "
            "unscored_reason, explanation, n_calls) VALUES (:report_id, :metric, :judge_config, :item_key, "
            ":metric_version, CAST(:label AS jsonb), :unscored_reason, :explanation, 1)"), [
            {"report_id": hostile, "metric": m, "judge_config": j, "item_key": k, "metric_version": f"d1+{m}_v1",
             "label": None if label is None else json.dumps(label), "unscored_reason": reason, "explanation": expl}
            for m, j, k, label, reason, expl in judgments])

        board, cells = [], []
        for month in MONTHS:
            table = {s: _history_means(s, month) for s in LATEST}
            rows, metric_rows = _board_rows(month, LLM, {s: v for s, v in table.items() if v is not None})
            board += rows
            cells += metric_rows
        rows, metric_rows = _board_rows(MONTHS[-1], LOCAL, LATEST_LOCAL)
        store_board(conn, board + rows, cells + metric_rows)
    return {"hostile": hostile, "ids": ids}


@pytest.fixture
def site(engine):
    seeded = seed(engine)
    with serve(create_app(lambda: engine)) as url:
        yield url, seeded


def _view(engine, sql: str, **params) -> list[dict]:
    with engine.connect() as conn:
        return [dict(r) for r in conn.execute(sa.text(sql), params).mappings()]


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _value(cell) -> str:
    return cell.own_text()


def _assert_board_matches_view(dom, engine, judge: str) -> None:
    view = _view(engine, "SELECT * FROM deepscholar.leaderboard_latest WHERE judge_config = :j", j=judge)
    cells = {(r["system_id"], r["metric"]): r for r in _view(
        engine, "SELECT * FROM deepscholar.leaderboard_metrics WHERE judge_config = :j AND release_id = :r",
        j=judge, r=view[0]["release_id"])}
    table = dom.one("table", {"class": "leaderboard"})
    assert table.attrs["data-judge-config"] == judge
    assert table.attrs["data-release"] == MONTHS[-1]
    order = [tr.attrs["data-system"] for tr in table.find_all("tr", {"data-system": True})]
    assert order == [r["system_id"] for r in sorted(view, key=lambda r: r["rank"])], "rows in rank order"
    for r in view:
        sid = r["system_id"]
        for m in METRIC_ORDER:
            td = table.cell(sid, m)
            assert _value(td) == shown(r[m]), (sid, m)
            cell = cells[(sid, m)]
            assert ("best" in td.classes()) == cell["is_best"], (sid, m)
            assert (td.find("span", {"class": "mark"}) is not None) == cell["significant"], (sid, m)
            unscored = td.find("span", {"class": "unscored"})
            if cell["n_unscored"]:
                assert unscored is not None and unscored.text() == f"{cell['n_unscored']} unscored"
            else:
                assert unscored is None
        gm = table.cell(sid, "geometric_mean")
        assert _value(gm) == shown(r['geometric_mean'])
        assert table.cell(sid, "rank").text() == str(r["rank"])
        assert table.cell(sid, "n_reports").text() == \
            f"{r['n_reports']} / {r['n_queries']}"
        assert table.cell(sid, "n_failed").text() == str(r["n_failed"])


@slow
def test_latest_leaderboard_shows_the_view_numbers_grouped_by_dimension(site, engine):
    url, _ = site
    dom = parse_html(dump_dom(url + "/"))
    assert [th.text() for th in dom.find_all("th", {"data-dimension": True})] == [
        "Knowledge synthesis", "Retrieval quality", "Verifiability"]
    assert [th.attrs["colspan"] for th in dom.find_all("th", {"data-dimension": True})] == ["2", "3", "2"]
    # Two judge configs in the latest month: a selector; by default the board `deepscholar leaderboard` picks
    # (both complete: the larger one, the LLM judge's).
    links = dom.one("p", {"data-selector": "judge-config"}).find_all("a")
    assert [a.attrs["data-judge-config"] for a in links] == [LLM, LOCAL]
    assert [a.attrs.get("aria-current") for a in links] == ["true", None]
    _assert_board_matches_view(dom, engine, LLM)
    table = dom.one("table", {"class": "leaderboard"})
    # Spot checks against hand-made numbers, so a view and a page wrong in the same way still fail.
    assert _value(table.cell("deepscholar_base", "nugget_coverage")) == "0.348"
    assert _value(table.cell("extractive", "geometric_mean")) == "0.000"
    assert "best" in table.cell("oracle", "claim_coverage").classes()

    # Follow the selector link the way a person clicks it.
    local = parse_html(dump_dom(urljoin(url + "/", links[1].attrs["href"])))
    _assert_board_matches_view(local, engine, LOCAL)
    assert len(local.one("table", {"class": "leaderboard"}).find_all("tr", {"data-system": True})) == 2


@slow
def test_report_drilldown_shows_text_sources_scores_and_judgments_escaped(site, engine):
    url, seeded = site
    rid = seeded["hostile"]
    # Reach the report from the leaderboard: system link, then the report link on the system page.
    board = parse_html(dump_dom(url + "/"))
    system_href = board.cell("deepscholar_base", "system_id").one("a").attrs["href"]
    system_page = parse_html(dump_dom(urljoin(url + "/", system_href)))
    report_href = system_page.one("tr", {"data-report-id": str(rid)}).find("a").attrs["href"]
    dom = parse_html(dump_dom(urljoin(url + "/", report_href)))

    # Hostile text stays text: no script ran (title intact), no element was injected.
    assert dom.one("title").text() == f"Report {rid} · DeepScholar"
    assert dom.find_all("script") == [] and dom.find_all("img") == []
    text = dom.one("div", {"data-report-text": str(rid)})
    assert text.text() == HOSTILE_TEXT
    assert [a.attrs["href"] for a in text.find_all("a")] == ["#source-1", "#source-2"]

    sources = {tr.attrs["data-source-idx"]: tr for tr in dom.find_all("tr", {"data-source-idx": True})}
    assert sorted(sources) == ["1", "2"]
    assert sources["1"].find("a") is None, "a javascript: URL must not become a link"
    assert "Retrieval <b>augmented</b> generation" in sources["1"].text()
    assert sources["2"].one("a").attrs["href"] == "https://arxiv.org/abs/2402.00002"

    # Reached from the LLM board, the page shows the LLM judge's work; its "all" link shows every judge's.
    stored = _view(engine, "SELECT * FROM deepscholar.judgments WHERE report_id = :r", r=rid)
    sections = dom.find_all("section", {"class": "judgments"})
    assert {(s.attrs["data-metric"], s.attrs["data-judge-config"]) for s in sections} == {
        (j["metric"], j["judge_config"]) for j in stored if j["judge_config"] == LLM}
    all_href = dom.one("a", {"data-judge-config": "all"}).attrs["href"]
    dom = parse_html(dump_dom(urljoin(url + "/", all_href)))
    sections = dom.find_all("section", {"class": "judgments"})
    assert {(s.attrs["data-metric"], s.attrs["data-judge-config"]) for s in sections} == {
        (j["metric"], j["judge_config"]) for j in stored}
    for j in stored:
        section = dom.one("section", {"data-metric": j["metric"], "data-judge-config": j["judge_config"]})
        row = section.one("tr", {"data-item-key": j["item_key"]})
        label = row.one("td", {"data-field": "label"}).text()
        assert label == ("" if j["label"] is None else json.dumps(j["label"], sort_keys=True))
        assert row.one("td", {"data-field": "unscored_reason"}).text() == (j["unscored_reason"] or "")
        assert row.one("td", {"data-field": "explanation"}).text() == (j["explanation"] or "")
        assert row.attrs["data-unscored"] == ("true" if j["unscored_reason"] else "false")
    # Item keys in natural order: s2 before s10.
    cp = dom.one("section", {"data-metric": "citation_precision", "data-judge-config": LLM})
    assert [tr.attrs["data-item-key"] for tr in cp.find_all("tr", {"data-item-key": True})] == ["s2:c1", "s10:c1"]

    scores = _view(engine, "SELECT * FROM deepscholar.metric_scores WHERE report_id = :r", r=rid)
    for s in scores:
        row = dom.one("tr", {"data-metric": s["metric"], "data-variant": s["variant"],
                             "data-judge-config": s["judge_config"]})
        if s["value"] is None:
            assert "unscored" in row.text() and s["unscored_reason"] in row.text()
        else:
            assert row.one("span", {"class": "value"}).text() == format_value(s["value"])

    # One judge at a time.
    only_local = parse_html(dump_dom(f"{url}/report/{rid}?judge_config={LOCAL.replace(':', '%3A')}"))
    assert [s.attrs["data-judge-config"] for s in only_local.find_all("section", {"class": "judgments"})] == [LOCAL]


@slow
def test_history_charts_have_one_point_per_month(site, engine):
    url, _ = site
    history = _view(engine, "SELECT * FROM deepscholar.leaderboard_history WHERE judge_config = :j", j=LLM)
    dom = parse_html(dump_dom(url + "/system/deepscholar_base"))
    chart = dom.one("svg", {"data-chart": "system-history"})
    points = chart.find_all("circle", {"data-series": "geometric_mean"})
    assert [p.attrs["data-x"] for p in points] == MONTHS
    expected = {r["release_id"]: r for r in history if r["system_id"] == "deepscholar_base"}
    for p in points:
        assert float(p.attrs["data-value"]) == pytest.approx(expected[p.attrs["data-x"]]["geometric_mean"])
    for m in MONTHS:
        for metric in (*METRIC_ORDER, "geometric_mean"):
            td = dom.one("td", {"data-release": m, "data-metric": metric})
            assert td.text() == shown(expected[m][metric])
    per_metric = dom.one("svg", {"data-chart": "system-metrics"})
    assert len(per_metric.find_all("circle")) == len(METRIC_ORDER) * len(MONTHS)

    # A system that joined in February has two points, not a zero for January.
    oracle = parse_html(dump_dom(url + "/system/oracle"))
    assert [p.attrs["data-x"] for p in oracle.one("svg", {"data-chart": "system-history"}).find_all("circle")] == \
        MONTHS[1:]

    overview = parse_html(dump_dom(url + "/history"))
    chart = overview.one("svg", {"data-chart": "history"})
    for system in LATEST:
        xs = [p.attrs["data-x"] for p in chart.find_all("circle", {"data-series": system})]
        assert xs == [r["release_id"] for r in history if r["system_id"] == system]
    assert [li.text() for li in overview.one("ul", {"data-legend": "history"}).find_all("li")] == sorted(LATEST)


@slow
def test_api_and_error_pages(site, engine):
    url, _ = site
    status, body = _get(url + "/api/leaderboard")
    assert status == 200
    data = json.loads(body)
    view = {r["system_id"]: r for r in _view(
        engine, "SELECT * FROM deepscholar.leaderboard_latest WHERE judge_config = :j", j=LLM)}
    assert data["release_id"] == MONTHS[-1] and data["judge_config"] == LLM and data["judge_configs"] == [LLM, LOCAL]
    for row in data["rows"]:
        assert row["geometric_mean"] == pytest.approx(view[row["system_id"]]["geometric_mean"])
        for m in METRIC_ORDER:
            assert row["metrics"][m]["mean"] == pytest.approx(view[row["system_id"]][m])
    assert data["rows"][0]["metrics"]["nugget_coverage"]["variant"] == "strict_all"

    status, body = _get(url + "/api/leaderboard?judge_config=nope")
    assert status == 404 and "available" in json.loads(body)["error"]
    status, body = _get(url + "/report/999999")
    assert status == 404 and "no report 999999" in body
    status, body = _get(url + f"/?release={MONTHS[0]}")
    assert status == 200
    old = parse_html(body).one("table", {"class": "leaderboard"})
    assert old.attrs["data-release"] == MONTHS[0]
    assert [tr.attrs["data-system"] for tr in old.find_all("tr", {"data-system": True})] == [
        "deepscholar_base", "extractive"]
    status, _ = _get(url + "/")
    # Scripts are forbidden outright, whatever a report contains.
    with urllib.request.urlopen(url + "/", timeout=30) as resp:
        assert "script-src" not in resp.headers["Content-Security-Policy"]
        assert resp.headers["Content-Security-Policy"].startswith("default-src 'none'")


@slow
def test_default_board_is_the_one_the_cli_prints(engine, db_url, monkeypatch, capsys):
    """One "latest" everywhere: with no release or judge asked for, the page shows the board
    `deepscholar leaderboard` prints (evaluation.leaderboard.pick_board), not one of its own choosing.

    The latest month has a partial trial board (one metric judged, so no system has a geometric mean) under
    a judge config that sorts first and covers more systems, and a complete board under another: the
    page used to show the first judge config alphabetically; the CLI shows the most complete board.
    """
    month, trial, full = "2025-05", "aaa:trial-run", "zzz:full"
    with engine.begin() as conn:
        db.upsert(conn, "releases", [{"release_id": m, "status": "published", "window_start": f"{m}-01T00:00:00+00:00"}
                                     for m in ("2025-04", month)], key=["release_id"])
        db.upsert(conn, "systems", [{"system_id": s, "kind": s} for s in LATEST], key=["system_id"])
        old_rows, old_cells = _board_rows("2025-04", full, LATEST)
        rows, cells = _board_rows(month, full, {s: LATEST[s] for s in ("deepscholar_base", "oracle")})
        trial_rows, trial_cells = _board_rows(month, trial, LATEST)
        for r in trial_rows:
            r.update(geometric_mean=None, geometric_mean_ci_low=None, geometric_mean_ci_high=None)
        trial_cells = [c for c in trial_cells if c["metric"] == METRIC_ORDER[0]]
        store_board(conn, old_rows + rows + trial_rows, old_cells + cells + trial_cells)

    expected = load_leaderboard(engine)
    assert {(r["release_id"], r["judge_config"]) for r in expected} == {(month, full)}
    systems = [r["system_id"] for r in expected]
    with serve(create_app(lambda: engine)) as url:
        status, body = _get(url + "/")
        assert status == 200
        api = json.loads(_get(url + "/api/leaderboard")[1])
    dom = parse_html(body)
    table = dom.one("table", {"class": "leaderboard"})
    assert (table.attrs["data-release"], table.attrs["data-judge-config"]) == (month, full)
    assert [tr.attrs["data-system"] for tr in table.find_all("tr", {"data-system": True})] == systems
    assert (api["release_id"], api["judge_config"]) == (month, full)
    assert [r["system_id"] for r in api["rows"]] == systems
    # The trial board is still one click away, and the selector marks the board shown.
    links = dom.one("p", {"data-selector": "judge-config"}).find_all("a")
    assert [(a.attrs["data-judge-config"], a.attrs.get("aria-current")) for a in links] == [
        (trial, None), (full, "true")]

    monkeypatch.setenv("DEEPSCHOLAR_DB_URL", db_url)
    capsys.readouterr()
    assert cli.main(["leaderboard", "--format", "json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert [(r["release_id"], r["judge_config"], r["system_id"]) for r in printed] == [
        (month, full, s) for s in systems]


@slow
def test_empty_warehouse_says_so(engine):
    with serve(create_app(lambda: engine)) as url:
        dom = parse_html(dump_dom(url + "/"))
        assert dom.one("p", {"data-empty": "true"})
        assert dom.find("table") is None
        status, body = _get(url + "/api/leaderboard")
        assert status == 200 and json.loads(body)["rows"] == []
        status, body = _get(url + "/history")
        assert status == 200 and 'data-empty="true"' in body


@slow
def test_plugin_mounts_the_app_and_adds_a_menu_entry(engine, db_url, monkeypatch):
    """Load plugins/ with Airflow's plugins manager and mount the apps as the API server's init_plugins does."""
    seed(engine)
    monkeypatch.setenv("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
    monkeypatch.setenv("DEEPSCHOLAR_DB_URL", db_url)  # the plugin's app uses the default engine factory
    from airflow import plugins_manager, settings
    from airflow.api_fastapi.app import init_plugins
    from fastapi import FastAPI

    monkeypatch.setattr(settings, "PLUGINS_FOLDER", str(PROJECT_ROOT / "plugins"))
    caches = (plugins_manager._get_plugins, plugins_manager._get_ui_plugins, plugins_manager.get_fastapi_plugins,
              plugins_manager.get_flask_plugins, plugins_manager._get_extra_operators_links_plugins)
    for cached in caches:
        cached.cache_clear()
    try:
        plugins, errors = plugins_manager._get_plugins()
        assert not [k for k in errors if "deepscholar" in k], errors
        ours = [p for p in plugins if p.name == "deepscholar_leaderboard"]
        assert len(ours) == 1
        assert [a["url_prefix"] for a in ours[0].fastapi_apps] == ["/deepscholar"]
        external_views, _ = plugins_manager._get_ui_plugins()
        menu = [v for v in external_views if v["name"] == "DeepScholar leaderboard"]
        assert menu and menu[0]["href"] == "deepscholar/" and menu[0]["url_route"] == "deepscholar-leaderboard"
        # The UI learns its menu from GET /api/v2/plugins, which silently drops a plugin its model rejects.
        from airflow.api_fastapi.core_api.datamodels.plugins import PluginResponse

        info = next(i for i in plugins_manager.get_plugin_info() if i["name"] == "deepscholar_leaderboard")
        listed = PluginResponse.model_validate(info)
        assert [(v.name, v.href, v.url_route, v.destination) for v in listed.external_views] == [
            ("DeepScholar leaderboard", "deepscholar/", "deepscholar-leaderboard", "nav")]
        assert [a.url_prefix for a in listed.fastapi_apps] == ["/deepscholar"]

        root = FastAPI()
        init_plugins(root)
        with serve(root) as url:
            status, body = _get(url + "/deepscholar/")
            assert status == 200
            dom = parse_html(body)
            assert dom.one("table", {"class": "leaderboard"}).attrs["data-release"] == MONTHS[-1]
            # Links carry the mount prefix, so they work inside Airflow.
            nav = [a.attrs["href"] for a in dom.one("nav").find_all("a")]
            assert nav == ["/deepscholar/", "/deepscholar/history", "/deepscholar/api/leaderboard",
                           "/deepscholar/systems/new"]
            system_href = dom.cell("oracle", "system_id").one("a").attrs["href"]
            assert system_href.startswith("/deepscholar/system/oracle")
            status, _ = _get(url + system_href)
            assert status == 200
            status, body = _get(url + "/deepscholar/api/leaderboard")
            assert status == 200 and json.loads(body)["release_id"] == MONTHS[-1]
    finally:
        for cached in caches:
            cached.cache_clear()


def test_trust_table_shows_the_judge_against_human_labels_only_where_there_are_labels(engine):
    """Fast tier: the page served by uvicorn and read over HTTP (no browser). The latest month's LLM board
    gets a 'How far can you trust each column' table from its human labels; months and judges without
    any show none."""
    from support.human_labels import store_human_labels

    from deepscholar.evaluation.judge_validation.annotation_units import judged_units
    from deepscholar.evaluation.judge_validation.judge_vs_humans import agreement_report

    seeded = seed(engine)
    with engine.begin() as conn:  # a second graded source of the same report: 2 relevance items under LLM
        conn.execute(sa.text(
            "INSERT INTO deepscholar.judgments (report_id, metric, judge_config, item_key, metric_version, label, "
            "explanation, n_calls) VALUES (:r, 'relevance_rate', :j, 'src:2402.00002', 'd1+relevance_rate_v1', "
            "CAST(:l AS jsonb), 'off topic', 1)"), {"r": seeded["hostile"], "j": LLM, "l": json.dumps({"grade": 0})})
    units = list(judged_units(engine, MONTHS[-1], "relevance_rate", LLM))
    assert sorted(u.judge_label for u in units) == ["0", "2"]
    judge = {u.item_id: u.judge_label for u in units}
    first, second = sorted(judge, key=lambda i: judge[i], reverse=True)  # judged "2", judged "0"
    # Annotator x agrees with the judge on both; y gives the second "1": majority per item is a tie there.
    # Judge vs majority: only the first item (2 = 2): 100% on 1 item; kappa undefined (one label).
    store_human_labels(engine, units, {"x": {first: "2", second: "0"}, "y": {first: "2", second: "1"}})
    expected = agreement_report(engine, MONTHS[-1], judge_config=LLM, kappa_intervals=False)
    assert [(r["metric"], r["n_items"], r["n_ties"], r["percent_agreement"], r["cohen_kappa"])
            for r in expected] == [("relevance_rate", 1, 1, 1.0, None)]

    with serve(create_app(lambda: engine)) as url:
        status, html = _get(url + "/?judge_config=" + LLM.replace(":", "%3A"))
        assert status == 200
        dom = parse_html(html)
        section = dom.one("section", {"data-trust": "true"})
        assert "How far can you trust each column" in section.text()
        rows = section.find_all("tr", {"data-metric": True})
        assert [r.attrs["data-metric"] for r in rows] == ["relevance_rate"]
        row = rows[0]
        assert row.one("td", {"data-metric": "percent_agreement"}).attrs["data-value"] == "1.0"
        assert row.one("td", {"data-metric": "n_items"}).text() == "1"
        assert row.one("td", {"data-metric": "n_annotators"}).text() == "2"
        assert row.one("td", {"data-metric": "cohen_kappa"}).text() == "n/a"
        paper = expected[0]["paper_agreement"]  # the metric's paper_human_agreement, when it declares one
        assert row.one("td", {"data-metric": "paper_agreement"}).text() == (
            "—" if paper is None else f"{100 * paper:.0f}%")
        # An earlier month (no human labels) and the local judge's board (no relevance judgments): no table.
        for query in (f"?release={MONTHS[0]}", "?judge_config=" + LOCAL.replace(":", "%3A")):
            status, html = _get(url + "/" + query)
            assert status == 200 and 'data-trust="true"' not in html, query
        # A stored entry edited by hand into another shape: its row says so and names the command that
        # rewrites it; the board is still served (it was a 500).
        with engine.begin() as conn:
            conn.execute(sa.text("UPDATE deepscholar.human_agreement_stats SET report = CAST(:r AS jsonb) "
                                 "WHERE release_id = :m AND metric = 'relevance_rate'"),
                         {"r": json.dumps({"metric": "relevance_rate", "percent": "high"}), "m": MONTHS[-1]})
        status, html = _get(url + "/?judge_config=" + LLM.replace(":", "%3A"))
        assert status == 200
        row = parse_html(html).one("section", {"data-trust": "true"}).one("tr", {"data-metric": "relevance_rate"})
        assert "unreadable stored entry: run `deepscholar judges agreement`" in row.text()
        assert parse_html(html).find_all("tr", {"data-system": True}), "the board itself is still there"
