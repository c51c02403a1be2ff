"""The methodology page's judge-validation figures, as the warehouse stores them: each month's judge against
human labels (the board's trust section, every month), judge against judge, and the monthly drift check.
Nothing is computed here; a warehouse without figures gets one line saying so.

Design notes: docs/MODULE_NOTES.md, `deepscholar.site.validation`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from markupsafe import Markup
from sqlalchemy.engine import Engine

from deepscholar.evaluation.judge_validation import rater_agreement as stats
from deepscholar.evaluation.judge_validation.judge_vs_humans import stored_agreement
from deepscholar.evaluation.metrics import registry
from deepscholar.web.render import metric_order_key, trust_table

__all__ = ["NONE_STORED", "validation_sections"]

NONE_STORED = Markup("The warehouse holds no judge-validation figures yet: no human labels imported "
                     "(<code>deepscholar annotate import</code>), no second judge compared (<code>deepscholar "
                     "judges compare</code>) and no drift check run (<code>deepscholar judges drift</code>).")
Cell = tuple[Any, ...]  # (text, link) or (text, None, number): a number gets data-value


def _section(ident: str, heading: str, columns: Sequence[str], rows: list[list[Cell]], note: str) -> dict:
    return {"id": ident, "heading": heading, "html": None, "columns": list(columns), "rows": rows, "note": note}


def _label(metric: str) -> str:
    return registry.metric_label(metric) if metric in registry.metric_names() else metric


def _humans(conn: sa.Connection) -> list[list[Cell]]:
    boards = conn.execute(sa.text("SELECT DISTINCT release_id, judge_config FROM deepscholar.human_agreement_stats "
                                  "ORDER BY 1 DESC, 2")).all()
    rows = []
    for release, judge in boards:
        for t in trust_table(stored_agreement(conn, release, judge)):
            rows.append([(release, None), (judge, None), (t["label"], None),
                         (f"{t['percent_shown']} {t['ci_shown']}".strip(), None, t["percent"]),
                         (t["kappa_shown"], None, t["kappa"]), (t["n_items"], None), (t["n_annotators"], None),
                         (t["paper_shown"], None, t["paper"])])
    return rows


def _swaps(n: int, within_noise: int) -> str:
    return f"{n} ({within_noise} within noise)"


def _judge_pairs(conn: sa.Connection) -> list[list[Cell]]:
    found = conn.execute(sa.text("SELECT * FROM deepscholar.judge_comparisons ORDER BY release_id DESC, judge_a, "
                                 "judge_b")).mappings().all()
    return [[(r["release_id"], None), (r["judge_a"], None), (r["judge_b"], None), (r["n_systems"], None),
             (stats.shown_num(r["kendall_tau"]), None, r["kendall_tau"]),
             ("n/a" if r["p_value"] is None else f"{r['p_value']:.3g}", None),
             (_swaps(r["n_swaps"], r["n_swaps_within_noise"]), None)] for r in found]


def _judge_items(conn: sa.Connection) -> list[list[Cell]]:
    found = conn.execute(sa.text("SELECT * FROM deepscholar.judge_comparison_metrics")).mappings().all()
    ordered = sorted(found, key=lambda r: (r["judge_a"], r["judge_b"], metric_order_key(r["metric"])))
    ordered.sort(key=lambda r: r["release_id"], reverse=True)  # newest month first, stable within it

    def ci(low: float | None, high: float | None) -> list[float] | None:
        return None if low is None or high is None else [low, high]

    return [[(r["release_id"], None), (r["judge_a"], None), (r["judge_b"], None), (_label(r["metric"]), None),
             (r["n_items"], None),
             (stats.shown_pct_ci(r["percent_agreement"], ci(r["ci_low"], r["ci_high"])), None, r["percent_agreement"]),
             (stats.shown_num_ci(r["cohen_kappa"], ci(r["kappa_ci_low"], r["kappa_ci_high"])), None, r["cohen_kappa"]),
             (stats.shown_num(r["kendall_tau"]), None, r["kendall_tau"])] for r in ordered]


def _two(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f}"  # as `deepscholar judges drift` prints them


def _drift(conn: sa.Connection) -> list[list[Cell]]:
    found = conn.execute(sa.text("SELECT * FROM deepscholar.judge_drift_checks")).mappings().all()
    ordered = sorted(found, key=lambda r: (r["judge_config"], metric_order_key(r["metric"])))
    ordered.sort(key=lambda r: r["release_id"], reverse=True)
    out = []
    for r in ordered:
        previous = "—" if r["previous_agreement"] is None else (
            f"{_two(r['previous_agreement'])} ({r['previous_release_id']})")
        out.append([(r["release_id"], None), (r["judge_config"], None), (_label(r["metric"]), None),
                    (r["status"], None), ((r["reference_kind"] or "—").replace("_", " "), None),
                    (r["n_items"], None), (_two(r["agreement"]), None, r["agreement"]), (previous, None),
                    (_two(r["min_agreement"]), None, r["min_agreement"]), (_two(r["max_drop"]), None, r["max_drop"]),
                    ("tripped" if r["tripped"] else "—", None)])
    return out


def validation_sections(engine: Engine) -> list[dict]:
    """The page's sections: an opening one, then a table per kind of figure the warehouse holds."""
    with engine.connect() as conn:
        humans, pairs, items, drift = _humans(conn), _judge_pairs(conn), _judge_items(conn), _drift(conn)
    found = humans or pairs or items or drift
    opening = ("How far each board's judge can be trusted, as the warehouse stores it: its labels against "
               "human annotators', against a second judge's on the same month, and each month's re-judging "
               "of a fixed calibration slice (a drop trips the alarm and holds the board back).")
    sections: list[dict] = [{"id": "judge-validation", "heading": "Judge validation", "columns": [], "rows": [],
                             "html": Markup("<p>{}</p>").format(opening if found else NONE_STORED), "note": None}]
    tables = [
        ("judge-vs-humans", "The judge against human labels", humans,
         ["Month", "Judge config", "Metric", "Judge = humans (95% CI)", "Cohen's kappa", "Items", "Annotators",
          "Paper's judge = humans"],
         "Share of items where the judge gives the label most annotators gave (items without a majority left "
         "out), with a 95% bootstrap interval over items; kappa: agreement beyond chance. The board's trust "
         "section shows its own month's rows."),
        ("judge-vs-judge", "Judge against judge: the core boards", pairs,
         ["Month", "Judge A", "Judge B", "Systems", "Kendall's tau", "p", "Swapped pairs"],
         "Kendall's tau between the two judges' core boards (geometric mean) over the systems both rank; a swap "
         "is within noise when the two systems' bootstrap intervals overlap on either board."),
        ("judge-vs-judge-items", "Judge against judge: metric by metric", items,
         ["Month", "Judge A", "Judge B", "Metric", "Items both scored", "Agree (95% CI)", "Kappa (95% CI)",
          "Tau of the metric's column"],
         "The two judges' labels on the items both scored, and how the metric's column ranks the systems under each."),
        ("judge-drift", "Drift checks", drift,
         ["Month", "Judge config", "Metric", "Status", "Reference labels", "Items", "Agreement",
          "Previous check", "Floor", "Largest drop", "Alarm"],
         "Each month the judge answers the same calibration slice again, against its human majority labels or "
         "its own first answers; an agreement under the floor, or a drop from the previous check larger than "
         "allowed, trips the alarm."),
    ]
    sections += [_section(ident, heading, columns, rows, note) for ident, heading, rows, columns, note in tables
                 if rows]
    return sections
