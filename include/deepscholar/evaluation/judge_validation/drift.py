"""The judge drift alarm: a fixed calibration slice re-judged every month by the production judge.

Design notes: docs/MODULE_NOTES.md, `deepscholar.evaluation.judge_validation.drift`.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar import db
from deepscholar.errors import NotFound, OverBudget
from deepscholar.evaluation.judge_spec import LOCAL_JUDGE, JudgeSpec
from deepscholar.evaluation.judge_validation import rater_agreement
from deepscholar.evaluation.judge_validation.annotation_units import (
    annotatable_metric,
    judged_units,
)
from deepscholar.evaluation.metrics import registry
from deepscholar.evaluation.money.costs import predicted_call_prices
from deepscholar.llm.prices import usd_text
from deepscholar.llm.spend import SpendLimit, billing, scope_of, spend_limit
from deepscholar.settings import Settings, current_settings

__all__ = ["SliceItem", "MetricDrift", "DriftCheck", "calibration_slice", "check_drift",
           "check_month", "tripped_messages", "format_drift"]

log = logging.getLogger("deepscholar.evaluation")
_money = functools.partial(usd_text, decimals=4, grouped=False)  # the check's messages and table: "$0.0123", "unknown"

HUMAN, FIRST_JUDGMENT = "human", "first_judgment"
# What an unscored answer (None) is compared as: no label of any metric, so it agrees with no reference. An
# answer the judge could not give counts as a disagreement, never as left out.
_UNSCORED = "\x00unscored"


@dataclass(frozen=True)
class SliceItem:
    """One question of a calibration slice and the label its answer is compared with."""

    item_id: str
    release_id: str
    report_id: int
    item_key: str
    sub_key: str
    reference_kind: str  # human | first_judgment
    reference_label: str


@dataclass
class MetricDrift:
    """One metric's check for one month: stored in judge_drift_checks unless `status` is skipped."""

    metric: str
    status: str  # checked | refused | skipped (nothing to check: not stored)
    message: str
    min_agreement: float
    max_drop: float | None
    reference_kind: str | None = None
    n_items: int = 0
    n_agree: int = 0
    n_unscored: int = 0
    n_missing: int = 0
    agreement: float | None = None
    previous_release_id: str | None = None
    previous_agreement: float | None = None
    tripped: bool = False
    calls: int = 0
    requests: int = 0
    predicted_cost_usd: float | None = None
    cost_usd: float | None = None
    request_hashes: list[str] = field(default_factory=list)

    @property
    def drop(self) -> float | None:
        if self.agreement is None or self.previous_agreement is None:
            return None
        return self.previous_agreement - self.agreement


@dataclass
class DriftCheck:
    release_id: str
    judge_config: str
    metrics: list[MetricDrift]
    predicted_cost_usd: float | None
    refused: str | None = None  # why the month's check was refused (the cost bound), else None

    @property
    def tripped(self) -> list[MetricDrift]:
        return [m for m in self.metrics if m.tripped]

    @property
    def cost_usd(self) -> float | None:
        """What the checked metrics' calls cost; None when a model's price is unknown."""
        costs = [m.cost_usd for m in self.metrics if m.status == "checked"]
        return None if None in costs else sum(c for c in costs if c is not None)

    @property
    def summary(self) -> str:
        if self.refused:
            return self.refused
        if self.tripped:
            return "; ".join(m.message for m in self.tripped)
        checked = [m for m in self.metrics if m.status == "checked"]
        return (f"no judge drift under {self.judge_config} for {self.release_id}: {len(checked)} metrics checked"
                + (f" ({', '.join(m.metric for m in checked)})" if checked else ""))


# --- the slice ----------------------------------------------------------------------------------------------

def _stored_slice(engine: Engine, judge_config: str, metric: str) -> list[SliceItem]:
    with engine.connect() as conn:
        rows = conn.execute(sa.text("""
            SELECT item_id, release_id, report_id, item_key, sub_key, reference_kind, reference_label
            FROM calibration_items WHERE judge_config = :j AND metric = :m ORDER BY position"""),
            {"j": judge_config, "m": metric}).all()
    return [SliceItem(*r) for r in rows]


def _human_slice(engine: Engine, metric: str, size: int) -> list[SliceItem]:
    """Items with human labels (any release) and a clear majority among them, in item id order."""
    with engine.connect() as conn:
        rows = conn.execute(sa.text("""
            SELECT a.item_id, a.release_id, a.report_id, a.item_key, a.sub_key, array_agg(h.label) AS labels
            FROM annotation_items a JOIN human_labels h USING (item_id)
            JOIN reports r ON r.report_id = a.report_id AND r.status = 'ok'
            WHERE a.metric = :m
            GROUP BY a.item_id ORDER BY a.item_id"""), {"m": metric}).all()
    # A tie has no majority (rater_agreement.majority_labels): no reference to compare with.
    majority = rater_agreement.majority_labels({r.item_id: r.labels for r in rows}).labels
    return [SliceItem(r.item_id, r.release_id, r.report_id, r.item_key, r.sub_key, HUMAN, majority[r.item_id])
            for r in rows if r.item_id in majority][:size]


def _source_release(engine: Engine, metric: str, judge_config: str, configured: str | None) -> str | None:
    """The configured source release, else the first published release this judge judged the metric on."""
    if configured:
        return configured
    with engine.connect() as conn:
        return conn.execute(sa.text("""
            SELECT rel.release_id FROM releases rel
            WHERE rel.status = 'published' AND EXISTS (
                SELECT 1 FROM judgments j JOIN reports r USING (report_id)
                WHERE r.release_id = rel.release_id AND j.metric = :m AND j.judge_config = :j)
            ORDER BY rel.base_id, rel.version LIMIT 1"""), {"m": metric, "j": judge_config}).scalar()


def _first_judgment_slice(engine: Engine, metric: str, judge_config: str, source: str, size: int) -> list[SliceItem]:
    """The judge's scored answers on the source release, one per distinct question (equal reports of several
    systems ask it again), the first `size` in item id order (a hash: an arbitrary but fixed sample)."""
    seen: set[str] = set()
    units = []
    for u in judged_units(engine, source, metric, judge_config):
        question = json.dumps([u.arxiv_id, u.item_key, u.unit.sub_key, u.unit.content], sort_keys=True)
        if u.judge_label is None or question in seen:
            continue
        seen.add(question)
        units.append(SliceItem(u.item_id, u.release_id, u.report_id, u.item_key, u.unit.sub_key, FIRST_JUDGMENT,
                               u.judge_label))
    return sorted(units, key=lambda s: s.item_id)[:size]


def calibration_slice(engine: Engine, metric: str, judge_config: str, *, size: int,
                      source_release: str | None = None) -> list[SliceItem]:
    """The judge's fixed slice of `metric`: the stored one, else drawn now (human labels first, else the
    judge's first judgments of the source release) and stored for every later month; [] when neither exists.

    Drawn once: later human labels, a changed `size` or changed judgments leave it as it is (delete its
    calibration_items rows to draw it anew)."""
    stored = _stored_slice(engine, judge_config, metric)
    if stored:
        return stored
    drawn = _human_slice(engine, metric, size)
    if not drawn:
        source = _source_release(engine, metric, judge_config, source_release)
        drawn = _first_judgment_slice(engine, metric, judge_config, source, size) if source else []
    if not drawn:
        return []
    with engine.begin() as conn:  # first write wins: two processes drawing at once keep one slice
        db.upsert(conn, "calibration_items", [
            {"judge_config": judge_config, "metric": metric, "item_id": s.item_id, "release_id": s.release_id,
             "report_id": s.report_id, "item_key": s.item_key, "sub_key": s.sub_key,
             "reference_kind": s.reference_kind, "reference_label": s.reference_label, "position": i}
            for i, s in enumerate(drawn)], key=["judge_config", "metric", "item_id"], update=[])
    log.info("calibration slice of %s under %s drawn: %d items (reference: %s)", metric, judge_config, len(drawn),
             drawn[0].reference_kind)
    return _stored_slice(engine, judge_config, metric)


# --- re-judging -----------------------------------------------------------------------------------------------

def _questions(items: Sequence[SliceItem]) -> int:
    """Judge calls the slice takes: one per judged item (a batch's sub-items share their item's call)."""
    return len({(s.report_id, s.item_key) for s in items})


def _rejudge(engine: Engine, metric, spec: JudgeSpec, client, items: Sequence[SliceItem]
             ) -> tuple[dict[str, str | None], list[str]]:
    """({item id: the fresh answer as an annotation label, None when unscored} for the items still askable,
    request hashes of the calls made). An item whose report changed since is left out (missing)."""
    from deepscholar.evaluation.judging.report_contexts import load_reports
    from deepscholar.evaluation.judging.runner import prepare_metric
    from deepscholar.llm.client import track_requests

    wanted: dict[tuple[int, str], list[SliceItem]] = {}
    for s in items:
        wanted.setdefault((s.report_id, s.item_key), []).append(s)
    work = []  # (report context, item, the slice items it answers)
    for ctx in load_reports(engine, sorted({s.report_id for s in items})):
        asked = {it.key: it for it in metric.items(ctx)}
        for (report_id, key), group in wanted.items():
            if report_id == ctx.report_id and key in asked:
                work.append((ctx, asked[key], group))
    # What the metric fixes once per release before judging it (uncited claim support binds its evidence
    # search), as the runner does: the slice's reports may belong to another release than the month's.
    for release_id in sorted({ctx.release_id for ctx, _, _ in work}):
        prepare_metric(engine, release_id, metric)
    hashes: list[str] = []
    if spec.is_local:  # a report's items in one call, as the runner asks them
        by_report: dict[int, tuple] = {}
        for ctx, item, _ in work:
            by_report.setdefault(ctx.report_id, (ctx, []))[1].append(item)
        local = {rid: iter(metric.judge_local(ctx, its)) for rid, (ctx, its) in by_report.items()}
        judgments = [next(local[ctx.report_id]) for ctx, _, _ in work]
    else:
        def one(entry):
            with track_requests() as found:
                judgment = metric.judge_llm(client, entry[0], entry[1])
            return judgment, found

        answered = client.map(one, work)
        judgments = [j for j, _ in answered]
        hashes = list(dict.fromkeys(h for _, found in answered for h in found))
    fresh: dict[str, str | None] = {}
    for (ctx, item, group), judgment in zip(work, judgments, strict=True):
        by_sub = {u.sub_key: u.judge_label
                  for u in metric.annotation_units(ctx, item, judgment.label if judgment.scored else None)}
        for s in group:
            if s.sub_key in by_sub:
                fresh[s.item_id] = by_sub[s.sub_key]
    return fresh, hashes


def _previous(engine: Engine, release_id: str, judge_config: str, metric: str) -> tuple[str | None, float | None]:
    """The judge's latest checked agreement on an earlier release (release ids sort by month, then version)."""
    with engine.connect() as conn:
        row = conn.execute(sa.text("""
            SELECT release_id, agreement FROM judge_drift_checks
            WHERE judge_config = :j AND metric = :m AND status = 'checked' AND agreement IS NOT NULL
              AND release_id COLLATE "C" < :r COLLATE "C"
            ORDER BY release_id COLLATE "C" DESC LIMIT 1"""), {"j": judge_config, "m": metric, "r": release_id}).first()
    return (row.release_id, row.agreement) if row else (None, None)


def _verdict(d: MetricDrift) -> None:
    """Set tripped and the message (naming the metric, its agreement, the drop and the threshold)."""
    if d.agreement is None:
        d.message = f"{d.metric}: no calibration item could be asked again (their reports changed); not checked"
        return
    below = d.agreement < d.min_agreement
    dropped = d.max_drop is not None and d.drop is not None and d.drop > d.max_drop + 1e-9
    d.tripped = below or dropped
    if d.previous_agreement is None:
        against = "no earlier month ("
    else:
        against = f"vs {d.previous_agreement:.2f} last month ({d.agreement - d.previous_agreement:+.2f}, "
    limits = f"threshold {d.min_agreement:.2f}" + (f", allowed drop {d.max_drop:.2f}" if dropped else "")
    d.message = (f"{'judge drift: ' if d.tripped else ''}{d.metric} agreement {d.agreement:.2f} {against}{limits}; "
                 f"{d.n_items} calibration items, reference: {d.reference_kind})")


def _audited_cost(engine: Engine, hashes: Sequence[str]) -> tuple[int, float | None]:
    """(requests, USD) of these llm_calls rows: the check's own calls, also when a retry replayed them."""
    if not hashes:
        return 0, 0.0
    with engine.connect() as conn:
        n, cost, priced = conn.execute(sa.text(
            "SELECT count(*), sum(cost_usd), count(cost_usd) FROM llm_calls WHERE request_hash = ANY(:h)"),
            {"h": list(hashes)}).one()
    return int(n), (float(cost) if priced == n and cost is not None else None)


# --- the month's check ------------------------------------------------------------------------------------

def _require_release(engine: Engine, release_id: str) -> None:
    with engine.connect() as conn:
        if conn.execute(sa.text("SELECT 1 FROM releases WHERE release_id = :r"), {"r": release_id}).first() is None:
            raise NotFound(f"release {release_id} does not exist (`deepscholar release list` lists them)")


def _metric_names(metrics: Sequence[str] | None) -> list[str]:
    if not metrics:
        return registry.annotatable_metric_names()
    return [annotatable_metric(m).name for m in dict.fromkeys(metrics)]  # InvalidInput for one without a judge


def check_drift(engine: Engine, release_id: str, spec: JudgeSpec = LOCAL_JUDGE, *,
                metrics: Sequence[str] | None = None, api_base: str | None = None, api_key: str | None = None,
                concurrency: int | None = None, settings: Settings | None = None,
                say: Callable[[str], None] = log.info, budget_usd: float | None = None,
                approved_usd: float | None = None) -> DriftCheck:
    """Re-judge every annotatable metric's calibration slice (or `metrics`') with the judge for month
    `release_id`, bypassing the cache, and store each metric's agreement and verdict (judge_drift_checks).

    `say` gets the predicted cost before anything is sent and the actual cost after. The check is paid from
    the month's judging budget (`budget_usd`: DEEPSCHOLAR_JUDGE_BUDGET_USD, which it may lower; `approved_usd`:
    the month's approved total, default the latest approved) and bounded by the calibration cost bound
    besides (budget.drift_limit). Predicted over either, it is refused: stored as refused (a checked row of the
    month is kept), nothing sent; stopped by either while it runs, the metrics not checked yet are stored as
    refused. The local judge is checked too: offline and free, it still shows a change of its model or code."""
    settings = settings or current_settings()
    _require_release(engine, release_id)

    slices, results = _calibration_slices(engine, _metric_names(metrics), spec, settings)
    predicted, total, counted = _predicted_costs(engine, spec, slices)
    say(f"judge drift check of {release_id} under {spec.config_id}: {sum(map(len, slices.values()))} calibration "
        f"items of {', '.join(slices) or 'no metric'}, {sum(_questions(i) for i in slices.values())} judge calls, "
        f"predicted cost {_money(total)}" + ("" if total is not None else f" ({_money(counted)} at the fallback "
                                              "price of an unpriced model)"))
    limit, refused = (None, None)
    if slices:  # nothing to check is nothing to pay for
        limit, refused = _drift_limit(engine, release_id, spec, counted, budget_usd, approved_usd)
    if refused:
        refused += "; nothing was sent (raise the bound or the month's budget to run it)"
        say(refused)
        results += _refused(settings, slices, predicted, refused)
        _store(engine, release_id, spec.config_id, results)
        return DriftCheck(release_id, spec.config_id, results, total, refused)

    clients = spec.clients_for(engine, slices, api_base=api_base or settings.judge_api_base, api_key=api_key,
                               concurrency=concurrency or settings.judge_concurrency, cache_salt=f"drift:{release_id}")
    with billing(scope_of("drift", release_id, spec.config_id)), spend_limit(limit):
        for name, items in slices.items():
            client = clients.get(spec.model_for(name))  # None for the local judge
            try:
                d = _check_metric(engine, release_id, spec, name, annotatable_metric(name), items, client,
                                  predicted[name], settings)
            except OverBudget as exc:  # the metrics not checked yet are refused, the checked ones kept
                refused = f"{exc}"
                say(refused)
                results += _refused(settings, {n: i for n, i in slices.items() if n not in {r.metric for r in results}},
                                    predicted, refused)
                break
            (log.warning if d.tripped else log.info)("%s (%s, %s)", d.message, release_id, spec.config_id)
            results.append(d)
    _store(engine, release_id, spec.config_id, results)
    check = DriftCheck(release_id, spec.config_id, results, total, refused)
    say(f"judge drift check of {release_id} under {spec.config_id}: {sum(d.requests for d in results)} requests, "
        f"actual cost {_money(check.cost_usd)} (predicted {_money(total)}); {check.summary}")
    return check


def _new_drift(settings: Settings, name: str, status: str, message: str, **values) -> MetricDrift:
    """A metric's drift result under this environment's bounds (the agreement floor, the allowed drop)."""
    return MetricDrift(name, status, message, settings.drift_min_agreement, settings.drift_max_drop, **values)


def _calibration_slices(engine: Engine, names: Sequence[str], spec: JudgeSpec,
                        settings: Settings) -> tuple[dict[str, list[SliceItem]], list[MetricDrift]]:
    """Each metric's calibration slice, and a `skipped` result for each metric that has none (no human
    labels and no judgments by this judge on a published release): those are reported, never checked."""
    slices: dict[str, list[SliceItem]] = {}
    skipped: list[MetricDrift] = []
    for name in names:
        items = calibration_slice(engine, name, spec.config_id, size=settings.calibration_items,
                                  source_release=settings.calibration_release)
        if items:
            slices[name] = items
        else:
            skipped.append(_new_drift(settings, name, "skipped", f"{name}: no calibration slice: no human labels "
                                      f"and no judgments by {spec.config_id} on a published release"))
    return slices, skipped


def _predicted_costs(engine: Engine, spec: JudgeSpec, slices: Mapping[str, list[SliceItem]]
                     ) -> tuple[dict[str, float | None], float | None, float]:
    """The predicted cost per metric's slice (None: the judge's price is unknown), their total (None when
    any is unknown), and the total as a budget counts it (an unpriced model at its fallback price): said, and
    held against the bounds, before anything is sent."""
    predicted: dict[str, float | None] = {}
    counted = 0.0
    with engine.connect() as conn:
        for name, items in slices.items():
            per_call, per_call_counted, _ = predicted_call_prices(conn, spec, name)
            predicted[name] = None if per_call is None else per_call * _questions(items)
            counted += per_call_counted * _questions(items)
    known = [p for p in predicted.values() if p is not None]
    return predicted, None if len(known) < len(predicted) else sum(known), counted


def _drift_limit(engine: Engine, release_id: str, spec: JudgeSpec, counted: float, budget_usd: float | None,
                 approved_usd: float | None) -> tuple[SpendLimit | None, str | None]:
    """budget.drift_limit with the month's budget (the operator's ceiling) and its latest approval by default."""
    from deepscholar.evaluation.money.budget import approved_total, drift_limit, run_budget

    approved = approved_total(engine, release_id, spec.config_id) if approved_usd is None else approved_usd
    return drift_limit(engine, release_id, spec, counted, budget_usd=run_budget(budget_usd), approved_usd=approved)


def _refused(settings: Settings, slices: Mapping[str, list[SliceItem]], predicted: Mapping[str, float | None],
             message: str) -> list[MetricDrift]:
    return [_new_drift(settings, name, "refused", message, reference_kind=items[0].reference_kind,
                       n_items=len(items), predicted_cost_usd=predicted[name]) for name, items in slices.items()]


def _check_metric(engine: Engine, release_id: str, spec: JudgeSpec, name: str, metric, items: list[SliceItem],
                  client, predicted: float | None, settings: Settings) -> MetricDrift:
    """Re-judge one metric's slice (`client`: None for the local judge) and compare with the reference labels
    and with the last checked month: the metric's `checked` result, its verdict set."""
    from deepscholar.llm.client import track_usage

    with track_usage() as usage:
        fresh, hashes = _rejudge(engine, metric, spec, client, items)
    asked = [s for s in items if s.item_id in fresh]
    pairs = [(s.reference_label, fresh[s.item_id]) for s in asked]
    agreement = rater_agreement.percent_agreement([ref or "" for ref, _ in pairs],
                                                  [_UNSCORED if got is None else got for _, got in pairs])
    previous_release, previous = _previous(engine, release_id, spec.config_id, name)
    requests, cost = _audited_cost(engine, hashes)
    d = _new_drift(settings, name, "checked", "", reference_kind=items[0].reference_kind, n_items=len(asked),
                   n_agree=sum(1 for ref, got in pairs if got is not None and ref == got),
                   n_unscored=sum(1 for _, got in pairs if got is None), n_missing=len(items) - len(asked),
                   agreement=agreement, previous_release_id=previous_release,
                   previous_agreement=previous, calls=usage.calls, requests=requests,
                   predicted_cost_usd=predicted, cost_usd=cost, request_hashes=hashes)
    _verdict(d)
    return d


_COLUMNS = ("status", "reference_kind", "n_items", "n_agree", "n_unscored", "n_missing", "agreement",
            "previous_release_id", "previous_agreement", "min_agreement", "max_drop", "tripped", "message", "calls",
            "requests", "predicted_cost_usd", "cost_usd", "request_hashes")


def _store(engine: Engine, release_id: str, judge_config: str, results: Sequence[MetricDrift]) -> None:
    """Upsert the month's rows; a refusal never replaces a row the month already checked."""
    now = datetime.now(UTC)
    rows = [{"release_id": release_id, "judge_config": judge_config, "metric": d.metric,
             **{c: getattr(d, c) for c in _COLUMNS}, "checked_at": now}
            for d in results if d.status != "skipped"]
    with engine.begin() as conn:
        if any(r["status"] == "refused" for r in rows):
            checked = set(conn.execute(sa.text(
                "SELECT metric FROM judge_drift_checks WHERE release_id = :r AND judge_config = :j "
                "AND status = 'checked'"), {"r": release_id, "j": judge_config}).scalars())
            rows = [r for r in rows if r["status"] == "checked" or r["metric"] not in checked]
        db.upsert(conn, "judge_drift_checks", rows, key=["release_id", "judge_config", "metric"])


def tripped_messages(engine: Engine, release_id: str, judge_config: str) -> list[str]:
    """The messages of the month's tripped drift checks under this judge (the run's final state quotes them)."""
    with engine.connect() as conn:
        return list(conn.execute(sa.text(
            "SELECT message FROM judge_drift_checks WHERE release_id = :r AND judge_config = :j AND tripped "
            "ORDER BY metric"), {"r": release_id, "j": judge_config}).scalars())


def format_drift(check: DriftCheck) -> str:
    """The check as a table (CLI), with its summary line."""
    from tabulate import tabulate

    def num(x: float | None) -> str:
        return "" if x is None else f"{x:.2f}"

    rows = [[d.metric, d.status, d.reference_kind or "", d.n_items, num(d.agreement), num(d.previous_agreement),
             "" if d.drop is None else f"{-d.drop:+.2f}", "TRIPPED" if d.tripped else "", d.requests,
             _money(d.predicted_cost_usd) if d.status != "skipped" else "",
             _money(d.cost_usd) if d.status == "checked" else ""] for d in check.metrics]
    table = tabulate(rows, headers=["metric", "status", "reference", "items", "agreement", "previous", "change",
                                    "alarm", "requests", "predicted", "cost"], disable_numparse=True)
    return f"{table}\n\n{check.summary}"


def check_month(engine: Engine, release_id: str, spec: JudgeSpec, metrics: Sequence[str] | None = None,
                say: Callable[[str], None] = log.info, *, budget_usd: float | None = None,
                approved_usd: float | None = None) -> DriftCheck:
    """The benchmark DAG's check: the run's metrics that a drift check can ask about (all of them when the
    run names none; a run restricted to judge-free metrics checks every annotatable one), within the run's
    budget and approval."""
    from deepscholar.evaluation.money.budget import drift_check_metrics

    return check_drift(engine, release_id, spec, metrics=drift_check_metrics(metrics), say=say,
                       budget_usd=budget_usd, approved_usd=approved_usd)
