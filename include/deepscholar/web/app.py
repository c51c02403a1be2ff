"""The leaderboard web app: latest month, history across months, a per-report drill-down and a JSON API.

HTML is built here in Python (no template files, no JavaScript, no CDN: the page must work offline and
inside Airflow's iframe). Every string from the database is escaped — report texts, source titles and
judge explanations are untrusted — and a strict Content-Security-Policy forbids scripts altogether.
Cells carry data-* attributes (data-system, data-metric, data-value, ...) so tests and scrapers can read
the numbers without parsing the visible text.

The app reads only what the roll-up stored (leaderboard, reports, judgments; schema in
deepscholar/migrations/versions/); it computes no metric itself, so a number on the page is always the
number in Postgres.
"""

from __future__ import annotations

import html
import json
import logging
import math
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import sqlalchemy as sa
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from sqlalchemy.engine import Engine

from deepscholar import db
from deepscholar.evaluation.base import DIMENSIONS, HEADLINE_VARIANT, METRIC_ORDER

__all__ = ["create_app", "svg_line_chart", "format_value", "DIMENSION_LABELS", "METRIC_LABELS"]

log = logging.getLogger(__name__)

DIMENSION_LABELS: dict[str, str] = {
    "knowledge_synthesis": "Knowledge synthesis",
    "retrieval_quality": "Retrieval quality",
    "verifiability": "Verifiability",
}
METRIC_LABELS: dict[str, str] = {
    "organization": "Organization",
    "nugget_coverage": "Nugget coverage",
    "relevance_rate": "Relevance rate",
    "reference_coverage": "Reference coverage",
    "document_importance": "Document importance",
    "citation_precision": "Citation precision",
    "claim_coverage": "Claim coverage",
}
# Shown after a metric mean whose best-system mark passed the paired t-test (METRICS.md, Roll-up).
SIGNIFICANCE_MARK = "*"
DECIMALS = 3
# Colour-blind-safe palette (Okabe–Ito) for chart series.
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442")
# No scripts at all; inline styles only (the stylesheet lives in the page); framing by the same origin only
# (Airflow embeds the page in an iframe served from the same host).
CSP = ("default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; form-action 'self'; "
       "base-uri 'none'; frame-ancestors 'self'")


# --- reading the warehouse ---------------------------------------------------------------------------

def _rows(conn: sa.Connection, sql: str, **params: Any) -> list[dict]:
    return [dict(r) for r in conn.execute(sa.text(sql), params).mappings()]


def _latest_rows(conn: sa.Connection) -> list[dict]:
    return _rows(conn, "SELECT * FROM deepscholar.leaderboard_latest")


def _release_rows(conn: sa.Connection, release_id: str) -> list[dict]:
    return _rows(conn, "SELECT * FROM deepscholar.leaderboard WHERE release_id = :r", r=release_id)


def _metric_cells(conn: sa.Connection, release_id: str, judge_config: str) -> dict[tuple[str, str], dict]:
    rows = _rows(conn, "SELECT * FROM deepscholar.leaderboard_metrics WHERE release_id = :r AND judge_config = :j",
                 r=release_id, j=judge_config)
    return {(r["system_id"], r["metric"]): r for r in rows}


def _history_rows(conn: sa.Connection, judge_config: str | None = None, system_id: str | None = None) -> list[dict]:
    where, params = [], {}
    if judge_config is not None:
        where.append("h.judge_config = :j")
        params["j"] = judge_config
    if system_id is not None:
        where.append("h.system_id = :s")
        params["s"] = system_id
    clause = ("WHERE " + " AND ".join(where)) if where else ""
    # `month` is the view's reading of when a release stands for (window, else its YYYY-MM id, else creation).
    return _rows(conn, f"SELECT h.* FROM deepscholar.leaderboard_history h {clause} "
                       "ORDER BY h.month, h.release_id, h.system_id", **params)


def _history_judge_configs(conn: sa.Connection, system_id: str | None = None) -> list[str]:
    sql = "SELECT DISTINCT judge_config FROM deepscholar.leaderboard_history"
    if system_id is not None:
        return list(conn.execute(sa.text(sql + " WHERE system_id = :s ORDER BY 1"), {"s": system_id}).scalars())
    return list(conn.execute(sa.text(sql + " ORDER BY 1")).scalars())


def _system(conn: sa.Connection, system_id: str) -> dict | None:
    rows = _rows(conn, "SELECT system_id, kind, version, active FROM deepscholar.systems WHERE system_id = :s",
                 s=system_id)
    return rows[0] if rows else None


def _system_reports(conn: sa.Connection, system_id: str, release_id: str, judge_config: str) -> list[dict]:
    reports = _rows(conn, """
        SELECT rp.report_id, rp.arxiv_id, rp.status, rp.error, q.title AS query_title
        FROM deepscholar.reports rp
        LEFT JOIN deepscholar.release_queries q ON q.release_id = rp.release_id AND q.arxiv_id = rp.arxiv_id
        WHERE rp.system_id = :s AND rp.release_id = :r
        ORDER BY rp.arxiv_id""", s=system_id, r=release_id)
    scores = _rows(conn, """
        SELECT ms.report_id, ms.metric, ms.variant, ms.value, ms.unscored_reason
        FROM deepscholar.metric_scores ms JOIN deepscholar.reports rp ON rp.report_id = ms.report_id
        WHERE rp.system_id = :s AND rp.release_id = :r AND ms.judge_config = :j""",
                   s=system_id, r=release_id, j=judge_config)
    by_report: dict[int, dict[str, dict]] = {}
    for s in scores:
        if HEADLINE_VARIANT.get(s["metric"]) == s["variant"]:
            by_report.setdefault(s["report_id"], {})[s["metric"]] = s
    for r in reports:
        r["scores"] = by_report.get(r["report_id"], {})
    return reports


def _report(conn: sa.Connection, report_id: int) -> dict | None:
    rows = _rows(conn, """
        SELECT rp.report_id, rp.release_id, rp.system_id, rp.arxiv_id, rp.status, rp.error, rp.text,
               rp.system_version, rp.search_backend, rp.search_cutoff, rp.n_citations, rp.created_at,
               rp.quality_flags, rp.n_unresolved_citations, rp.n_leaked_retrieved,
               q.title AS query_title, s.kind AS system_kind
        FROM deepscholar.reports rp
        LEFT JOIN deepscholar.release_queries q ON q.release_id = rp.release_id AND q.arxiv_id = rp.arxiv_id
        LEFT JOIN deepscholar.systems s ON s.system_id = rp.system_id
        WHERE rp.report_id = :id""", id=report_id)
    if not rows:
        return None
    report = rows[0]
    report["sources"] = _rows(conn, "SELECT * FROM deepscholar.report_sources WHERE report_id = :id "
                                    "ORDER BY source_idx", id=report_id)
    report["scores"] = _rows(conn, """
        SELECT metric, judge_config, variant, metric_version, value, unscored_reason, n_items, details
        FROM deepscholar.metric_scores WHERE report_id = :id""", id=report_id)
    report["judgments"] = _rows(conn, """
        SELECT metric, judge_config, item_key, metric_version, label, unscored_reason, explanation, n_calls
        FROM deepscholar.judgments WHERE report_id = :id""", id=report_id)
    return report


# --- plain values -> what a page shows ---------------------------------------------------------------

def _finite(value: Any) -> float | None:
    if value is None:
        return None
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def format_value(value: Any, decimals: int = DECIMALS) -> str:
    """A metric as the page shows it: fixed decimals; missing (all queries unscored) as an em dash."""
    from deepscholar.evaluation.leaderboard import format_score

    return format_score(_finite(value), decimals, missing="—")


def _metric_order_key(metric: str) -> tuple[int, str]:
    return (METRIC_ORDER.index(metric) if metric in METRIC_ORDER else len(METRIC_ORDER), metric)


def _natural_key(text: str) -> list:
    """'s2:c10' after 's2:c9': item keys read in the order a person expects."""
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", text or "")]


def _sort_board(rows: Iterable[Mapping]) -> list[dict]:
    def key(r: Mapping) -> tuple:
        gm = _finite(r.get("geometric_mean"))
        return (r.get("rank") is None, r.get("rank") or 0, -(gm if gm is not None else -1.0), r["system_id"])
    return sorted((dict(r) for r in rows), key=key)


def _pick(options: Sequence[str], wanted: str | None) -> str | None:
    """The requested option when it exists, else the first (sorted) one; None when there are none."""
    if wanted is not None:
        return wanted if wanted in options else None
    return options[0] if options else None


@dataclass
class Board:
    """One leaderboard: a release, a judge config and its rows with their per-metric cells."""

    release_id: str | None
    judge_config: str | None
    judge_configs: list[str]
    rows: list[dict]
    cells: dict[tuple[str, str], dict] = field(default_factory=dict)
    latest: bool = True


class NotFound(Exception):
    pass


def load_board(conn: sa.Connection, judge_config: str | None = None, release_id: str | None = None) -> Board:
    """The latest release's leaderboard (leaderboard_latest view) or a given release's, for one judge config."""
    rows = _release_rows(conn, release_id) if release_id is not None else _latest_rows(conn)
    if release_id is not None and not rows:
        raise NotFound(f"no leaderboard for release {release_id!r}")
    configs = sorted({r["judge_config"] for r in rows})
    chosen = _pick(configs, judge_config)
    if judge_config is not None and chosen is None:
        raise NotFound(f"no leaderboard for judge config {judge_config!r}; available: {', '.join(configs) or 'none'}")
    if chosen is None:
        return Board(None, None, [], [], latest=release_id is None)
    rows = [r for r in rows if r["judge_config"] == chosen]
    release = rows[0]["release_id"]
    return Board(release, chosen, configs, _sort_board(rows), _metric_cells(conn, release, chosen),
                 latest=release_id is None)


def board_json(board: Board) -> dict:
    out_rows = []
    for r in board.rows:
        metrics = {}
        for m in METRIC_ORDER:
            cell = board.cells.get((r["system_id"], m), {})
            metrics[m] = {
                "mean": _finite(r.get(m)),
                "variant": cell.get("variant", HEADLINE_VARIANT[m]),
                **{k: _json_value(cell.get(k)) for k in
                   ("n", "n_unscored", "ci_low", "ci_high", "is_best", "significant", "p_value")},
            }
        out_rows.append({
            "rank": r.get("rank"),
            "system_id": r["system_id"],
            "n_queries": r.get("n_queries"),
            "n_reports": r.get("n_reports"),
            "n_failed": r.get("n_failed"),
            "geometric_mean": _finite(r.get("geometric_mean")),
            "geometric_mean_ci_low": _finite(r.get("geometric_mean_ci_low")),
            "geometric_mean_ci_high": _finite(r.get("geometric_mean_ci_high")),
            "metrics": metrics,
            "metric_versions": r.get("metric_versions"),
            "computed_at": _json_value(r.get("computed_at")),
        })
    return {"release_id": board.release_id, "judge_config": board.judge_config,
            "judge_configs": board.judge_configs, "rows": out_rows}


def _json_value(value: Any) -> Any:
    if isinstance(value, float):
        return _finite(value)
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return value


# --- HTML building blocks ----------------------------------------------------------------------------

def e(value: Any) -> str:
    """Escape anything for HTML text or a quoted attribute."""
    return html.escape("" if value is None else str(value), quote=True)


def _qs(**params: Any) -> str:
    clean = {k: v for k, v in params.items() if v is not None}
    return ("?" + urlencode(clean)) if clean else ""


def _safe_href(url: str | None) -> str | None:
    """Only web links from untrusted data become links (no javascript:, data:, ...)."""
    if not url:
        return None
    try:
        scheme = urlsplit(url.strip()).scheme.lower()
    except ValueError:
        return None
    return url.strip() if scheme in ("http", "https") else None


_STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:1.5rem;color:#1b1b1b;
     background:#fff;line-height:1.4}
nav.top a{margin-right:1rem}
h1{font-size:1.4rem;margin:.5rem 0}
h2{font-size:1.15rem;margin-top:1.6rem}
h3{font-size:1rem;margin-top:1.2rem}
table{border-collapse:collapse;margin:.6rem 0;font-size:.92rem}
th,td{border:1px solid #d0d4d9;padding:.3rem .5rem;vertical-align:top}
th{background:#f2f4f7}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.best{font-weight:700}
.mark{color:#b00020;font-weight:700}
.unscored{display:block;font-size:.75rem;color:#8a5a00;font-weight:400}
.ci{display:block;font-size:.75rem;color:#555;font-weight:400}
.muted{color:#666;font-size:.85rem}
.selector a{margin-right:.6rem;padding:.1rem .4rem;border:1px solid #c5cbd3;border-radius:4px;
            text-decoration:none}
.selector a[aria-current]{background:#0072B2;color:#fff;border-color:#0072B2}
.report-text{white-space:pre-wrap;border:1px solid #d0d4d9;padding:.8rem;background:#fafbfc;max-width:60rem}
code.label{white-space:pre-wrap;word-break:break-word;font-size:.8rem}
ul.legend{list-style:none;padding:0;display:flex;flex-wrap:wrap;gap:1rem}
ul.legend span.swatch{display:inline-block;width:.8rem;height:.8rem;margin-right:.3rem;vertical-align:middle}
svg.chart text{font-size:11px;fill:#333}
.error{color:#b00020}
td.month,table.history th{white-space:nowrap}
"""


def _page(title: str, body: str, base: str, status_code: int = 200) -> HTMLResponse:
    nav = (f'<nav class="top"><a href="{e(base)}/">Leaderboard</a><a href="{e(base)}/history">History</a>'
           f'<a href="{e(base)}/api/leaderboard">JSON</a></nav>')
    doc = (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
           f'<meta name="viewport" content="width=device-width, initial-scale=1">'
           f"<title>{e(title)} · DeepScholar</title><style>{_STYLE}</style></head>"
           f"<body>{nav}<main>{body}</main></body></html>")
    return HTMLResponse(doc, status_code=status_code)


def _selector(label: str, options: Sequence[str], current: str | None, href: Callable[[str], str],
              attr: str) -> str:
    if len(options) < 2:
        return f'<p class="muted">{e(label)}: <span data-{attr}="{e(current)}">{e(current)}</span></p>'
    current_attr = ' aria-current="true"'
    links = "".join(
        f'<a href="{e(href(o))}" data-{attr}="{e(o)}"{current_attr if o == current else ""}>{e(o)}</a>'
        for o in options)
    return f'<p class="selector" data-selector="{attr}">{e(label)}: {links}</p>'


def svg_line_chart(x_labels: Sequence[str], series: Sequence[tuple[str, Sequence[float | None]]], *,
                   title: str, chart_id: str, width: int = 720, height: int = 280) -> str:
    """A server-rendered line chart on a fixed 0–1 axis (every metric and the geometric mean live there).

    Each point is a <circle> with data-series, data-x and data-value so a test can count and read them;
    a missing value leaves a gap rather than a misleading zero.
    """
    left, right, top, bottom = 48, 32, 16, 30
    pw, ph = width - left - right, height - top - bottom
    n = len(x_labels)

    def x(i: int) -> float:
        return left + (pw / 2 if n == 1 else i * pw / (n - 1))

    def y(v: float) -> float:
        return top + ph * (1 - min(max(v, 0.0), 1.0))

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" data-chart="{e(chart_id)}" role="img" '
           f'aria-label="{e(title)}" viewBox="0 0 {width} {height}" width="{width}" height="{height}">',
           f"<title>{e(title)}</title>"]
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        ty = y(tick)
        out.append(f'<line x1="{left}" x2="{width - right}" y1="{ty:.1f}" y2="{ty:.1f}" stroke="#e3e6ea"/>'
                   f'<text x="{left - 6}" y="{ty + 4:.1f}" text-anchor="end">{tick:.2f}</text>')
    out.append(f'<line x1="{left}" x2="{left}" y1="{top}" y2="{top + ph}" stroke="#888"/>'
               f'<line x1="{left}" x2="{width - right}" y1="{top + ph}" y2="{top + ph}" stroke="#888"/>')
    step = max(1, math.ceil(n / 12))  # at most ~12 month labels, so they never overlap
    for i, label in enumerate(x_labels):
        if i % step and i != n - 1:
            continue
        out.append(f'<text class="x-label" x="{x(i):.1f}" y="{top + ph + 18}" text-anchor="middle">{e(label)}</text>')
    for k, (name, values) in enumerate(series):
        color = PALETTE[k % len(PALETTE)]
        points = [(i, v) for i, v in enumerate(_finite(v) for v in values) if v is not None]
        if len(points) > 1:
            coords = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in points)
            out.append(f'<polyline data-series="{e(name)}" fill="none" stroke="{color}" stroke-width="2" '
                       f'points="{coords}"/>')
        for i, v in points:
            out.append(f'<circle class="point" data-series="{e(name)}" data-x="{e(x_labels[i])}" '
                       f'data-value="{v!r}" cx="{x(i):.1f}" cy="{y(v):.1f}" r="4" fill="{color}">'
                       f"<title>{e(name)} · {e(x_labels[i])}: {format_value(v)}</title></circle>")
    out.append("</svg>")
    if len(series) < 2:
        return "".join(out)
    legend = "".join(f'<li><span class="swatch" style="background:{PALETTE[k % len(PALETTE)]}"></span>{e(name)}</li>'
                     for k, (name, _) in enumerate(series))
    return "".join(out) + f'<ul class="legend" data-legend="{e(chart_id)}">{legend}</ul>'


def _metric_cell(system_id: str, metric: str, mean: Any, cell: Mapping) -> str:
    n_unscored = cell.get("n_unscored") or 0
    classes = ["num"] + (["best"] if cell.get("is_best") else [])
    mark = f'<span class="mark" title="significant">{SIGNIFICANCE_MARK}</span>' if cell.get("significant") else ""
    ci = ""
    if _finite(cell.get("ci_low")) is not None and _finite(cell.get("ci_high")) is not None:
        ci = f"95% CI [{format_value(cell['ci_low'])}, {format_value(cell['ci_high'])}]"
    p = _finite(cell.get("p_value"))
    tip = "; ".join(t for t in (
        f"variant {cell.get('variant') or HEADLINE_VARIANT.get(metric, '')}",
        f"n={cell['n']}" if cell.get("n") is not None else "",
        ci, f"p={p:.3g} vs {cell.get('runner_up') or 'the runner-up'}" if p is not None else "") if t)
    unscored = f'<span class="unscored">{int(n_unscored)} unscored</span>' if n_unscored else ""
    mean_f = _finite(mean)
    return (f'<td class="{" ".join(classes)}" data-system="{e(system_id)}" data-metric="{e(metric)}" '
            f'data-value="{"" if mean_f is None else repr(mean_f)}" data-n-unscored="{int(n_unscored)}" '
            f'data-best="{str(bool(cell.get("is_best"))).lower()}" '
            f'data-significant="{str(bool(cell.get("significant"))).lower()}" title="{e(tip)}">'
            f'<span class="value">{format_value(mean)}</span>{mark}{unscored}</td>')


def render_board(board: Board, base: str) -> str:
    if board.release_id is None:
        return ("<h1>DeepScholar leaderboard</h1><p data-empty=\"true\">No leaderboard has been computed yet. "
                "It appears once a month's reports are judged and rolled up.</p>")
    heading = "Latest leaderboard" if board.latest else "Leaderboard"
    parts = [f'<h1>{heading}: <span data-release="{e(board.release_id)}">{e(board.release_id)}</span></h1>',
             _selector("Judge", board.judge_configs, board.judge_config,
                       lambda j: f"{base}/{_qs(release=None if board.latest else board.release_id, judge_config=j)}",
                       "judge-config")]
    dims = "".join(f'<th colspan="{len(ms)}" data-dimension="{e(d)}">{e(DIMENSION_LABELS.get(d, d))}</th>'
                   for d, ms in DIMENSIONS.items())
    metric_heads = "".join(f'<th data-metric="{e(m)}">{e(METRIC_LABELS.get(m, m))}</th>' for m in METRIC_ORDER)
    head = (f'<thead><tr><th rowspan="2">Rank</th><th rowspan="2">System</th>{dims}'
            f'<th rowspan="2">Geometric mean</th><th rowspan="2">Reports / queries</th><th rowspan="2">Failed</th></tr>'
            f"<tr>{metric_heads}</tr></thead>")
    body = []
    for r in board.rows:
        sid = r["system_id"]
        link = f"{base}/system/{quote(sid, safe='')}{_qs(judge_config=board.judge_config, release=board.release_id)}"
        cells = "".join(_metric_cell(sid, m, r.get(m), board.cells.get((sid, m), {})) for m in METRIC_ORDER)
        gm = _finite(r.get("geometric_mean"))
        gm_ci = ""
        if _finite(r.get("geometric_mean_ci_low")) is not None and _finite(r.get("geometric_mean_ci_high")) is not None:
            gm_ci = (f'<span class="ci">[{format_value(r["geometric_mean_ci_low"])}, '
                     f'{format_value(r["geometric_mean_ci_high"])}]</span>')
        body.append(
            f'<tr data-system="{e(sid)}" data-rank="{e(r.get("rank"))}">'
            f'<td class="num" data-system="{e(sid)}" data-metric="rank">{e(r.get("rank") if r.get("rank") is not None else "—")}</td>'
            f'<td data-system="{e(sid)}" data-metric="system_id"><a href="{e(link)}">{e(sid)}</a></td>{cells}'
            f'<td class="num" data-system="{e(sid)}" data-metric="geometric_mean" '
            f'data-value="{"" if gm is None else repr(gm)}"><span class="value">{format_value(gm)}</span>{gm_ci}</td>'
            f'<td class="num" data-system="{e(sid)}" data-metric="n_reports">'
            f'{e(r.get("n_reports"))} / {e(r.get("n_queries"))}</td>'
            f'<td class="num" data-system="{e(sid)}" data-metric="n_failed">{e(r.get("n_failed"))}</td></tr>')
    parts.append(f'<table class="leaderboard" data-release="{e(board.release_id)}" '
                 f'data-judge-config="{e(board.judge_config)}">{head}<tbody>{"".join(body)}</tbody></table>')
    parts.append(
        f'<p class="muted">Means over the month\'s queries of each metric\'s headline variant, {DECIMALS} decimals. '
        f"<b>Bold</b>: best system on that metric; <span class=\"mark\">{SIGNIFICANCE_MARK}</span>: better than the "
        "runner-up by a paired two-tailed t-test over queries, p &lt; 0.05. Unscored queries (the judge could not "
        "answer) are left out of a mean and counted under it. The geometric mean of the seven means is 0 when "
        "any mean is 0. Hover a cell for its n, 95% bootstrap interval and p-value.</p>")
    versions: dict[str, set[str]] = {}
    for r in board.rows:
        mv = r.get("metric_versions")
        if isinstance(mv, str):
            try:
                mv = json.loads(mv)
            except ValueError:
                mv = None
        for m, v in (mv or {}).items() if isinstance(mv, Mapping) else ():
            versions.setdefault(m, set()).add(json.dumps(v) if not isinstance(v, str) else v)
    computed = max((r["computed_at"] for r in board.rows if r.get("computed_at") is not None), default=None)
    prov = "".join(f"<li><code>{e(m)}</code>: {e(', '.join(sorted(vs)))}</li>"
                   for m, vs in sorted(versions.items(), key=lambda kv: _metric_order_key(kv[0])))
    parts.append(f'<details class="provenance"><summary>Provenance</summary><p>Judge config '
                 f"<code>{e(board.judge_config)}</code>; computed at {e(computed)}.</p>"
                 f"<ul>{prov}</ul></details>")
    return "".join(parts)


def _months(rows: Sequence[Mapping]) -> list[str]:
    return list(dict.fromkeys(r["release_id"] for r in rows))


def render_history(rows: Sequence[Mapping], judge_config: str | None, configs: Sequence[str], base: str) -> str:
    parts = ["<h1>History across months</h1>",
             _selector("Judge", configs, judge_config, lambda j: f"{base}/history{_qs(judge_config=j)}",
                       "judge-config")]
    if not rows:
        return "".join(parts) + '<p data-empty="true">No leaderboard has been computed yet.</p>'
    months = _months(rows)
    systems = sorted({r["system_id"] for r in rows})
    value = {(r["system_id"], r["release_id"]): r.get("geometric_mean") for r in rows}
    series = [(s, [value.get((s, m)) for m in months]) for s in systems]
    parts.append("<h2>Geometric mean of the seven metrics</h2>")
    parts.append(svg_line_chart(months, series, title="Geometric mean by month", chart_id="history"))
    head = "".join(f'<th><a href="{e(base)}/{e(_qs(release=m, judge_config=judge_config))}">{e(m)}</a></th>'
                   for m in months)
    body = []
    for s in systems:
        link = f"{base}/system/{quote(s, safe='')}{_qs(judge_config=judge_config)}"
        tds = "".join(f'<td class="num" data-system="{e(s)}" data-release="{e(m)}" data-metric="geometric_mean">'
                      f"{format_value(value.get((s, m)))}</td>" for m in months)
        body.append(f'<tr data-system="{e(s)}"><td><a href="{e(link)}">{e(s)}</a></td>{tds}</tr>')
    parts.append(f'<table class="history"><thead><tr><th>System</th>{head}</tr></thead>'
                 f'<tbody>{"".join(body)}</tbody></table>')
    return "".join(parts)


def render_system(system: Mapping | None, system_id: str, rows: Sequence[Mapping], judge_config: str | None,
                  configs: Sequence[str], release_id: str | None, reports: Sequence[Mapping], base: str) -> str:
    kind = f' <span class="muted">({e(system["kind"])}, version {e(system["version"])})</span>' if system else ""
    parts = [f'<h1>System <span data-system="{e(system_id)}">{e(system_id)}</span>{kind}</h1>',
             _selector("Judge", configs, judge_config,
                       lambda j: f"{base}/system/{quote(system_id, safe='')}{_qs(judge_config=j)}", "judge-config")]
    if not rows:
        parts.append('<p data-empty="true">No leaderboard rows for this system yet.</p>')
    else:
        months = _months(rows)
        by_month = {r["release_id"]: r for r in rows}
        parts.append("<h2>Geometric mean by month</h2>")
        parts.append(svg_line_chart(months, [("geometric_mean", [by_month[m].get("geometric_mean") for m in months])],
                                    title=f"{system_id}: geometric mean by month", chart_id="system-history"))
        parts.append("<h2>Each metric by month</h2>")
        parts.append(svg_line_chart(
            months, [(METRIC_LABELS[m], [by_month[mo].get(m) for mo in months]) for m in METRIC_ORDER],
            title=f"{system_id}: metrics by month", chart_id="system-metrics"))
        head = "".join(f'<th data-metric="{e(m)}">{e(METRIC_LABELS[m])}</th>' for m in METRIC_ORDER)
        body = []
        for m in months:
            r = by_month[m]
            link = f"{base}/{_qs(release=m, judge_config=judge_config)}"
            tds = "".join(f'<td class="num" data-release="{e(m)}" data-metric="{e(k)}">{format_value(r.get(k))}</td>'
                          for k in (*METRIC_ORDER, "geometric_mean"))
            body.append(f'<tr data-release="{e(m)}"><td class="month"><a href="{e(link)}">{e(m)}</a></td>{tds}'
                        f'<td class="num" data-release="{e(m)}" data-metric="rank">{e(r.get("rank"))}</td>'
                        f'<td class="num" data-release="{e(m)}" data-metric="n_reports">{e(r.get("n_reports"))}</td>'
                        f"</tr>")
        parts.append(f'<table class="system-history"><thead><tr><th>Month</th>{head}<th>Geometric mean</th>'
                     f'<th>Rank</th><th>Reports</th></tr></thead><tbody>{"".join(body)}</tbody></table>')
    if release_id is not None:
        months = _months(rows)
        parts.append(f'<h2>Reports of {e(release_id)}</h2>')
        if len(months) > 1:
            parts.append(_selector("Month", months, release_id, lambda m: (
                f"{base}/system/{quote(system_id, safe='')}{_qs(judge_config=judge_config, release=m)}"), "release"))
        parts.append(_render_report_list(reports, base, judge_config))
    return "".join(parts)


def _render_report_list(reports: Sequence[Mapping], base: str, judge_config: str | None) -> str:
    if not reports:
        return '<p class="muted">No reports stored for this month.</p>'
    head = "".join(f'<th data-metric="{e(m)}">{e(METRIC_LABELS[m])}</th>' for m in METRIC_ORDER)
    body = []
    for r in reports:
        link = f"{base}/report/{r['report_id']}{_qs(judge_config=judge_config)}"
        tds = []
        for m in METRIC_ORDER:
            s = r["scores"].get(m)
            if s is None:
                tds.append(f'<td class="num muted" data-metric="{e(m)}">—</td>')
            elif s["value"] is None:
                tds.append(f'<td class="num" data-metric="{e(m)}" title="{e(s["unscored_reason"])}">'
                           f'<span class="unscored">unscored</span></td>')
            else:
                tds.append(f'<td class="num" data-metric="{e(m)}" data-value="{s["value"]!r}">'
                           f"{format_value(s['value'])}</td>")
        status = e(r["status"]) + (f' <span class="muted">{e(r["error"])}</span>' if r.get("error") else "")
        body.append(f'<tr data-report-id="{r["report_id"]}"><td><a href="{e(link)}">{e(r["arxiv_id"])}</a></td>'
                    f'<td>{e(r.get("query_title"))}</td><td>{status}</td>{"".join(tds)}</tr>')
    return (f'<table class="reports"><thead><tr><th>Query</th><th>Title</th><th>Status</th>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table>')


_CITATION = re.compile(r"\[(\d+)\]")


def _report_text_html(text: str | None) -> str:
    """Escaped report text, with [n] linked to source n (applied after escaping; digits only)."""
    escaped = e(text or "")
    return _CITATION.sub(lambda m: f'<a href="#source-{m.group(1)}">[{m.group(1)}]</a>', escaped)


def _json_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def render_report(report: Mapping, judge_config: str | None, base: str) -> str:
    rid = report["report_id"]
    system_link = f"{base}/system/{quote(report['system_id'], safe='')}{_qs(release=report['release_id'])}"
    # What the importer found wrong with the report (reports.quality_flags); shown, never hidden.
    flags_html = " ".join(f'<span class="quality-flag">{e(f)}</span>' for f in report.get("quality_flags") or [])
    parts = [f'<h1>Report <span data-report-id="{rid}">{rid}</span></h1>',
             "<table class=\"report-meta\"><tbody>"
             f'<tr><th>System</th><td data-field="system_id"><a href="{e(system_link)}">{e(report["system_id"])}</a>'
             f' <span class="muted">{e(report.get("system_kind"))}</span></td></tr>'
             f'<tr><th>Month</th><td data-field="release_id">{e(report["release_id"])}</td></tr>'
             f'<tr><th>Query paper</th><td data-field="arxiv_id">{e(report["arxiv_id"])} — '
             f'{e(report.get("query_title"))}</td></tr>'
             f'<tr><th>Status</th><td data-field="status">{e(report["status"])}'
             f'{" — " + e(report["error"]) if report.get("error") else ""}</td></tr>'
             + (f'<tr><th>Search</th><td>{e(report["search_backend"])}, cutoff {e(report.get("search_cutoff"))}'
                "</td></tr>" if report.get("search_backend") else "")
             + (f'<tr><th>Quality flags</th><td data-field="quality_flags">{flags_html}'
                f' <span class="muted">{e(report.get("n_unresolved_citations"))} unresolved citations, '
                f'{e(report.get("n_leaked_retrieved"))} leaked retrieved-only sources</span></td></tr>'
                if report.get("quality_flags") else "")
             + "</tbody></table>"]
    configs = sorted({s["judge_config"] for s in report["scores"]} | {j["judge_config"] for j in report["judgments"]})
    if len(configs) > 1:
        parts.append(_selector("Judge", ["all", *configs], judge_config or "all",
                               lambda j: f"{base}/report/{rid}{_qs(judge_config=None if j == 'all' else j)}",
                               "judge-config"))
    scores = [s for s in report["scores"] if judge_config is None or s["judge_config"] == judge_config]
    judgments = [j for j in report["judgments"] if judge_config is None or j["judge_config"] == judge_config]
    if judge_config is not None and judge_config not in configs:
        parts.append(f'<p class="muted" data-judge-missing="true">Not found: no scores or judgments of this report '
                     f"under judge config <code>{e(judge_config)}</code>.</p>")

    parts.append("<h2>Scores</h2>")
    if scores:
        scores.sort(key=lambda s: (_metric_order_key(s["metric"]), s["judge_config"],
                                   s["variant"] != HEADLINE_VARIANT.get(s["metric"]), _natural_key(s["variant"])))
        rows = []
        for s in scores:
            headline = HEADLINE_VARIANT.get(s["metric"]) == s["variant"]
            value = (f'<span class="value">{format_value(s["value"])}</span>' if s["value"] is not None
                     else '<span class="unscored">unscored</span>')
            details = _json_text(s.get("details")) if s.get("details") else ""
            rows.append(
                f'<tr data-metric="{e(s["metric"])}" data-variant="{e(s["variant"])}" '
                f'data-judge-config="{e(s["judge_config"])}" data-headline="{str(headline).lower()}">'
                f'<td>{e(METRIC_LABELS.get(s["metric"], s["metric"]))}</td>'
                f'<td>{e(s["variant"])}{" (headline)" if headline else ""}</td>'
                f'<td class="num" data-value="{"" if s["value"] is None else repr(float(s["value"]))}">{value}</td>'
                f'<td>{e(s.get("unscored_reason"))}</td><td>{e(s.get("n_items"))}</td>'
                f'<td><code>{e(s["judge_config"])}</code></td><td><code>{e(s["metric_version"])}</code></td>'
                f'<td><code class="label">{e(details)}</code></td></tr>')
        parts.append('<table class="scores"><thead><tr><th>Metric</th><th>Variant</th><th>Score</th>'
                     "<th>Unscored reason</th><th>Items</th><th>Judge</th><th>Version</th><th>Details</th>"
                     f'</tr></thead><tbody>{"".join(rows)}</tbody></table>')
    else:
        parts.append('<p class="muted">Not scored yet.</p>')

    parts.append("<h2>Report</h2>")
    parts.append(f'<div class="report-text" data-report-text="{rid}">{_report_text_html(report.get("text"))}</div>')

    parts.append("<h2>Sources</h2>")
    if report["sources"]:
        rows = []
        for s in report["sources"]:
            href = _safe_href(s.get("url"))
            title = e(s.get("title") or s.get("url") or "")
            title_html = f'<a href="{e(href)}" rel="noopener noreferrer">{title}</a>' if href else title
            rows.append(
                f'<tr id="source-{s["source_idx"]}" data-source-idx="{s["source_idx"]}">'
                f'<td class="num">[{s["source_idx"]}]</td><td>{e(s.get("arxiv_id"))}</td><td>{title_html}</td>'
                f'<td>{e(s.get("published"))}</td><td>{"leaked" if s.get("leaked") else ""}'
                f'{"" if s.get("cited", True) else " (retrieved, not cited)"}</td>'
                f'<td class="muted">{e(s.get("snippet"))}</td></tr>')
        parts.append('<table class="sources"><thead><tr><th>#</th><th>arXiv</th><th>Title</th><th>Published</th>'
                     f'<th>Leak</th><th>Snippet the system saw</th></tr></thead><tbody>{"".join(rows)}</tbody></table>')
    else:
        parts.append('<p class="muted">No sources.</p>')

    parts.append("<h2>Judgments</h2>")
    if not judgments:
        parts.append('<p class="muted">No judgments stored (metrics computed without a judge store none).</p>')
    groups: dict[tuple[str, str], list[Mapping]] = {}
    for j in judgments:
        groups.setdefault((j["metric"], j["judge_config"]), []).append(j)
    for (metric, config), items in sorted(groups.items(), key=lambda kv: (_metric_order_key(kv[0][0]), kv[0][1])):
        items = sorted(items, key=lambda j: _natural_key(j["item_key"]))
        n_unscored = sum(1 for j in items if j.get("unscored_reason"))
        rows = "".join(
            f'<tr data-item-key="{e(j["item_key"])}" data-unscored="{str(bool(j.get("unscored_reason"))).lower()}">'
            f'<td><code>{e(j["item_key"])}</code></td>'
            f'<td data-field="label"><code class="label">{e(_json_text(j.get("label")))}</code></td>'
            f'<td data-field="unscored_reason">{e(j.get("unscored_reason"))}</td>'
            f'<td data-field="explanation">{e(j.get("explanation"))}</td><td class="num">{e(j.get("n_calls"))}</td>'
            f"</tr>" for j in items)
        parts.append(
            f'<section class="judgments" data-metric="{e(metric)}" data-judge-config="{e(config)}">'
            f'<h3>{e(METRIC_LABELS.get(metric, metric))} <span class="muted">· {e(config)} · '
            f'{len(items)} item{"" if len(items) == 1 else "s"}'
            f'{f", {n_unscored} unscored" if n_unscored else ""}</span></h3>'
            '<table><thead><tr><th>Item</th><th>Label</th><th>Unscored reason</th><th>Explanation</th>'
            f'<th>Calls</th></tr></thead><tbody>{rows}</tbody></table></section>')
    return "".join(parts)


# --- the app -----------------------------------------------------------------------------------------

_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")


def _has_control_characters(request: Request) -> bool:
    """No release, system, judge or report name holds one, and PostgreSQL refuses a NUL in a query
    parameter outright (psycopg2 raised before sending it: a 500 for `?release=%00`)."""
    return any(_CONTROL_RE.search(v) for v in (request.scope.get("path", ""), *request.query_params.values()))


def create_app(engine_factory: Callable[[], Engine] = db.get_engine) -> FastAPI:
    """The leaderboard app. The engine is made on the first request, so importing the Airflow plugin
    (done by every Airflow process) never opens a database connection."""
    app = FastAPI(title="DeepScholar leaderboard", docs_url=None, redoc_url=None)
    lock = threading.Lock()
    holder: dict[str, Engine] = {}

    def engine() -> Engine:
        with lock:
            if "engine" not in holder:
                holder["engine"] = engine_factory()
            return holder["engine"]

    def base_of(request: Request) -> str:
        # Mounted under a prefix (Airflow: /deepscholar) Starlette sets root_path; links must carry it.
        return (request.scope.get("root_path") or "").rstrip("/")

    @app.middleware("http")
    async def security_headers(request: Request, call_next):
        if _has_control_characters(request):
            message = "Malformed request: a parameter holds a control character."
            response: Response = (JSONResponse({"error": message}, status_code=400) if "/api/" in request.url.path
                                  else _page("Bad request", f'<h1>Bad request</h1><p class="error">{e(message)}</p>',
                                             base_of(request), 400))
        else:
            response = await call_next(request)
        response.headers.setdefault("Content-Security-Policy", CSP)
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("Referrer-Policy", "same-origin")
        return response

    @app.exception_handler(sa.exc.SQLAlchemyError)
    async def database_error(request: Request, exc: sa.exc.SQLAlchemyError):
        log.exception("leaderboard page: database error", exc_info=exc)
        missing = isinstance(exc, sa.exc.ProgrammingError) and "does not exist" in str(exc)
        message = ("The leaderboard tables do not exist yet: run `deepscholar db init`." if missing
                   else "The benchmark database could not be read; see the server log.")
        if "/api/" in request.url.path:
            return JSONResponse({"error": message}, status_code=503)
        return _page("Unavailable", f'<h1>Unavailable</h1><p class="error">{e(message)}</p>', base_of(request), 503)

    @app.exception_handler(NotFound)
    async def not_found(request: Request, exc: NotFound):
        if "/api/" in request.url.path:
            return JSONResponse({"error": str(exc)}, status_code=404)
        return _page("Not found", f'<h1>Not found</h1><p class="error">{e(exc)}</p>', base_of(request), 404)

    @app.get("/", response_class=HTMLResponse)
    def leaderboard(request: Request, judge_config: str | None = None, release: str | None = None):
        with engine().connect() as conn:
            board = load_board(conn, judge_config, release)
        return _page(f"Leaderboard {board.release_id or ''}".strip(), render_board(board, base_of(request)),
                     base_of(request))

    @app.get("/api/leaderboard")
    def leaderboard_api(judge_config: str | None = None, release: str | None = None) -> JSONResponse:
        with engine().connect() as conn:
            board = load_board(conn, judge_config, release)
        return JSONResponse(board_json(board))

    @app.get("/api/history")
    def history_api(judge_config: str | None = None, system_id: str | None = None) -> JSONResponse:
        with engine().connect() as conn:
            rows = _history_rows(conn, judge_config, system_id)
        return JSONResponse({"rows": [{k: _json_value(v) for k, v in r.items()} for r in rows]})

    @app.get("/history", response_class=HTMLResponse)
    def history(request: Request, judge_config: str | None = None):
        with engine().connect() as conn:
            configs = _history_judge_configs(conn)
            chosen = _pick(configs, judge_config)
            if judge_config is not None and chosen is None:
                raise NotFound(f"no history for judge config {judge_config!r}")
            rows = _history_rows(conn, chosen) if chosen else []
        return _page("History", render_history(rows, chosen, configs, base_of(request)), base_of(request))

    @app.get("/system/{system_id}", response_class=HTMLResponse)
    def system(request: Request, system_id: str, judge_config: str | None = None, release: str | None = None):
        with engine().connect() as conn:
            info = _system(conn, system_id)
            configs = _history_judge_configs(conn, system_id)
            if info is None and not configs:
                raise NotFound(f"no system {system_id!r}")
            chosen = _pick(configs, judge_config)
            if judge_config is not None and chosen is None:
                raise NotFound(f"no leaderboard rows for {system_id!r} with judge config {judge_config!r}")
            rows = _history_rows(conn, chosen, system_id) if chosen else []
            months = _months(rows)
            if release is not None and release not in months:
                raise NotFound(f"no leaderboard row for {system_id!r} in {release!r}")
            release_id = release or (months[-1] if months else None)
            reports = _system_reports(conn, system_id, release_id, chosen) if release_id and chosen else []
        return _page(f"System {system_id}", render_system(info, system_id, rows, chosen, configs, release_id,
                                                          reports, base_of(request)), base_of(request))

    @app.get("/report/{report_id}", response_class=HTMLResponse)
    def report(request: Request, report_id: int, judge_config: str | None = None):
        with engine().connect() as conn:
            data = _report(conn, report_id)
        if data is None:
            raise NotFound(f"no report {report_id}")
        return _page(f"Report {report_id}", render_report(data, judge_config, base_of(request)), base_of(request))

    return app
