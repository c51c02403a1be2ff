"""From stored rows to the page: the Jinja2 environment, value formatting, the SVG chart and page contexts.

Design notes: docs/MODULE_NOTES.md, `deepscholar.web.render`.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, overload
from urllib.parse import quote, urlencode, urlsplit

import jinja2
from markupsafe import Markup

from deepscholar.evaluation.judge_spec import is_local_config
from deepscholar.evaluation.metrics import registry
from deepscholar.llm.prices import usd_text
from deepscholar.web.queries import Board, TrackBoard, finite, metric_mean
from deepscholar.web.report_text import report_html

_LOG = logging.getLogger(__name__)

__all__ = ["ENV", "render", "format_value", "value_attr", "svg_line_chart", "safe_href", "qs", "path_segment",
           "metric_order_key", "headline_of", "natural_key", "months_of", "json_text", "board_context",
           "history_context", "system_context", "report_context", "trust_table", "DECIMALS", "SIGNIFICANCE_MARK",
           "PALETTE"]

# Shown after a metric mean whose best-system mark passed the paired t-test (METRICS.md, Roll-up).
SIGNIFICANCE_MARK = "*"
DECIMALS = 3
# Colour-blind-safe palette (Okabe–Ito) for chart series.
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442")


# --- plain values -> what a page shows ---------------------------------------------------------------

def format_value(value: Any, decimals: int = DECIMALS) -> str:
    """A metric as the page shows it: fixed decimals; missing (all queries unscored) as an em dash."""
    from deepscholar.evaluation.boards.leaderboard import format_score

    return format_score(finite(value), decimals, missing="—")


def value_attr(value: Any) -> str:
    """A number for a data-value attribute: full precision (repr), empty when missing."""
    f = finite(value)
    return "" if f is None else repr(f)


def qs(**params: Any) -> str:
    clean = {k: v for k, v in params.items() if v is not None}
    return ("?" + urlencode(clean)) if clean else ""


def path_segment(value: Any) -> str:
    return quote(str(value), safe="")


def safe_href(url: str | None) -> str | None:
    """Only web links from untrusted data become links (no javascript:, data:, ...)."""
    if not url:
        return None
    try:
        scheme = urlsplit(url.strip()).scheme.lower()
    except ValueError:
        return None
    return url.strip() if scheme in ("http", "https") else None


def metric_order_key(metric: str) -> tuple[int, str]:
    """Board order: the core's metrics, then each track's (an unregistered one last, by name)."""
    names = registry.metric_names()
    return (names.index(metric) if metric in names else len(names), metric)


def track_of(metric: str) -> str | None:
    """The label of the evaluation track a metric belongs to; None for a core (or unregistered) metric."""
    if metric not in registry.metric_names():
        return None
    family = registry.family_of(metric)
    return None if family == registry.CORE else registry.family_label(family)


def headline_of(metric: str) -> str | None:
    """The metric's headline variant; None for a metric the registry does not know (stored by an old run)."""
    return registry.headline_variant(metric) if metric in registry.metric_names() else None


def natural_key(text: str) -> list:
    """'s2:c10' after 's2:c9': item keys read in the order a person expects."""
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", text or "")]


def months_of(rows: Sequence[Mapping]) -> list[str]:
    return list(dict.fromkeys(r["release_id"] for r in rows))


def json_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _finalize(value: Any) -> Any:
    return "" if value is None else value


ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("deepscholar.web", "templates"),
    autoescape=jinja2.select_autoescape(enabled_extensions=("html", "svg"), default_for_string=True, default=True),
    finalize=_finalize,  # None shows as nothing, never as "None"
    trim_blocks=True,
    lstrip_blocks=True,
    undefined=jinja2.StrictUndefined,
)
ENV.filters.update(fmt=format_value, value_attr=value_attr, segment=path_segment, json_text=json_text,
                   tf=lambda v: "true" if v else "false")
# The app's navigation and no <meta> CSP (the app sends a header); the static site passes its own of both.
ENV.globals.update(qs=qs, metric_label=registry.metric_label, headline_of=headline_of, dimension_label=registry.dimension_label,
                   mark=SIGNIFICANCE_MARK, decimals=DECIMALS, csp=None,
                   nav=(("Leaderboard", "/"), ("History", "/history"), ("JSON", "/api/leaderboard"),
                        ("Register a system", "/systems/new")))


def render(template: str, **context: Any) -> str:
    return ENV.get_template(template).render(**context)


# --- the chart -----------------------------------------------------------------------------------------

def _chart_series(x_labels: Sequence[str], series: Sequence[tuple[str, Sequence[float | None]]], x, y) -> list[dict]:
    out = []
    for k, (name, values) in enumerate(series):
        points = [(i, v) for i, v in enumerate(finite(v) for v in values) if v is not None]
        out.append({
            "name": name, "color": PALETTE[k % len(PALETTE)],
            "coords": " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in points) if len(points) > 1 else None,
            "points": [{"x": x_labels[i], "value": repr(v), "shown": format_value(v),
                        "cx": f"{x(i):.1f}", "cy": f"{y(v):.1f}"} for i, v in points],
        })
    return out


def svg_line_chart(x_labels: Sequence[str], series: Sequence[tuple[str, Sequence[float | None]]], *,
                   title: str, chart_id: str, width: int = 720, height: int = 280) -> Markup:
    """A server-rendered line chart on a fixed 0–1 axis (every metric and the geometric mean live there).

    Each point is a <circle> with data-series, data-x and data-value so a test can count and read them;
    a missing value leaves a gap rather than a misleading zero. With two series or more, a legend follows.
    """
    left, right, top, bottom = 48, 32, 16, 30
    pw, ph = width - left - right, height - top - bottom
    n = len(x_labels)

    def x(i: int) -> float:
        return left + (pw / 2 if n == 1 else i * pw / (n - 1))

    def y(v: float) -> float:
        return top + ph * (1 - min(max(v, 0.0), 1.0))

    step = max(1, math.ceil(n / 12))  # at most ~12 month labels, so they never overlap
    return Markup(render(
        "_chart.html", title=title, chart_id=chart_id, width=width, height=height, left=left,
        right_x=width - right, top=top, axis_y=top + ph, label_y=top + ph + 18,
        ticks=[{"y": f"{y(t):.1f}", "text_y": f"{y(t) + 4:.1f}", "label": f"{t:.2f}"} for t in (0.0, .25, .5, .75, 1.0)],
        x_ticks=[{"x": f"{x(i):.1f}", "label": label} for i, label in enumerate(x_labels)
                 if not (i % step and i != n - 1)],
        series=_chart_series(x_labels, series, x, y)).strip())


# --- the board -----------------------------------------------------------------------------------------

def _metric_cell(metric: str, mean: Any, cell: Mapping) -> dict:
    n_unscored = int(cell.get("n_unscored") or 0)
    ci = ""
    if finite(cell.get("ci_low")) is not None and finite(cell.get("ci_high")) is not None:
        ci = f"95% CI [{format_value(cell['ci_low'])}, {format_value(cell['ci_high'])}]"
    p = finite(cell.get("p_value"))
    variant = cell.get("variant")  # the column's heading names the headline variant; a cell says another
    tip = "; ".join(t for t in (
        f"variant {variant}" if variant and variant != headline_of(metric) else "",
        f"n={cell['n']}" if cell.get("n") is not None else "",
        ci, f"p={p:.3g} vs {cell.get('runner_up') or 'the runner-up'}" if p is not None else "") if t)
    return {"metric": metric, "value": value_attr(mean),
            "shown": format_value(mean), "n_unscored": n_unscored, "best": bool(cell.get("is_best")),
            "significant": bool(cell.get("significant")), "tip": tip}


def _board_row(board: Board, r: Mapping, metrics: Sequence[str], base: str) -> dict:
    sid = r["system_id"]
    cells = [board.cells.get((sid, m), {}) for m in metrics]
    low, high = finite(r.get("geometric_mean_ci_low")), finite(r.get("geometric_mean_ci_high"))
    month = board.release_id if board.board_version is not None else None  # a pooled board is no month
    return {
        "system_id": sid, "rank": r.get("rank"), "n_reports": r.get("n_reports"), "n_queries": r.get("n_queries"),
        "n_failed": r.get("n_failed"),
        "link": f"{base}/system/{path_segment(sid)}{qs(judge_config=board.judge_config, release=month)}",
        "cells": [_metric_cell(m, metric_mean(r, c, m), c) for m, c in zip(metrics, cells, strict=True)],
        "gm": finite(r.get("geometric_mean")),
        "gm_ci": None if low is None or high is None else (format_value(low), format_value(high)),
        **_contamination_shown(r),
        "costs": None if board.costs is None else _costs_shown(board.costs.get(sid) or {}),
    }


def _costs_shown(c: Mapping) -> list[tuple[str, str, Any]]:
    """(metric attribute, text, value) of the cost cells: tokens and USD of generation / judging, latency."""
    from deepscholar.evaluation.boards.leaderboard import cost_cells

    texts = cost_cells(dict(c))
    return [("tokens", texts[0], None), ("cost_usd", texts[1], c.get("gen_cost_usd")),
            ("latency_s", texts[2], None if c.get("mean_latency_ms") is None else c["mean_latency_ms"] / 1000)]


def _contamination_shown(r: Mapping) -> dict:
    """What the page says of a row's knowledge cutoff (evaluation/boards/contamination.py)."""
    from deepscholar.evaluation.boards.contamination import LABELS

    mark = r.get("contamination")
    cutoff = r.get("knowledge_cutoff")
    return {"contamination": mark, "contamination_label": LABELS.get(mark or "", ""),
            "knowledge_cutoff": cutoff.isoformat() if cutoff is not None and hasattr(cutoff, "isoformat") else cutoff}


def _provenance(rows: Sequence[Mapping]) -> tuple[list[tuple[str, str]], Any]:
    versions: dict[str, set[str]] = {}
    for r in rows:
        mv = r.get("metric_versions")
        if isinstance(mv, str):
            try:
                mv = json.loads(mv)
            except ValueError:
                mv = None
        for m, v in (mv or {}).items() if isinstance(mv, Mapping) else ():
            versions.setdefault(m, set()).add(json.dumps(v) if not isinstance(v, str) else v)
    computed = max((r["computed_at"] for r in rows if r.get("computed_at") is not None), default=None)
    listed = [(m, ", ".join(sorted(vs))) for m, vs in sorted(versions.items(), key=lambda kv: metric_order_key(kv[0]))]
    return listed, computed


def _track_section(track: TrackBoard, base: str) -> dict:
    dimensions = registry.dimensions(track.family)
    metrics = [m for ms in dimensions.values() for m in ms]
    rows = []
    for r in track.rows:
        cells = [track.cells.get((r["system_id"], m), {}) for m in metrics]
        ranking = track.cells.get((r["system_id"], track.ranking_metric), {})
        low, high = finite(ranking.get("ci_low")), finite(ranking.get("ci_high"))
        rows.append({"system_id": r["system_id"], "rank": r["rank"], "n_reports": r["n_reports"],
                     "n_queries": r["n_queries"], "n_failed": r["n_failed"],
                     "link": f"{base}/system/{path_segment(r['system_id'])}",
                     "cells": [_metric_cell(m, c.get("mean"), c) for m, c in zip(metrics, cells, strict=True)],
                     "ci": None if low is None or high is None else (format_value(low), format_value(high)),
                     **_contamination_shown(r)})
    counts = [registry.metric_label(m) for m in metrics if not registry.is_bounded(m)]
    return {"family": track.family, "label": registry.family_label(track.family), "dimensions": dimensions,
            "metrics": metrics, "ranking_metric": track.ranking_metric,
            "ranking_label": registry.metric_label(track.ranking_metric), "rows": rows, "counts": counts,
            "published": _published_shown(track)}


def _published_shown(track: TrackBoard) -> dict | None:
    """The track's figures as its authors' released scorer aggregates them, kept with the board version."""
    from deepscholar.evaluation.boards.published import FIGURES

    figures = FIGURES.get(track.family, ())
    if not figures or not track.published:
        return None
    return {"figures": [{"name": f.name, "label": f.label, "how": f.how} for f in figures],
            "rows": [{"system_id": r["system_id"], "human_exemplar": r["human_exemplar"],
                      "figures": [(f.name, r.get(f.name)) for f in figures],
                      "versions": ", ".join(r["metric_versions"])} for r in track.published]}


def _agreement_rows(agreement: Sequence[Mapping]) -> list[dict]:
    from deepscholar.evaluation.boards.rank_agreement import movers_text, tau_text

    out = []
    for a in agreement:
        tau, p = finite(a.get("kendall_tau")), finite(a.get("p_value"))
        out.append({"family_a": a["family_a"], "family_b": a["family_b"],
                    "label_a": registry.family_label(a["family_a"]), "label_b": registry.family_label(a["family_b"]),
                    "n_systems": a["n_systems"], "tau": tau, "tau_shown": tau_text(tau),
                    "p_shown": "n/a" if p is None else f"{p:.3g}", "movers": movers_text(a.get("movers") or [])})
    return out


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.0f}%"


def _trust_row(r: Mapping) -> dict:
    ci = r.get("ci")
    return {"metric": r["metric"], "label": r["label"], "n_items": r["n_items"],
            "n_annotators": r["n_annotators"], "percent": r["percent_agreement"],
            "percent_shown": _pct(r["percent_agreement"]),
            "ci_shown": f"[{_pct(ci[0])}, {_pct(ci[1])}]" if ci else "",
            "kappa": r["cohen_kappa"],
            "kappa_shown": "n/a" if r["cohen_kappa"] is None else f"{r['cohen_kappa']:.2f}",
            "paper": r.get("paper_agreement"),
            "paper_shown": "—" if r.get("paper_agreement") is None else _pct(r["paper_agreement"])}


def trust_table(report: Sequence[Mapping]) -> list[dict]:
    """The judge-vs-humans table beside the board: ours (percent with CI, kappa, items) and the paper's.

    The entries are stored JSON (human_agreement_stats.report): one that is not what `store_agreement` writes
    (edited by hand, an older shape) is shown as unreadable in its row, with the command that rewrites it,
    and logged; the board and the other rows are still served."""
    out = []
    for r in report:
        try:
            out.append(_trust_row(r))
        except (AttributeError, KeyError, TypeError, IndexError, ValueError) as exc:
            metric = r.get("metric") if isinstance(r, Mapping) else None
            _LOG.warning("human_agreement_stats entry for %s is unreadable (%s: %s); rewrite it with "
                         "`deepscholar judges agreement`", metric or "an unnamed metric", type(exc).__name__, exc)
            name = str(metric) if metric else "?"
            out.append({"metric": name, "label": name, "n_items": "", "n_annotators": "", "percent": None,
                        "percent_shown": "unreadable stored entry: run `deepscholar judges agreement`",
                        "ci_shown": "", "kappa": None, "kappa_shown": "", "paper": None, "paper_shown": ""})
    return out


def board_context(board: Board, base: str, tracks: Sequence[TrackBoard] = (),
                  agreement: Sequence[Mapping] = (), trust: Sequence[Mapping] = ()) -> dict:
    dimensions = registry.dimensions(registry.CORE)
    metrics = [m for ms in dimensions.values() for m in ms]
    release = None if board.latest else board.release_id
    versions, computed = _provenance(board.rows)
    return {
        "board": board, "dimensions": dimensions, "metrics": metrics,
        "judge_links": [(j, f"{base}/{qs(release=release, judge_config=j)}") for j in board.judge_configs],
        "rows": [_board_row(board, r, metrics, base) for r in board.rows],
        "versions": versions, "computed_at": computed,
        "local_judge": board.judge_config is not None and is_local_config(board.judge_config),
        "tracks": [_track_section(t, base) for t in tracks],
        "agreement": _agreement_rows(agreement),
        "trust": trust_table(trust),
        "version": _version_shown(board.version_info),
        "n_versions": len(board.versions),
        "versions_link": f"{base}/versions{qs(release=board.release_id, judge_config=board.judge_config)}",
        "spend": _spend_shown(board.spend),
    }


def _usd(x: float | None) -> str:
    return usd_text(x, decimals=4, unknown="unknown (no price)")


def _spend_shown(spend: Mapping | None) -> dict | None:
    """The month's judging, predicted before the run against what it cost, per transport, as text."""
    if not spend:
        return None
    estimate = spend["estimate"]
    predicted = None
    if estimate is not None:
        total = estimate["predicted_month_usd"]
        predicted = {"run_id": estimate["run_id"], "transport": estimate["transport"],
                     "calls": f"{estimate['predicted_calls']:,.0f}", "usd": _usd(total),
                     "value": total, "at": estimate["estimated_at"].strftime("%Y-%m-%d %H:%M UTC")}
    return {"predicted": predicted, "actual": _usd(spend["actual_usd"]), "actual_value": spend["actual_usd"],
            "requests": f"{spend['actual_requests']:,}",
            "transports": [{"transport": t["transport"], "requests": f"{t['requests']:,}", "usd": _usd(t["cost_usd"])}
                           for t in spend["transports"]],
            "saving": None if not any(t["transport"] != "direct" for t in spend["transports"])
            else _usd(spend["batch_saving_usd"])}


@overload
def _version_shown(info: Mapping) -> dict: ...


@overload
def _version_shown(info: None) -> None: ...


def _version_shown(info: Mapping | None) -> dict | None:
    if info is None:
        return None
    published = info.get("published_at")
    return {**info, "published_shown": published.strftime("%Y-%m-%d %H:%M UTC") if published else None}


def window_context(months: Sequence[str], window_from: str | None, window_to: str | None, judge_config: str | None,
                   base: str, categories: Sequence, minimum: int, *, pooled: bool, static: bool = False,
                   standard: bool = True) -> dict:
    """The window selector (a form of two months; none on the static site, which cannot compute a board), the
    standard windows' links (`standard`: the page offers them) and the per-category boards under the board."""
    from deepscholar.evaluation.boards.selection import standard_windows

    return {
        "window": {"months": list(months), "from": window_from or (months[0] if months else None),
                   "to": window_to or (months[-1] if months else None), "pooled": pooled,
                   "judge_config": judge_config, "action": f"{base}/", "static": static,
                   "form": not static and len(months) > 1,
                   "latest_link": f"{base}/{qs(judge_config=judge_config)}",
                   "standard": [{"label": label, "from": start, "to": end,
                                 "link": f"{base}/{qs(judge_config=judge_config, **{'from': start, 'to': end})}",
                                 "current": pooled and (start, end) == (window_from, window_to)}
                                for label, start, end in (standard_windows(months) if judge_config and standard else [])]},
        "category_minimum": minimum,
        "categories": [{
            "category": c.category, "n_queries": c.n_queries,
            "rows": [{"system_id": r["system_id"], "rank": r["rank"], "overall_rank": r.get("overall_rank"),
                      "change": r.get("rank_change"), "gm": finite(r.get("geometric_mean")),
                      **_contamination_shown(r)} for r in c.rows],
        } for c in categories],
    }


def versions_context(release_id: str, judge_config: str, versions: Sequence[Mapping], base: str) -> dict:
    """Every version of one board: status, what changed, and what it was computed from."""
    return {"release_id": release_id, "judge_config": judge_config, "versions": [{
        **_version_shown(v),
        "link": f"{base}/{qs(release=release_id, judge_config=judge_config, version=v['board_version'])}",
        "builds": ", ".join(f"{s}: {' / '.join(b)}" for s, b in sorted((v.get("system_builds") or {}).items())),
        "metric_versions": ", ".join(f"{m} {x}" for m, x in sorted((v.get("metric_versions") or {}).items())),
        "manifest": (v.get("manifest_hash") or "")[:12] or "not sealed",
    } for v in versions]}


# --- history -------------------------------------------------------------------------------------------

def history_context(rows: Sequence[Mapping], judge_config: str | None, configs: Sequence[str], base: str) -> dict:
    months = months_of(rows)
    systems = sorted({r["system_id"] for r in rows})
    value = {(r["system_id"], r["release_id"]): r.get("geometric_mean") for r in rows}
    series = [(s, [value.get((s, m)) for m in months]) for s in systems]
    return {
        "judge_config": judge_config,
        "judge_links": [(j, f"{base}/history{qs(judge_config=j)}") for j in configs],
        "chart": svg_line_chart(months, series, title="Geometric mean by month", chart_id="history") if rows else "",
        "months": [(m, f"{base}/{qs(release=m, judge_config=judge_config)}") for m in months],
        "systems": [{"system_id": s, "link": f"{base}/system/{path_segment(s)}{qs(judge_config=judge_config)}",
                     "cells": [(m, value.get((s, m))) for m in months]} for s in systems],
        "n_metrics": len(registry.metric_names(registry.CORE)),
    }


# --- a system ------------------------------------------------------------------------------------------

def _system_charts(system_id: str, months: Sequence[str], by_month: Mapping[str, Mapping]) -> list[tuple[str, Markup]]:
    gm = [("geometric_mean", [by_month[m].get("geometric_mean") for m in months])]
    per_metric = [(registry.metric_label(m), [by_month[mo].get(m) for mo in months]) for m in registry.metric_names(registry.CORE)]
    return [
        ("Geometric mean by month", svg_line_chart(months, gm, title=f"{system_id}: geometric mean by month",
                                                   chart_id="system-history")),
        ("Each metric by month", svg_line_chart(months, per_metric, title=f"{system_id}: metrics by month",
                                                chart_id="system-metrics")),
    ]


def _report_list(reports: Sequence[Mapping], base: str, judge_config: str | None) -> list[dict]:
    out = []
    for r in reports:
        cells = []
        for m in registry.metric_names(registry.CORE):
            s = r["scores"].get(m)
            cells.append({"metric": m, "stored": s is not None, "value": None if s is None else s["value"],
                          "reason": None if s is None else s.get("unscored_reason")})
        out.append({"report_id": r["report_id"], "arxiv_id": r["arxiv_id"], "query_title": r.get("query_title"),
                    "status": r["status"], "error": r.get("error"), "cells": cells,
                    "link": f"{base}/report/{r['report_id']}{qs(judge_config=judge_config)}"})
    return out


def system_context(system: Mapping | None, system_id: str, rows: Sequence[Mapping], judge_config: str | None,
                   configs: Sequence[str], release_id: str | None, reports: Sequence[Mapping], base: str) -> dict:
    """A system's page: without a month, every month's scores and charts with links to each month's reports;
    with one (`release_id`), that month's reports only (the per-month pages stay small; see bench/site.py)."""
    months = months_of(rows)
    by_month = {r["release_id"]: r for r in rows}
    columns = (*registry.metric_names(registry.CORE), "geometric_mean")
    own = f"{base}/system/{path_segment(system_id)}"
    return {
        "system": system, "system_id": system_id, "release_id": release_id,
        "metrics": registry.metric_names(registry.CORE),
        "judge_config": judge_config,
        "judge_links": [(j, f"{own}{qs(judge_config=j)}") for j in configs],
        "charts": _system_charts(system_id, months, by_month) if rows and release_id is None else [],
        "history": [{"release": m, "link": f"{base}/{qs(release=m, judge_config=judge_config)}",
                     "cells": [(k, by_month[m].get(k)) for k in columns], "rank": by_month[m].get("rank"),
                     "n_reports": by_month[m].get("n_reports")} for m in months] if release_id is None else [],
        "month_links": [(m, f"{own}{qs(judge_config=judge_config, release=m)}") for m in months],
        "overview_link": f"{own}{qs(judge_config=judge_config)}",
        "reports": _report_list(reports, base, judge_config),
    }


# --- a report ------------------------------------------------------------------------------------------

def _report_scores(scores: Sequence[Mapping]) -> list[dict]:
    def key(s: Mapping) -> tuple:
        return (metric_order_key(s["metric"]), s["judge_config"], not s.get("is_current", True),
                s["variant"] != headline_of(s["metric"]), natural_key(s["variant"]), s["metric_version"])
    return [{**s, "headline": headline_of(s["metric"]) == s["variant"], "track": track_of(s["metric"]),
             "details_text": json_text(s.get("details")) if s.get("details") else ""}
            for s in sorted(scores, key=key)]


def _report_judgments(judgments: Sequence[Mapping]) -> list[dict]:
    """One group per (metric, judge, metric version): the current version's first, superseded ones after it."""
    groups: dict[tuple[str, str, bool, str], list[Mapping]] = {}
    for j in judgments:
        current = j.get("is_current", True)
        groups.setdefault((j["metric"], j["judge_config"], not current, "" if current else j["metric_version"]),
                          []).append(j)
    out = []
    for (metric, config, superseded, version), items in sorted(
            groups.items(), key=lambda kv: (metric_order_key(kv[0][0]), *kv[0][1:])):
        items = sorted(items, key=lambda j: natural_key(j["item_key"]))
        out.append({"metric": metric, "judge_config": config, "entries": items, "track": track_of(metric),
                    "superseded_version": version if superseded else None,
                    "n_unscored": sum(1 for j in items if j.get("unscored_reason"))})
    return out


def _report_sources(sources: Sequence[Mapping]) -> list[dict]:
    return [{"idx": s["source_idx"], "arxiv_id": s.get("arxiv_id"), "title": s.get("title") or s.get("url") or "",
             "href": safe_href(s.get("url")), "published": s.get("published"), "leaked": bool(s.get("leaked")),
             "cited": s.get("cited", True), "snippet": s.get("snippet")} for s in sources]


def report_context(report: Mapping, judge_config: str | None, base: str) -> dict:
    rid = report["report_id"]
    configs = sorted({s["judge_config"] for s in report["scores"]} | {j["judge_config"] for j in report["judgments"]})
    own = f"{base}/report/{rid}"
    return {
        "report": report,
        "system_link": f"{base}/system/{path_segment(report['system_id'])}{qs(release=report['release_id'])}",
        "judge_links": [(j, f"{own}{qs(judge_config=None if j == 'all' else j)}") for j in ("all", *configs)]
        if len(configs) > 1 else [],
        "judge_current": judge_config or "all",
        "judge_missing": judge_config is not None and judge_config not in configs,
        "judge_config": judge_config,
        "scores": _report_scores([s for s in report["scores"]
                                  if judge_config is None or s["judge_config"] == judge_config]),
        "judgments": _report_judgments([j for j in report["judgments"]
                                        if judge_config is None or j["judge_config"] == judge_config]),
        "sources": _report_sources(report["sources"]),
        "text_html": report_html(report.get("text")),
    }
