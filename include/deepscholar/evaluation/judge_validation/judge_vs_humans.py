"""How far can you trust each column? Our judge's labels against human labels, metric by metric.

Design notes: docs/MODULE_NOTES.md, `deepscholar.evaluation.judge_validation.judge_vs_humans`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar.errors import NotFound
from deepscholar.evaluation.judge_spec import JudgeSpec
from deepscholar.evaluation.judge_validation import rater_agreement as stats
from deepscholar.evaluation.judge_validation.annotation_units import (
    annotatable_metric,
    judged_units,
    metrics_judged_on,
)
from deepscholar.evaluation.metrics import registry

__all__ = ["FORMATS", "labelled_metrics", "capped_labels", "agreement_report", "store_agreement",
           "save_agreement", "lock_labels",
           "stored_agreement", "format_agreement_report"]

FORMATS = ("table", "json", "markdown")
CAP_SEED = "deepscholar-agreement-cap-v1"  # the hash that picks which labels of an over-full item are read
_STORE_LOCK = "deepscholar_human_labels"  # annotation.import_labels' lock: one writer of labels and stats


def labelled_metrics(conn: sa.Connection, release_id: str) -> list[str]:
    """The metrics with at least one human label on the release (registry order, unregistered ones left out)."""
    found = set(conn.execute(sa.text("""
        SELECT DISTINCT ai.metric FROM annotation_items ai
        WHERE ai.release_id = :r AND EXISTS (SELECT 1 FROM human_labels hl WHERE hl.item_id = ai.item_id)"""),
        {"r": release_id}).scalars())
    return [m for m in registry.annotatable_metric_names() if m in found]


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


def _ci_list(ci: tuple[float, float] | None) -> list[float] | None:
    """A (low, high) interval as the JSON list a report stores; None stays None."""
    return None if ci is None else [ci[0], ci[1]]


def _cap_key(item: str, annotator: str) -> bytes:
    return hashlib.sha256(f"{CAP_SEED}\x1f{item}\x1f{annotator}".encode()).digest()


def capped_labels(humans: Mapping[str, Mapping[str, str]], cap: int) -> tuple[list[list[str | None]], int]:
    """(slots × items table, items cut): each item's labels of at most `cap` annotators, in `cap` rows.

    Alpha (nominal) and pairwise agreement depend only on the labels each item got, not on who gave them,
    so row k holds each item's k-th kept label (None past its last). Which annotators are kept on an item
    with more than `cap` is fixed: the `cap` smallest sha256(CAP_SEED, item, annotator), whatever order or
    number of rows the labels were imported in. Work and memory: cap × items."""
    items = sorted(humans)
    slots: list[list[str | None]] = [[None] * len(items) for _ in range(min(cap, max((len(g) for g in humans.values()),
                                                                                    default=0)))]
    cut = 0
    for j, item in enumerate(items):
        given = humans[item]
        names = list(given)
        if len(names) > cap:
            cut += 1
            names = sorted(names, key=lambda a: _cap_key(item, a))[:cap]
        for k, name in enumerate(sorted(names)):
            slots[k][j] = given[name]
    return slots, cut


def _inter_annotator(humans: dict[str, dict[str, str]], annotators: Sequence[str], labels: Sequence[str], *,
                     seed: int, n_resamples: int, intervals: bool, kappa_intervals: bool, cap: int) -> dict | None:
    """Among the humans (several annotators only): Krippendorff's alpha and pairwise agreement, with CIs, on
    at most `cap` labels per item (capped_labels)."""
    if len(annotators) < 2:
        return None
    items = sorted(humans)
    table, cut = capped_labels(humans, cap)
    return {
        "n_annotators": len(annotators),
        "n_items": sum(1 for i in items if len(humans[i]) >= 2),  # items labelled by two or more
        "annotators_per_item_cap": cap,
        "n_items_capped": cut,  # items with more labels than the cap: these statistics read `cap` of them
        "krippendorff_alpha": stats.krippendorff_alpha(table, labels),
        "alpha_ci": _ci_list(stats.alpha_ci(table, labels, seed=seed, n_resamples=n_resamples)
                              if intervals and kappa_intervals else None),
        "percent_agreement": stats.pairwise_agreement(table),
        "ci": _ci_list(stats.pairwise_ci(table, seed=seed, n_resamples=n_resamples) if intervals else None),
    }


def _metric_report(engine: Engine, release_id: str, name: str, judge_config: str, *, seed: int,
                   n_resamples: int, intervals: bool, kappa_intervals: bool, cap: int,
                   conn: sa.Connection | None = None) -> dict:
    metric = annotatable_metric(name)
    if conn is None:
        with engine.connect() as own:
            humans, reports = _human_labels(own, release_id, name)
    else:  # the importer's transaction: it sees the labels it is storing
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
        "ci": _ci_list(stats.percent_ci(judge_side, human_side, seed=seed, n_resamples=n_resamples)
                        if intervals else None),
        "cohen_kappa": stats.cohen_kappa(judge_side, human_side, labels),
        "kappa_ci": _ci_list(stats.kappa_ci(judge_side, human_side, labels, seed=seed, n_resamples=n_resamples)
                              if intervals and kappa_intervals else None),
        "confusion": stats.confusion(judge_side, human_side, labels),  # judge label -> human label -> count
        "n_labels": sum(len(given) for given in humans.values()),
        "inter_annotator": _inter_annotator(humans, annotators, labels, seed=seed, n_resamples=n_resamples,
                                            intervals=intervals, kappa_intervals=kappa_intervals, cap=cap),
        "paper_agreement": getattr(metric, "paper_human_agreement", None),
    }


def agreement_report(engine: Engine, release_id: str, metric: str | None = None, judge_config: str | None = None,
                     *, seed: int = 0, n_resamples: int | None = None, intervals: bool = True,
                     kappa_intervals: bool = True, conn: sa.Connection | None = None) -> list[dict]:
    """One entry per annotatable metric with human labels on the release (only `metric` when given), in
    registry order: the judge's agreement with the humans' majority and the humans' agreement among
    themselves (keys in the module docstring and docs/ARCHITECTURE.md, "Judge validation").

    `judge_config` (default: DEEPSCHOLAR_JUDGE's) is the judge whose labels are compared. `intervals=False`
    skips the bootstrap; `kappa_intervals=False` only the slow part of it (kappa's and alpha's intervals
    resample in a Python loop, about a second per metric; percent agreement's are vectorised): the page. Refused, with how to fix it: an unknown or unannotatable
    metric, no human labels for the release (or metric), a judge config with no judgments on the release.
    `conn`: read the labels on this connection (a transaction that holds the labels' lock, to store them)."""
    from deepscholar.settings import current_settings

    judge_config = JudgeSpec.parse(judge_config or current_settings().judge).config_id
    if metric is not None:
        annotatable_metric(metric)  # InvalidInput for an unknown metric or one no human can validate
    with engine.connect() as own:
        labelled = labelled_metrics(conn or own, release_id)
        judged = metrics_judged_on(own, release_id, judge_config)
        configs = sorted(own.execute(sa.text("""
            SELECT DISTINCT j.judge_config FROM judgments j JOIN reports r USING (report_id)
            WHERE r.release_id = :r"""), {"r": release_id}).scalars())
    wanted = [m for m in ([metric] if metric else registry.annotatable_metric_names()) if m in labelled]
    if not wanted:
        which = f" of metric {metric}" if metric else ""
        raise NotFound(f"no human labels{which} on release {release_id}: draw a sample with `deepscholar annotate "
                       f"export --release {release_id}{f' --metric {metric}' if metric else ''}`, have it labelled, "
                       "then load the labels with `deepscholar annotate import`")
    if not judged & set(wanted):
        raise NotFound(f"judge config {judge_config!r} has no judgments of {', '.join(wanted)} on release "
                       f"{release_id}; judge configs with judgments there: {', '.join(configs) or 'none'} "
                       f"(judge the month with `deepscholar evaluate --release {release_id} --judge ...`)")
    settings = current_settings()
    resamples = n_resamples or settings.agreement_resamples
    return [_metric_report(engine, release_id, m, judge_config, seed=seed, n_resamples=resamples,
                           intervals=intervals, kappa_intervals=kappa_intervals,
                           cap=settings.agreement_annotators_per_item, conn=conn)
            for m in wanted]


def save_agreement(conn: sa.Connection, release_id: str, judge_config: str, entries: Sequence[dict]) -> int:
    """Upsert entries of agreement_report (full intervals, seed 0) into human_agreement_stats; an entry equal
    to the stored one is left alone. Returns the rows written."""
    written = 0
    for entry in entries:
        written += conn.execute(sa.text("""
            INSERT INTO human_agreement_stats (release_id, judge_config, metric, report, n_labels)
            VALUES (:r, :j, :m, CAST(:report AS jsonb), :n)
            ON CONFLICT (release_id, judge_config, metric) DO UPDATE
                SET report = excluded.report, n_labels = excluded.n_labels, computed_at = now()
            WHERE human_agreement_stats.report IS DISTINCT FROM excluded.report"""),
            {"r": release_id, "j": judge_config, "m": entry["metric"], "report": json.dumps(entry),
             "n": entry["n_labels"]}).rowcount
    return written


def lock_labels(conn: sa.Connection) -> None:
    """Wait for, then hold until `conn`'s transaction ends, the one lock every writer of labels and stored
    agreement takes."""
    conn.execute(sa.text("SELECT pg_advisory_xact_lock(hashtext(:k))"), {"k": _STORE_LOCK})


def store_agreement(engine: Engine, release_id: str, judge_config: str | None = None) -> int:
    """Compute the month's judge-vs-humans entries (every judge config with judgments of a labelled metric,
    or only `judge_config`) with full intervals, then upsert them into human_agreement_stats in one short
    transaction that takes the labels' lock. The computing holds no connection while it takes another (the
    pool rule): each read is its own short connection, and the write comes after. Rows whose entry did not
    change are left alone, so running it twice changes nothing. Returns the rows written."""
    from deepscholar.settings import current_settings

    settings = current_settings()
    with engine.connect() as conn:
        labelled = labelled_metrics(conn, release_id)
        configs = [judge_config] if judge_config else sorted(conn.execute(sa.text("""
            SELECT DISTINCT j.judge_config FROM judgments j JOIN reports r USING (report_id)
            WHERE r.release_id = :r AND j.metric = ANY(:m)"""), {"r": release_id, "m": labelled}).scalars())
        judged = {config: metrics_judged_on(conn, release_id, config) for config in configs}
    if not labelled:
        return 0
    entries = {config: [_metric_report(engine, release_id, name, config, seed=0,
                                       n_resamples=settings.agreement_resamples, intervals=True,
                                       kappa_intervals=True, cap=settings.agreement_annotators_per_item)
                        for name in labelled if name in judged[config]]
               for config in configs}
    written = 0
    with engine.begin() as conn:
        lock_labels(conn)
        for config, found in entries.items():
            written += save_agreement(conn, release_id, config, found)
    return written


def stored_agreement(conn: sa.Connection, release_id: str, judge_config: str) -> list[dict]:
    """The stored entries of a month under one judge config, in registry order ([] when none): what the
    page shows. One indexed read; nothing is computed."""
    rows = {r.metric: r.report for r in conn.execute(sa.text("""
        SELECT metric, report FROM human_agreement_stats WHERE release_id = :r AND judge_config = :j"""),
        {"r": release_id, "j": judge_config})}
    return [rows[m] for m in registry.annotatable_metric_names() if m in rows]


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
        inter = r.get("inter_annotator") or {}
        if inter.get("n_items_capped"):
            extra.append(f"humans' alpha and agreement read {inter['annotators_per_item_cap']} labels on each of "
                         f"the {inter['n_items_capped']} items with more (DEEPSCHOLAR_AGREEMENT_ANNOTATORS_PER_ITEM)")
        if r["n_ties"]:
            extra.append(f"{r['n_ties']} items without a human majority left out")
        if r["n_unjudged"]:
            extra.append(f"{r['n_unjudged']} labelled items this judge did not score")
        lines = _confusion_lines(r)
        parts += ["", f"{r['metric']}: confusion (rows: judge, columns: humans' majority)"
                  + (f"; {'; '.join(extra)}" if extra else ""),
                  tabulate(lines[1:], headers=lines[0], tablefmt=tablefmt, disable_numparse=True)]
    return "\n".join([*parts, "", note])
