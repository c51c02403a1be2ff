"""Judge vs judge: would another judge have told the same story about a month?

Design notes: docs/MODULE_NOTES.md, `deepscholar.evaluation.judge_validation.judge_comparison`.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar import db
from deepscholar.errors import InvalidInput, NotFound
from deepscholar.evaluation.judge_spec import JudgeSpec
from deepscholar.evaluation.judge_validation import rater_agreement as stats
from deepscholar.evaluation.judge_validation.annotation_units import (
    annotatable_metric,
    judged_units,
    metrics_judged_on,
)
from deepscholar.evaluation.metrics import registry

__all__ = ["FORMATS", "compare_judges", "compare_with_other_judges", "other_judge_configs", "load_comparison",
           "format_comparison", "summary_line"]

FORMATS = ("table", "json", "markdown")
Interval = tuple[float, float] | None


# --------------------------------------------------------------------------------------- item agreement


def _scored_labels(engine: Engine, release_id: str, metric: str, judge_config: str) -> dict[str, str]:
    return {u.item_id: u.judge_label for u in judged_units(engine, release_id, metric, judge_config)
            if u.judge_label is not None}


def _item_statistics(engine: Engine, release_id: str, a: str, b: str, metric: str, *, seed: int,
                     n_resamples: int) -> dict:
    """The two judges' labels on the units both scored (same item_id)."""
    la, lb = _scored_labels(engine, release_id, metric, a), _scored_labels(engine, release_id, metric, b)
    shared = sorted(set(la) & set(lb))
    xa, xb = [la[i] for i in shared], [lb[i] for i in shared]
    labels = stats.label_order(tuple(annotatable_metric(metric).annotation_labels), xa, xb)
    ci = stats.percent_ci(xa, xb, seed=seed, n_resamples=n_resamples)
    kci = stats.kappa_ci(xa, xb, labels, seed=seed, n_resamples=n_resamples)
    return {"n_items": len(shared), "percent_agreement": stats.percent_agreement(xa, xb),
            "ci": None if ci is None else list(ci), "cohen_kappa": stats.cohen_kappa(xa, xb, labels),
            "kappa_ci": None if kci is None else list(kci), "confusion": stats.confusion(xa, xb, labels),
            "labels": labels}


# ------------------------------------------------------------------------------------------- the boards


def _boards(engine: Engine, release_id: str, judge_config: str) -> dict[str, list[dict]]:
    """{family: its board rows under judge_config at the version readers see}, families that have one."""
    from deepscholar.evaluation.boards.leaderboard import load_leaderboard

    out = {}
    for family in (registry.CORE, *registry.tracks()):
        rows = load_leaderboard(engine, release_id, judge_config, track=None if family == registry.CORE else family)
        if rows:
            out[family] = rows
    return out


def _overlap(x: Interval, y: Interval) -> bool:
    return x is not None and y is not None and x[0] <= y[1] and y[0] <= x[1]


def _ci(low, high) -> Interval:
    return None if low is None or high is None else (float(low), float(high))


def _ranking(values_a: Mapping[str, float], values_b: Mapping[str, float], ci_a: Mapping[str, Interval],
             ci_b: Mapping[str, Interval]) -> dict:
    """Kendall's tau between two boards' values of the same systems, and the pairs ordered differently.

    A swap is within noise when the two systems' intervals overlap on either board: one of the two boards
    could not tell them apart, so their order there is not a finding a different judge overturned."""
    systems = sorted(set(values_a) & set(values_b))
    tau, p = stats.kendall_tau([values_a[s] for s in systems], [values_b[s] for s in systems])
    swaps = []
    for s, t in itertools.combinations(systems, 2):
        da, dbb = values_a[s] - values_a[t], values_b[s] - values_b[t]
        if da * dbb < 0:
            first, second = (s, t) if da > 0 else (t, s)  # first: higher on board a
            swaps.append({"higher_on_a": first, "higher_on_b": second,
                          "a": {first: values_a[first], second: values_a[second]},
                          "b": {first: values_b[first], second: values_b[second]},
                          "within_noise": _overlap(ci_a.get(s), ci_a.get(t)) or _overlap(ci_b.get(s), ci_b.get(t))})
    return {"n_systems": len(systems), "kendall_tau": tau, "p_value": p, "swaps": swaps}


def _ranked(rows: Sequence[dict]) -> list[dict]:
    return [r for r in rows if r.get("rank") is not None]  # may_have_seen: shown, never ranked


def _metric_columns(boards_a: Mapping[str, list[dict]], boards_b: Mapping[str, list[dict]]) -> dict[str, dict]:
    """Per metric on both boards: the systems' mean deltas (b - a) and the column's rank comparison."""
    out = {}
    for family in boards_a.keys() & boards_b.keys():
        for metric in registry.metric_names(family):
            def means(rows: Sequence[dict], metric: str = metric) -> dict[str, tuple[float, Interval]]:
                return {r["system_id"]: (float(d["mean"]), _ci(d.get("ci_low"), d.get("ci_high")))
                        for r in rows if (d := r["metrics"].get(metric)) and d.get("mean") is not None}

            all_a, all_b = means(boards_a[family]), means(boards_b[family])
            if not all_a or not all_b:
                continue
            ranked_a, ranked_b = means(_ranked(boards_a[family])), means(_ranked(boards_b[family]))
            deltas = {s: all_b[s][0] - all_a[s][0] for s in sorted(all_a.keys() & all_b.keys())}
            out[metric] = {"deltas": deltas, **_ranking({s: v for s, (v, _) in ranked_a.items()},
                                                        {s: v for s, (v, _) in ranked_b.items()},
                                                        {s: c for s, (_, c) in ranked_a.items()},
                                                        {s: c for s, (_, c) in ranked_b.items()})}
    return out


def _headline(rows_a: Sequence[dict], rows_b: Sequence[dict]) -> dict:
    """The core boards' rankings by geometric mean, over systems both rank with one."""
    def gms(rows: Sequence[dict]) -> tuple[dict[str, float], dict[str, Interval]]:
        ranked = [r for r in _ranked(rows) if r.get("geometric_mean") is not None]
        return ({r["system_id"]: float(r["geometric_mean"]) for r in ranked},
                {r["system_id"]: _ci(r.get("geometric_mean_ci_low"), r.get("geometric_mean_ci_high")) for r in ranked})

    (va, ca), (vb, cb) = gms(rows_a), gms(rows_b)
    return _ranking(va, vb, ca, cb)


# ----------------------------------------------------------------------------------------- orientation


def _flip_swaps(swaps: Sequence[dict]) -> list[dict]:
    return [{"higher_on_a": s["higher_on_b"], "higher_on_b": s["higher_on_a"], "a": s["b"], "b": s["a"],
             "within_noise": s["within_noise"]} for s in swaps]


def _flip(result: dict) -> dict:
    """The same comparison read from the other judge: a and b exchanged, deltas negated, confusion transposed."""
    board = dict(result["board"])
    board["board_version_a"], board["board_version_b"] = board["board_version_b"], board["board_version_a"]
    board["swaps"] = _flip_swaps(board["swaps"])
    metrics = []
    for m in result["metrics"]:
        m = dict(m)
        if m.get("confusion"):
            labels = m["labels"]
            m["confusion"] = {r: {c: m["confusion"][c][r] for c in labels} for r in labels}
        m["deltas"] = {s: -d for s, d in m["deltas"].items()}
        m["swaps"] = _flip_swaps(m["swaps"])
        metrics.append(m)
    return {**result, "judge_a": result["judge_b"], "judge_b": result["judge_a"], "board": board, "metrics": metrics}


# ------------------------------------------------------------------------------------------- computing


def other_judge_configs(engine: Engine, release_id: str, judge_config: str) -> list[str]:
    """The other judge configs with a board on the release."""
    with engine.connect() as conn:
        return list(conn.execute(sa.text("""
            SELECT DISTINCT judge_config FROM board_versions WHERE release_id = :r AND judge_config <> :j
            ORDER BY judge_config"""), {"r": release_id, "j": judge_config}).scalars())


def _compute(engine: Engine, release_id: str, a: str, b: str, *, seed: int, n_resamples: int) -> dict:
    with engine.connect() as conn:
        judged = {c: metrics_judged_on(conn, release_id, c, scored_only=True) for c in (a, b)}
    boards = {c: _boards(engine, release_id, c) for c in (a, b)}
    for c in (a, b):
        if not judged[c] and not boards[c]:
            raise NotFound(f"judge config {c!r} has no judgments and no board on release {release_id}: judge the "
                           f"month with it first (`deepscholar evaluate --release {release_id} --judge ...`)")
    columns = _metric_columns(boards[a], boards[b])
    both = judged[a] & judged[b]
    names = [m for m in registry.metric_names() if m in columns or (m in both and m in registry.annotatable_metric_names())]
    metrics = []
    for m in names:
        items = (_item_statistics(engine, release_id, a, b, m, seed=seed, n_resamples=n_resamples)
                 if m in both and m in registry.annotatable_metric_names() else
                 {"n_items": 0, "percent_agreement": None, "ci": None, "cohen_kappa": None, "kappa_ci": None,
                  "confusion": {}, "labels": []})
        column = columns.get(m, {"deltas": {}, "n_systems": 0, "kendall_tau": None, "p_value": None, "swaps": []})
        metrics.append({"metric": m, **items, **column})
    core_a, core_b = boards[a].get(registry.CORE, []), boards[b].get(registry.CORE, [])
    board = {"board_version_a": core_a[0]["board_version"] if core_a else None,
             "board_version_b": core_b[0]["board_version"] if core_b else None, **_headline(core_a, core_b)}
    board["n_swaps"] = len(board["swaps"])
    board["n_swaps_within_noise"] = sum(s["within_noise"] for s in board["swaps"])
    return {"release_id": release_id, "judge_a": a, "judge_b": b, "metrics": metrics, "board": board}


def _finite(x: float | None) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else x


def _store(engine: Engine, result: dict) -> None:
    """Idempotent: the pair's rows are replaced by this computation (a metric no longer compared is removed)."""
    key = {"release_id": result["release_id"], "judge_a": result["judge_a"], "judge_b": result["judge_b"]}
    board, now = result["board"], datetime.now(UTC)
    rows = [{**key, "metric": m["metric"], "n_items": m["n_items"],
             "percent_agreement": _finite(m["percent_agreement"]),
             "ci_low": m["ci"][0] if m["ci"] else None, "ci_high": m["ci"][1] if m["ci"] else None,
             "cohen_kappa": _finite(m["cohen_kappa"]),
             "kappa_ci_low": m["kappa_ci"][0] if m["kappa_ci"] else None,
             "kappa_ci_high": m["kappa_ci"][1] if m["kappa_ci"] else None,
             "confusion": m["confusion"], "deltas": m["deltas"], "n_systems": m["n_systems"],
             "kendall_tau": _finite(m["kendall_tau"]), "swaps": m["swaps"], "computed_at": now}
            for m in result["metrics"]]
    with engine.begin() as conn:
        conn.execute(sa.text("""
            DELETE FROM judge_comparison_metrics
            WHERE release_id = :release_id AND judge_a = :judge_a AND judge_b = :judge_b AND NOT metric = ANY(:keep)"""),
            {**key, "keep": [m["metric"] for m in result["metrics"]]})
        db.upsert(conn, "judge_comparison_metrics", rows, key=["release_id", "judge_a", "judge_b", "metric"])
        db.upsert(conn, "judge_comparisons", [{
            **key, "board_version_a": board["board_version_a"], "board_version_b": board["board_version_b"],
            "n_systems": board["n_systems"], "kendall_tau": _finite(board["kendall_tau"]),
            "p_value": _finite(board["p_value"]), "swaps": board["swaps"], "n_swaps": board["n_swaps"],
            "n_swaps_within_noise": board["n_swaps_within_noise"], "computed_at": now}],
            key=["release_id", "judge_a", "judge_b"])


def compare_judges(engine: Engine, release_id: str, a: str, b: str, *, seed: int = 0,
                   n_resamples: int | None = None, store: bool = True) -> dict:
    """Compare judge configs `a` and `b` (judge specs as `evaluate --judge` takes them, or judge_config
    strings) on one release, store the result (canonical pair order) and return it oriented a → b:
    {"release_id", "judge_a", "judge_b", "metrics": [per metric: n_items, percent_agreement, ci, cohen_kappa,
    kappa_ci, confusion (a's label -> b's label -> count), labels, deltas (system -> b - a), n_systems,
    kendall_tau, p_value, swaps], "board": {board_version_a/_b, n_systems, kendall_tau, p_value, swaps,
    n_swaps, n_swaps_within_noise}}."""
    from deepscholar.settings import current_settings

    a, b = JudgeSpec.parse(a).config_id, JudgeSpec.parse(b).config_id
    if a == b:
        raise InvalidInput(f"compare two different judge configs, got {a!r} twice")
    first, second = sorted((a, b))
    result = _compute(engine, release_id, first, second, seed=seed,
                      n_resamples=n_resamples or current_settings().agreement_resamples)
    if store:
        _store(engine, result)
    return result if first == a else _flip(result)


def compare_with_other_judges(engine: Engine, release_id: str, judge_config: str, **kwargs) -> list[dict]:
    """compare_judges of `judge_config` against every other judge config with a board on the month
    (the benchmark DAG's compare_judges task); [] when there is none."""
    return [compare_judges(engine, release_id, judge_config, other, **kwargs)
            for other in other_judge_configs(engine, release_id, judge_config)]


def load_comparison(engine: Engine, release_id: str, a: str, b: str) -> dict | None:
    """The stored comparison of a pair (board row and metric rows), oriented a → b; None if never computed.
    Readers get what `compare_judges` returned, minus labels and p-values per metric."""
    a, b = JudgeSpec.parse(a).config_id, JudgeSpec.parse(b).config_id
    first, second = sorted((a, b))
    params = {"r": release_id, "a": first, "b": second}
    with engine.connect() as conn:
        board = conn.execute(sa.text("SELECT * FROM judge_comparisons WHERE release_id = :r AND judge_a = :a "
                                     "AND judge_b = :b"), params).mappings().first()
        if board is None:
            return None
        rows = [dict(r) for r in conn.execute(sa.text(
            "SELECT * FROM judge_comparison_metrics WHERE release_id = :r AND judge_a = :a AND judge_b = :b"),
            params).mappings()]
    order = {m: i for i, m in enumerate(registry.metric_names())}
    metrics = [{"metric": r["metric"], "n_items": r["n_items"], "percent_agreement": r["percent_agreement"],
                "ci": None if r["ci_low"] is None else [r["ci_low"], r["ci_high"]], "cohen_kappa": r["cohen_kappa"],
                "kappa_ci": None if r["kappa_ci_low"] is None else [r["kappa_ci_low"], r["kappa_ci_high"]],
                "confusion": r["confusion"], "labels": list(r["confusion"]), "deltas": r["deltas"],
                "n_systems": r["n_systems"], "kendall_tau": r["kendall_tau"], "p_value": None, "swaps": r["swaps"]}
               for r in sorted(rows, key=lambda r: order.get(r["metric"], len(order)))]
    result = {"release_id": release_id, "judge_a": first, "judge_b": second, "metrics": metrics,
              "board": {k: board[k] for k in ("board_version_a", "board_version_b", "n_systems", "kendall_tau",
                                              "p_value", "swaps", "n_swaps", "n_swaps_within_noise")}}
    return result if first == a else _flip(result)


# ------------------------------------------------------------------------------------------- formatting


def _swaps_text(swaps: Sequence[dict]) -> str:
    if not swaps:
        return "none"
    return "; ".join(f"{s['higher_on_a']} > {s['higher_on_b']} becomes <" + (" (within noise)" if s["within_noise"]
                                                                              else "") for s in swaps)


def summary_line(result: dict) -> str:
    """One line for a log: the pair, each compared metric's agreement, the boards' tau and swaps."""
    items = ", ".join(f"{m['metric']} {stats.shown_pct(m['percent_agreement'])} (kappa {stats.shown_num(m['cohen_kappa'])}, "
                      f"{m['n_items']} items)" for m in result["metrics"] if m["n_items"])
    board = result["board"]
    return (f"{result['release_id']}: {result['judge_a']} vs {result['judge_b']}: {items or 'no item both judged'}; "
            f"core boards tau {stats.shown_num(board['kendall_tau'])} over {board['n_systems']} systems, {board['n_swaps']} "
            f"swaps ({board['n_swaps_within_noise']} within noise)")


def format_comparison(result: dict, fmt: str = "table") -> str:
    """table | json | markdown of compare_judges's result."""
    if fmt == "json":
        return json.dumps(result, indent=2, default=str)
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}")
    from tabulate import tabulate

    tablefmt = "github" if fmt == "markdown" else "simple"
    title = f"Judge vs judge, {result['release_id']}: a = {result['judge_a']}, b = {result['judge_b']}"
    head = ["Metric", "Items", "Agree (95% CI)", "Kappa (95% CI)", "Systems", "Tau", "Swaps (a → b)"]
    body = []
    for m in result["metrics"]:
        agree = stats.shown_pct_ci(m["percent_agreement"], m["ci"])
        kappa = stats.shown_num_ci(m["cohen_kappa"], m["kappa_ci"])
        body.append([m["metric"], str(m["n_items"]), agree, kappa, str(m["n_systems"]), stats.shown_num(m["kendall_tau"]),
                     _swaps_text(m["swaps"])])
    board = result["board"]
    systems = sorted({s for m in result["metrics"] for s in m["deltas"]})
    delta_rows = [[m["metric"], *(stats.shown_num(m["deltas"].get(s), signed=True) for s in systems)]
                  for m in result["metrics"] if m["deltas"]]
    parts = [f"**{title}**" if fmt == "markdown" else title, "",
             tabulate(body, headers=head, tablefmt=tablefmt, disable_numparse=True), "",
             f"Core boards (versions {board['board_version_a']} and {board['board_version_b']}): Kendall's tau "
             f"{stats.shown_num(board['kendall_tau'])} over {board['n_systems']} systems ranked on both by geometric mean; "
             f"swaps: {_swaps_text(board['swaps'])}"]
    if delta_rows:
        parts += ["", "Board mean b − a per system:", tabulate(delta_rows, headers=["Metric", *systems],
                                                                tablefmt=tablefmt, disable_numparse=True)]
    parts += ["", "Agree and kappa over the items both judges scored; a swap is within noise when the two "
                  "systems' bootstrap intervals overlap on either board. Systems not ranked (may have seen "
                  "the month's papers) are left out of the rankings."]
    return "\n".join(parts)
