"""How far can you trust each column? Our judge's labels against human labels, metric by metric.

For every annotatable metric (the registry's, `annotatable_metric_names()`) with human labels on a
release: the judge's label of each labelled item (annotation_units.judged_units under one judge config)
against the majority of the humans' labels (human_labels), as percent agreement and Cohen's kappa with
bootstrap 95% intervals and a confusion matrix (rows: the judge's label, columns: the humans'); among the
humans, when several labelled, Krippendorff's alpha and pairwise agreement. Beside them, the agreement
the DeepScholar paper reported for the metric (`paper_human_agreement`, when the metric declares one).
`deepscholar agreement` prints it; the leaderboard page shows it beside the board. The statistics
themselves live in judge_agreement.py.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar.errors import NotFound
from deepscholar.evaluation import judge_agreement as stats
from deepscholar.evaluation import registry
from deepscholar.evaluation.annotation_units import (
    annotatable_metric,
    annotatable_metric_names,
    judged_metric_names,
    judged_units,
)
from deepscholar.evaluation.judges import judge_config_of

__all__ = ["FORMATS", "labelled_metrics", "agreement_report", "format_agreement_report"]

FORMATS = ("table", "json", "markdown")


def labelled_metrics(conn: sa.Connection, release_id: str) -> list[str]:
    """The metrics with at least one human label on the release (registry order, unregistered ones left out)."""
    found = set(conn.execute(sa.text("""
        SELECT DISTINCT ai.metric FROM annotation_items ai
        WHERE ai.release_id = :r AND EXISTS (SELECT 1 FROM human_labels hl WHERE hl.item_id = ai.item_id)"""),
        {"r": release_id}).scalars())
    return [m for m in annotatable_metric_names() if m in found]


def _human_labels(conn: sa.Connection, release_id: str, metric: str) -> tuple[dict[str, dict[str, str]], set[int]]:
    """({item_id: {annotator: label}}, the reports those items belong to)."""
    by_item: dict[str, dict[str, str]] = {}
    reports: set[int] = set()
    for row in conn.execute(sa.text("""
            SELECT ai.item_id, ai.report_id, hl.annotator, hl.label
            FROM annotation_items ai JOIN human_labels hl USING (item_id)
            WHERE ai.release_id = :r AND ai.metric = :m ORDER BY ai.item_id, hl.annotator"""),
            {"r": release_id, "m": metric}):
        by_item.setdefault(row.item_id, {})[row.annotator] = row.label
        reports.add(row.report_id)
    return by_item, reports


def _interval(ci: tuple[float, float] | None) -> list[float] | None:
    return None if ci is None else [ci[0], ci[1]]


def _inter_annotator(humans: dict[str, dict[str, str]], annotators: Sequence[str], labels: Sequence[str], *,
                     seed: int, n_resamples: int, intervals: bool, kappa_intervals: bool) -> dict | None:
    """Among the humans (several annotators only): Krippendorff's alpha and pairwise agreement, with CIs."""
    if len(annotators) < 2:
        return None
    items = sorted(humans)
    table = [[humans[i].get(a) for i in items] for a in annotators]
    return {
        "n_annotators": len(annotators),
        "n_items": sum(1 for i in items if len(humans[i]) >= 2),  # items labelled by two or more
        "krippendorff_alpha": stats.krippendorff_alpha(table, labels),
        "alpha_ci": _interval(stats.alpha_ci(table, labels, seed=seed, n_resamples=n_resamples)
                              if intervals and kappa_intervals else None),
        "percent_agreement": stats.pairwise_agreement(table),
        "ci": _interval(stats.pairwise_ci(table, seed=seed, n_resamples=n_resamples) if intervals else None),
    }


def _metric_report(engine: Engine, release_id: str, name: str, judge_config: str, *, seed: int,
                   n_resamples: int, intervals: bool, kappa_intervals: bool) -> dict:
    metric = annotatable_metric(name)
    with engine.connect() as conn:
        humans, reports = _human_labels(conn, release_id, name)
    judge = {u.item_id: u.judge_label for u in judged_units(engine, release_id, name, judge_config, reports)
             if u.judge_label is not None}  # unscored judgments answer nothing
    annotators = sorted({a for given in humans.values() for a in given})
    majority = stats.majority_labels({item: list(given.values()) for item, given in humans.items()})
    compared = [i for i in sorted(majority.labels) if i in judge]
    judge_side = [judge[i] for i in compared]
    human_side = [majority.labels[i] for i in compared]
    labels = stats.label_order(tuple(metric.annotation_labels), judge_side,
                               [x for given in humans.values() for x in given.values()])
    return {
        "metric": name,
        "label": registry.metric_label(name),
        "release_id": release_id,
        "judge_config": judge_config,
        "n_items": len(compared),  # items with a judge label and a human majority
        "n_labelled": len(humans),  # items with at least one human label
        "n_annotators": len(annotators),
        "n_ties": len(majority.ties),  # no human majority: left out of the comparison
        "n_unjudged": len(majority.labels) - len(compared),  # no (scored) judgment under this judge config
        "labels": labels,
        "percent_agreement": stats.percent_agreement(judge_side, human_side),
        "ci": _interval(stats.percent_ci(judge_side, human_side, seed=seed, n_resamples=n_resamples)
                        if intervals else None),
        "cohen_kappa": stats.cohen_kappa(judge_side, human_side, labels),
        "kappa_ci": _interval(stats.kappa_ci(judge_side, human_side, labels, seed=seed, n_resamples=n_resamples)
                              if intervals and kappa_intervals else None),
        "confusion": stats.confusion(judge_side, human_side, labels),  # judge label -> human label -> count
        "inter_annotator": _inter_annotator(humans, annotators, labels, seed=seed, n_resamples=n_resamples,
                                            intervals=intervals, kappa_intervals=kappa_intervals),
        "paper_agreement": getattr(metric, "paper_human_agreement", None),
    }


def agreement_report(engine: Engine, release_id: str, metric: str | None = None, judge_config: str | None = None,
                     *, seed: int = 0, n_resamples: int | None = None, intervals: bool = True,
                     kappa_intervals: bool = True) -> list[dict]:
    """One entry per annotatable metric with human labels on the release (only `metric` when given), in
    registry order: the judge's agreement with the humans' majority and the humans' agreement among
    themselves (keys in the module docstring and docs/ARCHITECTURE.md, "Judge validation").

    `judge_config` (default: DEEPSCHOLAR_JUDGE's) is the judge whose labels are compared. `intervals=False`
    skips the bootstrap; `kappa_intervals=False` only the slow part of it (kappa's and alpha's intervals
    resample in a Python loop, about a second per metric; percent agreement's are vectorised): the page. Refused, with how to fix it: an unknown or unannotatable
    metric, no human labels for the release (or metric), a judge config with no judgments on the release."""
    from deepscholar.settings import current_settings

    judge_config = judge_config_of(judge_config)
    if metric is not None:
        annotatable_metric(metric)  # InvalidInput for an unknown metric or one no human can validate
    with engine.connect() as conn:
        labelled = labelled_metrics(conn, release_id)
        judged = judged_metric_names(conn, release_id, judge_config)
        configs = sorted(conn.execute(sa.text("""
            SELECT DISTINCT j.judge_config FROM judgments j JOIN reports r USING (report_id)
            WHERE r.release_id = :r"""), {"r": release_id}).scalars())
    wanted = [m for m in ([metric] if metric else annotatable_metric_names()) if m in labelled]
    if not wanted:
        which = f" of metric {metric}" if metric else ""
        raise NotFound(f"no human labels{which} on release {release_id}: draw a sample with `deepscholar annotate "
                       f"export --release {release_id}{f' --metric {metric}' if metric else ''}`, have it labelled, "
                       "then load the labels with `deepscholar annotate import`")
    if not judged & set(wanted):
        raise NotFound(f"judge config {judge_config!r} has no judgments of {', '.join(wanted)} on release "
                       f"{release_id}; judge configs with judgments there: {', '.join(configs) or 'none'} "
                       f"(judge the month with `deepscholar evaluate --release {release_id} --judge ...`)")
    resamples = n_resamples or current_settings().agreement_resamples
    return [_metric_report(engine, release_id, m, judge_config, seed=seed, n_resamples=resamples,
                           intervals=intervals, kappa_intervals=kappa_intervals) for m in wanted]


# ------------------------------------------------------------------------------------------- formatting


def _rows(report: Sequence[dict]) -> tuple[list[str], list[list[str]]]:
    head = ["Metric", "Items", "Annotators", "Judge = humans (95% CI)", "Kappa (95% CI)",
            "Humans' alpha", "Humans agree", "Paper"]
    body = []
    for r in report:
        inter = r.get("inter_annotator")
        body.append([r["metric"], str(r["n_items"]), str(r["n_annotators"]),
                     stats.shown_pct_ci(r["percent_agreement"], r["ci"]), stats.shown_num_ci(r["cohen_kappa"], r.get("kappa_ci")),
                     stats.shown_num(inter["krippendorff_alpha"]) if inter else "-",
                     stats.shown_pct_ci(inter["percent_agreement"], inter["ci"]) if inter else "-",
                     stats.shown_pct(r["paper_agreement"]) if r.get("paper_agreement") is not None else "-"])
    return head, body


def _confusion_lines(r: dict) -> list[list[str]]:
    labels = r["labels"]
    return [["judge \\ humans", *labels], *([row, *(str(r["confusion"][row][c]) for c in labels)] for row in labels)]


def format_agreement_report(report: Sequence[dict], fmt: str = "table") -> str:
    """table | json | markdown. JSON: the list as agreement_report returns it (one object per metric)."""
    if fmt == "json":
        return json.dumps(list(report), indent=2)
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}")
    from tabulate import tabulate

    title = (f"Judge vs humans, {report[0]['release_id']} · judge {report[0]['judge_config']}" if report
             else "Judge vs humans")
    note = ("Judge = humans: share of items where the judge's label is the humans' majority label (ties left "
            "out); kappa: Cohen's, judge vs that majority; alpha: Krippendorff's among the humans; Paper: the "
            "human agreement the DeepScholar paper reported. Intervals: bootstrap 95% over items.")
    head, body = _rows(report)
    tablefmt = "github" if fmt == "markdown" else "simple"
    parts = [f"**{title}**" if fmt == "markdown" else title, "", tabulate(body, headers=head, tablefmt=tablefmt, disable_numparse=True)]
    for r in report:
        extra = []
        if r["n_ties"]:
            extra.append(f"{r['n_ties']} items without a human majority left out")
        if r["n_unjudged"]:
            extra.append(f"{r['n_unjudged']} labelled items this judge did not score")
        lines = _confusion_lines(r)
        parts += ["", f"{r['metric']}: confusion (rows: judge, columns: humans' majority)"
                  + (f"; {'; '.join(extra)}" if extra else ""),
                  tabulate(lines[1:], headers=lines[0], tablefmt=tablefmt, disable_numparse=True)]
    return "\n".join([*parts, "", note])
