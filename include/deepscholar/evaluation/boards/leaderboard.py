"""Reading the stored leaderboard and printing it like the paper's Table 2.

Readers (CLI, web page, DAG) pick a board with `pick_board` (`load_leaderboard` does), so "the latest
board" means the same thing everywhere: the latest month with rows (deepscholar.leaderboard_releases orders them) and, when no judge
is named, that month's most complete board (most systems with all seven means; a partial trial run of
another judge on one metric must not hide the full board), then the largest, then the newest.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar.db import SQL_DIR
from deepscholar.evaluation.judge_spec import is_local_config
from deepscholar.evaluation.metrics import registry
from deepscholar.llm.prices import usd_text
from deepscholar.release.window import validate_release_id

__all__ = [
    "FORMATS",
    "NamedQuery",
    "pick_board",
    "load_leaderboard",
    "format_leaderboard",
    "analyst_queries",
]

FORMATS = ("table", "csv", "json", "markdown")
ANALYST_QUERIES = SQL_DIR / "queries" / "analyst_examples.sql"

SIGNIFICANT_MARK = "†"
UNSCORED_MARK = "*"
# A system that may have seen the month's papers (shown, not ranked); one whose model's cutoff is unknown.
MAY_HAVE_SEEN_MARK = "‡"
CUTOFF_UNKNOWN_MARK = "°"
_SYSTEM_MARKS = {"may_have_seen": MAY_HAVE_SEEN_MARK, "cutoff_unknown": CUTOFF_UNKNOWN_MARK}


# --------------------------------------------------------------------------------------------- reading

_PICK_SQL = """
    SELECT release_id, judge_config, board_version FROM leaderboard_releases
    WHERE (CAST(:r AS text) IS NULL OR release_id = :r) AND (CAST(:j AS text) IS NULL OR judge_config = :j)
    ORDER BY month DESC, release_id DESC, n_complete DESC, n_systems DESC, computed_at DESC, judge_config
    LIMIT 1"""

_ROWS_SQL = """
    SELECT l.*, s.kind AS system_kind
    FROM leaderboard_systems l JOIN systems s ON s.system_id = l.system_id
    WHERE l.release_id = :r AND l.judge_config = :j AND l.board_version = :v
    ORDER BY l.rank, l.system_id"""

_TRACK_PICK_SQL = """
    SELECT b.release_id, b.judge_config, b.board_version
    FROM track_boards b
    JOIN board_current c USING (release_id, judge_config, board_version)
    LEFT JOIN leaderboard_releases lr ON lr.release_id = b.release_id AND lr.judge_config = b.judge_config
    WHERE b.family = :f AND (CAST(:r AS text) IS NULL OR b.release_id = :r)
      AND (CAST(:j AS text) IS NULL OR b.judge_config = :j)
    GROUP BY b.release_id, b.judge_config, b.board_version, lr.month
    ORDER BY lr.month DESC NULLS LAST, b.release_id DESC, count(*) DESC, max(b.computed_at) DESC, b.judge_config
    LIMIT 1"""

_TRACK_ROWS_SQL = """
    SELECT b.*, s.kind AS system_kind
    FROM track_boards b JOIN systems s ON s.system_id = b.system_id
    WHERE b.release_id = :r AND b.judge_config = :j AND b.family = :f AND b.board_version = :v
    ORDER BY b.rank, b.system_id"""

_TRACK_METRICS_SQL = """
    SELECT system_id, metric, variant, metric_version, mean, n, n_unscored, ci_low, ci_high, is_best,
           significant, p_value, runner_up, n_pairs
    FROM track_board_metrics WHERE release_id = :r AND judge_config = :j AND family = :f AND board_version = :v
    ORDER BY system_id, metric_position"""

_METRICS_SQL = """
    SELECT system_id, metric, variant, metric_version, mean, n, n_unscored, ci_low, ci_high, is_best,
           significant, p_value, runner_up, n_pairs
    FROM leaderboard_metrics WHERE release_id = :r AND judge_config = :j AND board_version = :v
    ORDER BY system_id, metric_position"""


# Generation's and the judge's tokens, cost and latency per system, as of the board's roll-up (month_costs,
# the stored rows of the leaderboard_costs view: one index lookup, whatever the history).
COST_COLUMNS = ("gen_calls", "gen_prompt_tokens", "gen_completion_tokens", "gen_cost_usd", "mean_latency_ms",
                "judge_requests", "judge_prompt_tokens", "judge_completion_tokens", "judge_cost_usd")
_COSTS_SQL = f"""
    SELECT system_id, {", ".join(COST_COLUMNS)} FROM month_costs WHERE release_id = :r AND judge_config = :j"""


def pick_board(conn: sa.Connection, release_id: str | None = None,
               judge_config: str | None = None) -> tuple[str, str] | None:
    """(release_id, judge_config) of the board readers show, or None when there is none.

    With release_id None, the latest release that has a board (under judge_config when given); with
    judge_config None, that release's most complete board, then the largest, then the newest. The CLI
    (`load_leaderboard`) and the web page both pick through here, so "the latest board" is one board.
    """
    picked = _pick(conn, release_id, judge_config)
    return None if picked is None else (picked.release_id, picked.judge_config)


def _pick(conn: sa.Connection, release_id: str | None, judge_config: str | None):
    """pick_board's (release_id, judge_config, board_version) row, or None."""
    return conn.execute(sa.text(_PICK_SQL), {"r": release_id, "j": judge_config}).first()


def load_leaderboard(engine: Engine, release_id: str | None = None, judge_config: str | None = None,
                     track: str | None = None, board_version: int | None = None) -> list[dict]:
    """One release's board under one judge, best first; [] when there is none.

    Each row has the board's columns, `family`, `system_kind`, and `metrics`: {metric: its per-metric
    detail}, in the registry's order. `track` None (or "core") reads the core board; a track's name reads
    that track's board (an unknown one is refused, naming the known). With release_id None, the latest
    release that has such a board (under judge_config when given); with judge_config None, the most
    complete board of that release. `board_version` None reads the version readers see (the latest
    published one, else the latest draft: the `board_current` view); a number reads that version.
    """
    if release_id is not None:
        validate_release_id(release_id)  # InvalidInput for what no release can be named (NUL bytes, quotes)
    family = track or registry.CORE
    registry.ranking_metric(family)  # InvalidInput for an unknown track
    with engine.connect() as conn:
        if family == registry.CORE:
            picked = _pick(conn, release_id, judge_config)
            rows_sql, metrics_sql = _ROWS_SQL, _METRICS_SQL
        else:
            picked = conn.execute(sa.text(_TRACK_PICK_SQL), {"r": release_id, "j": judge_config, "f": family}).first()
            rows_sql, metrics_sql = _TRACK_ROWS_SQL, _TRACK_METRICS_SQL
        if picked is None:
            return []
        if board_version is not None:
            picked = (picked[0], picked[1], board_version)
        params = {"r": picked[0], "j": picked[1], "v": picked[2], "f": family}
        rows = [dict(r) for r in conn.execute(sa.text(rows_sql), params).mappings()]
        costs = {c["system_id"]: {k: c[k] for k in COST_COLUMNS}
                 for c in conn.execute(sa.text(_COSTS_SQL), params).mappings()}
        details: dict[str, dict[str, dict]] = {}
        for d in conn.execute(sa.text(metrics_sql), params).mappings():
            details.setdefault(d["system_id"], {})[d["metric"]] = {k: v for k, v in d.items() if k != "system_id"}
    for row in rows:
        row["family"] = family
        row["costs"] = costs.get(row["system_id"])
        stored = details.get(row["system_id"], {})
        row["metrics"] = {m: stored.get(m, _missing_detail(m)) for m in registry.metric_names(family)}
        row.update({m: d["mean"] for m, d in row["metrics"].items()})  # as the wide views have them
    return rows


def _missing_detail(metric: str) -> dict:
    return {"metric": metric, "variant": registry.headline_variant(metric), "metric_version": None, "mean": None, "n": 0,
            "n_unscored": 0, "ci_low": None, "ci_high": None, "is_best": False, "significant": False,
            "p_value": None, "runner_up": None, "n_pairs": None}


# ------------------------------------------------------------------------------------------ formatting

def truncate_score(x: float, decimals: int = 3) -> float:
    """A score cut (not rounded) to `decimals`, as the paper's Table 2 prints them.

    Recomputed from its printed means, Table 2's geometric means are .30913, .28593 and .28758: the table
    shows .309, .285 and .287, i.e. truncated (rounding would give .286 and .288). We print the same way
    so our numbers read like the paper's. The epsilon keeps a stored 0.3 (0.29999...) from becoming .299.
    """
    scale = 10 ** decimals
    return math.floor(float(x) * scale + 1e-9) / scale


def format_score(x: float | None, decimals: int = 3, *, leading_zero: bool = True, missing: str = "n/a") -> str:
    """How every human-facing view (CLI table and markdown, the web page) shows a score."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return missing
    text = f"{truncate_score(x, decimals):.{decimals}f}"
    return text if leading_zero or not text.startswith("0.") else text[1:]


def _num(x: float | None) -> str:
    """Table 2 style: three decimals, no leading zero (.309); n/a for a mean with nothing scored."""
    return format_score(x, leading_zero=False)


def _ci(low: float | None, high: float | None) -> str:
    return "" if low is None or high is None else f"[{_num(low)}, {_num(high)}]"


def _detail(row: dict, metric: str) -> dict:
    return (row.get("metrics") or {}).get(metric) or {"mean": row.get(metric), "n_unscored": 0}


def _family(rows: Sequence[dict]) -> str:
    return rows[0].get("family") or registry.CORE if rows else registry.CORE


def _title(rows: Sequence[dict]) -> str:
    family = _family(rows)
    releases = sorted({r["release_id"] for r in rows})
    judges = sorted({r["judge_config"] for r in rows})
    n_queries = sorted({r["n_queries"] for r in rows})
    board = "Leaderboard" if family == registry.CORE else f"{registry.family_label(family)} track"
    judged = ", ".join(f"{j} (offline local judge, not an LLM)" if is_local_config(j) else j for j in judges)
    return f"{board} {', '.join(releases)} · judge {judged} · {', '.join(map(str, n_queries))} queries"


def _contamination_legend(rows: Sequence[dict]) -> list[str]:
    """One line per mark the rows use: which systems could have seen the month's papers."""
    marks = {r.get("contamination") for r in rows}
    out = []
    if "may_have_seen" in marks:
        out.append(f"{MAY_HAVE_SEEN_MARK} = may have seen these papers: its model's knowledge cutoff is on or after "
                   "the month's first query; shown, not ranked, never marked best.")
    if "cutoff_unknown" in marks:
        out.append(f"{CUTOFF_UNKNOWN_MARK} = its model's knowledge cutoff is unknown (ranked; register it with "
                   "`deepscholar systems cutoff`).")
    return out


def _legend(markdown: bool, family: str = registry.CORE) -> list[str]:
    best = "**bold** = best on that metric; " if markdown else ""
    unscored = "\\*" if markdown else UNSCORED_MARK
    ranking = registry.ranking_metric(family)
    if ranking is None:
        means = ("Means of each metric's headline variant; Geo mean = geometric mean of the seven (0 if any is 0); "
                 "95% CI = seeded bootstrap over queries.")
    else:
        counts = [registry.metric_label(m) for m in registry.metric_names(family) if not registry.is_bounded(m)]
        means = (f"Means of each metric's headline variant over queries; ranked by {registry.metric_label(ranking)}; "
                 f"95% CI (of {registry.metric_label(ranking)}) = seeded bootstrap over queries."
                 + (f" {', '.join(counts)}: a count per report, not a fraction." if counts else ""))
    return [
        f"{best}{SIGNIFICANT_MARK} = best and significantly better than the runner-up "
        "(paired two-tailed t-test over the queries both scored, p < 0.05); "
        f"{unscored} = some queries unscored on that metric (excluded from its mean).",
        means,
    ]


def _cells(row: dict, markdown: bool) -> list[str]:
    family = row.get("family") or registry.CORE
    rank = "–" if row["rank"] is None else str(row["rank"])
    if row.get("rank_change"):  # a category board: the move against the overall board of the same queries
        rank += f" ({row['rank_change']:+d})"
    cells = [rank,
             row["system_id"] + _SYSTEM_MARKS.get(row.get("contamination") or "", "")]
    for m in registry.metric_names(family):
        d = _detail(row, m)
        text = _num(d.get("mean"))
        if markdown and d.get("is_best"):
            text = f"**{text}**"
        if d.get("significant"):
            text += SIGNIFICANT_MARK
        if d.get("n_unscored"):
            text += "\\*" if markdown else UNSCORED_MARK
        cells.append(text)
    ranking = registry.ranking_metric(family)
    if ranking is None:
        gm = _num(row.get("geometric_mean"))
        if markdown and row.get("rank") == 1 and row.get("geometric_mean") is not None:
            gm = f"**{gm}**"
        cells += [gm, _ci(row.get("geometric_mean_ci_low"), row.get("geometric_mean_ci_high"))]
    else:
        d = _detail(row, ranking)
        cells.append(_ci(d.get("ci_low"), d.get("ci_high")))
    cells.append(f"{row['n_reports']}/{row['n_queries']}" + (f" ({row['n_failed']} failed)" if row["n_failed"] else ""))
    if "costs" in row:
        cells += cost_cells(row.get("costs") or {})
    return cells


def _tokens(n) -> str:
    if n is None:
        return "n/a"
    return f"{n / 1e6:.1f}M" if n >= 1e6 else f"{n / 1e3:.1f}k" if n >= 1e3 else str(int(n))


# The cost column is headed "USD": plain amounts, to the cent, finer below one.
_usd = functools.partial(usd_text, sign=False, grouped=False, unknown="n/a")


def cost_cells(c: dict) -> list[str]:
    """Tokens and cost of generation / of judging, and the mean generation latency per report."""
    gen_tokens = None if c.get("gen_prompt_tokens") is None else (c["gen_prompt_tokens"] or 0) + (
        c.get("gen_completion_tokens") or 0)
    judge_tokens = None if c.get("judge_prompt_tokens") is None else (c["judge_prompt_tokens"] or 0) + (
        c.get("judge_completion_tokens") or 0)
    latency = c.get("mean_latency_ms")
    return [f"{_tokens(gen_tokens)} / {_tokens(judge_tokens)}",
            f"{_usd(c.get('gen_cost_usd'))} / {_usd(c.get('judge_cost_usd'))}",
            "n/a" if latency is None else f"{latency / 1000:.1f}"]


COST_HEAD = ["Tokens gen / judge", "USD gen / judge", "s / report"]


_FIRST_METRIC_COL = 2


def _head(family: str = registry.CORE, costs: bool = False) -> list[str]:
    tail = ["Geo mean", "95% CI"] if registry.ranking_metric(family) is None else ["95% CI"]
    return ["Rank", "System", *(registry.metric_label(m) for m in registry.metric_names(family)), *tail, "Reports",
            *(COST_HEAD if costs else [])]


def _has_costs(rows: Sequence[dict]) -> bool:
    return bool(rows) and all("costs" in r for r in rows)


def _format_table(rows: Sequence[dict]) -> str:
    family = _family(rows)
    body = [_cells(r, markdown=False) for r in rows]
    head = _head(family, _has_costs(rows))
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]
    # Widen a dimension's last column until its label fits over the group.
    col = _FIRST_METRIC_COL
    spans = []
    for dim, metrics in registry.dimensions(family).items():
        first, last = col, col + len(metrics) - 1
        label = registry.dimension_label(dim)
        span = sum(widths[first:last + 1]) + 2 * (last - first)
        widths[last] += max(0, len(label) - span)
        spans.append((first, last, label))
        col = last + 1

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) if i < _FIRST_METRIC_COL else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()

    starts = [sum(widths[:i]) + 2 * i for i in range(len(widths))]
    groups, rules = [" "] * (starts[-1] + widths[-1]), [" "] * (starts[-1] + widths[-1])
    for first, last, label in spans:
        start, end = starts[first], starts[last] + widths[last]
        groups[start:end] = label.center(end - start)
        rules[start:end] = "─" * (end - start)
    out = [_title(rows), "".join(groups).rstrip(), "".join(rules).rstrip(), line(head),
           line(["-" * w for w in widths]), *(line(b) for b in body), "", *_legend(False, family),
           *_contamination_legend(rows)]
    return "\n".join(out)


def _format_markdown(rows: Sequence[dict]) -> str:
    family = _family(rows)
    groups = " · ".join(f"{registry.dimension_label(d)}: {', '.join(registry.metric_label(m) for m in ms)}"
                        for d, ms in registry.dimensions(family).items())
    head = _head(family, _has_costs(rows))
    align = ["---:", ":---", *["---:"] * len(registry.metric_names(family)),
             *(["---:"] if registry.ranking_metric(family) is None else []), ":---:", "---:",
             *(["---:"] * len(COST_HEAD) if _has_costs(rows) else [])]
    out = [f"**{_title(rows)}**", "", f"Columns by dimension — {groups}.", "",
           "| " + " | ".join(head) + " |", "| " + " | ".join(align) + " |"]
    out += ["| " + " | ".join(c.replace("|", "\\|") for c in _cells(r, markdown=True)) + " |" for r in rows]
    out += [""] + _legend(True, family) + _contamination_legend(rows)
    return "\n".join(out)


def _round(x: float | None, digits: int = 3) -> float | None:
    return None if x is None else round(float(x), digits)


def _format_csv(rows: Sequence[dict]) -> str:
    """One line per system: means in the registry's order (3 decimals), then each metric's n, unscored and CI.
    The core board adds its geometric mean; a track's board names its family and ranking metric."""
    family = _family(rows)
    core = registry.ranking_metric(family) is None
    names = registry.metric_names(family)
    head = ["release_id", "judge_config", *([] if core else ["track", "ranking_metric"]), "rank", "system_id",
            "n_queries", "n_reports", "n_failed", *names,
            *(["geometric_mean", "geometric_mean_ci_low", "geometric_mean_ci_high"] if core else [])]
    extra = ("n", "n_unscored", "ci_low", "ci_high", "is_best", "significant", "p_value")
    head += [f"{m}_{k}" for m in names for k in extra] + ["contamination", "knowledge_cutoff", *COST_COLUMNS]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(head)
    for r in rows:
        line = [r["release_id"], r["judge_config"], *([] if core else [family, r.get("ranking_metric")]),
                r["rank"], r["system_id"], r["n_queries"], r["n_reports"], r["n_failed"],
                *(_round(_detail(r, m).get("mean")) for m in names)]
        if core:
            line += [_round(r.get("geometric_mean")), _round(r.get("geometric_mean_ci_low")),
                     _round(r.get("geometric_mean_ci_high"))]
        for m in names:
            d = _detail(r, m)
            p = d.get("p_value")
            line += [d.get("n"), d.get("n_unscored"), _round(d.get("ci_low")), _round(d.get("ci_high")),
                     d.get("is_best"), d.get("significant"), None if p is None else f"{p:.3g}"]
        line += [r.get("contamination"), _jsonable(r.get("knowledge_cutoff")),
                 *((r.get("costs") or {}).get(k) for k in COST_COLUMNS)]
        writer.writerow(["" if v is None else v for v in line])
    return buf.getvalue()


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    return value


def _format_json(rows: Sequence[dict]) -> str:
    """Full precision (the numbers are data here, not a table to read); CI as [low, high]."""
    out = []
    for r in rows:
        family = r.get("family") or registry.CORE
        metrics = {}
        for dim, ms in registry.dimensions(family).items():
            for m in ms:
                d = _detail(r, m)
                metrics[m] = {"dimension": dim, "variant": d.get("variant", registry.headline_variant(m)),
                              "mean": d.get("mean"), "n": d.get("n"), "n_unscored": d.get("n_unscored"),
                              "ci": [d.get("ci_low"), d.get("ci_high")], "is_best": d.get("is_best"),
                              "significant": d.get("significant"), "p_value": d.get("p_value"),
                              "runner_up": d.get("runner_up"), "metric_version": d.get("metric_version"),
                              "bounded": registry.is_bounded(m)}
        entry = {
            "release_id": r["release_id"], "judge_config": r["judge_config"],
            "local_judge": is_local_config(r["judge_config"]), "track": family, "system_id": r["system_id"],
            "system_kind": r.get("system_kind"), "rank": r["rank"], "n_queries": r["n_queries"],
            "n_reports": r["n_reports"], "n_failed": r["n_failed"], "metrics": metrics,
            "contamination": r.get("contamination"), "knowledge_cutoff": _jsonable(r.get("knowledge_cutoff")),
            "board_version": r.get("board_version"),
        }
        if "costs" in r:
            entry["costs"] = r["costs"]
        for pooled in ("selection", "overall_rank", "rank_change"):  # boards over a window or category
            if pooled in r:
                entry[pooled] = r[pooled]
        if registry.ranking_metric(family) is None:
            entry |= {"geometric_mean": r.get("geometric_mean"),
                      "geometric_mean_ci": [r.get("geometric_mean_ci_low"), r.get("geometric_mean_ci_high")]}
        else:
            entry["ranking_metric"] = r.get("ranking_metric") or registry.ranking_metric(family)
        entry |= {"metric_versions": r.get("metric_versions") or {}, "computed_at": _jsonable(r.get("computed_at"))}
        out.append(entry)
    return json.dumps(out, indent=2, default=_jsonable)


def format_leaderboard(rows: Sequence[dict], fmt: str = "table") -> str:
    """Render load_leaderboard's rows (a core or a track board) as table | csv | json | markdown."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    if fmt == "json":
        return _format_json(rows)
    if fmt == "csv":
        return _format_csv(rows)
    if not rows:
        return "(no leaderboard rows)"
    return _format_markdown(rows) if fmt == "markdown" else _format_table(rows)


# ------------------------------------------------------------------------------------- analyst queries

@dataclass(frozen=True)
class NamedQuery:
    name: str
    description: str
    sql: str

    @property
    def params(self) -> tuple[str, ...]:
        """Bind parameters (:name) the query needs, in order of first use; casts (::) are not binds."""
        return tuple(dict.fromkeys(re.findall(r"(?<![:\w]):([A-Za-z_]\w*)", _strip_comments(self.sql))))


def _strip_comments(sql: str) -> str:
    return "\n".join(line.split("--", 1)[0] for line in sql.splitlines())


def analyst_queries(path: Path | str = ANALYST_QUERIES) -> dict[str, NamedQuery]:
    """The example queries of sql/queries/analyst_examples.sql by name (`-- name:` blocks)."""
    queries: dict[str, NamedQuery] = {}
    blocks = re.split(r"^-- name:\s*", Path(path).read_text(), flags=re.MULTILINE)[1:]
    for block in blocks:
        name, _, rest = block.partition("\n")
        lines = rest.splitlines()
        description = lines[0].removeprefix("--").strip() if lines and lines[0].startswith("--") else ""
        sql = "\n".join(lines[1:] if description else lines).strip().rstrip(";").strip()
        queries[name.strip()] = NamedQuery(name.strip(), description, sql)
    return queries
