"""A month's judging within a budget (DEEPSCHOLAR_JUDGE_BUDGET_USD, `deepscholar evaluate --max-cost`), and its
drift check's (a release's release-time judging has its own: release/steps.py, llm/spend.py `scope_limit`).

Design notes: docs/MODULE_NOTES.md, `deepscholar.evaluation.money.budget`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar.errors import OverBudget
from deepscholar.evaluation.judge_spec import JudgeSpec
from deepscholar.evaluation.metrics import registry
from deepscholar.evaluation.money.costs import (
    judging_scopes,
    month_judge_paid,
    predicted_call_prices,
    predicted_unit_costs,
    unbilled_judge_spend,
)
from deepscholar.llm.prices import usd_text
from deepscholar.llm.spend import Audited, SpendLimit, audit_of, scope_of
from deepscholar.settings import current_settings

__all__ = ["JudgingEstimate", "estimate_judging", "check_before_judging", "limit_for",
           "record_estimate", "run_budget", "judging_scope", "run_estimate", "approve_estimate", "approved_total",
           "drift_check_metrics", "drift_check_lines", "drift_limit", "DRIFT_CHECK"]

GO_ON = ("raise the budget (DEEPSCHOLAR_JUDGE_BUDGET_USD, or `deepscholar evaluate --max-cost`) and run again, "
         "or approve it (`--yes`)")
DRIFT_CHECK = "(drift check)"  # the estimate's line of the month's drift check, in place of a system


def run_budget(requested: float | None, ceiling: float | None = None) -> float | None:
    """A run's budget: the operator's (`ceiling`, default DEEPSCHOLAR_JUDGE_BUDGET_USD), which the run's own
    (`requested`: the DAG's `budget_usd` param) can lower but neither raise nor remove; None: no bound at all."""
    ceiling = current_settings().judge_budget_usd if ceiling is None else ceiling
    if requested is None or ceiling is None:
        return ceiling if requested is None else requested
    return min(float(requested), ceiling)


def judging_scope(release_id: str, spec: JudgeSpec) -> str:
    """The budget a month's judge requests under this judge are paid from (llm_calls.billed_to)."""
    return scope_of("judging", release_id, spec.config_id)


@dataclass(frozen=True)
class JudgingEstimate:
    """What judging the planned work should cost, per (system, metric, model), beside what is spent."""

    release_id: str
    judge_config: str
    lines: tuple[dict, ...]  # system_id, metric, model, reports, calls, cost_usd (None: no price), counted_usd
    spent_usd: float
    batch: bool = False  # priced at the batch API's rate

    @property
    def calls(self) -> float:
        return sum(line["calls"] for line in self.lines)

    @property
    def unpriced_models(self) -> list[str]:
        return sorted({line["model"] for line in self.lines if line["calls"] and line["cost_usd"] is None})

    @property
    def pricing(self) -> list[str]:
        """How the calls of each unpriced model are counted (its fallback price), one line per model."""
        return sorted({line["pricing"] for line in self.lines if line.get("pricing")})

    @property
    def cost_usd(self) -> float | None:
        """The predicted cost of the pending work; None when a model it needs has no price."""
        if self.unpriced_models:
            return None
        return float(sum(line["cost_usd"] or 0.0 for line in self.lines))

    @property
    def counted_usd(self) -> float:
        """The predicted cost as the budget counts it: unpriced models at their fallback price."""
        return float(sum(line.get("counted_usd") or 0.0 for line in self.lines))

    @property
    def month_total_usd(self) -> float:
        """The month's judging once this work is done, as the budget counts it: what is spent plus the
        prediction. What an approval of this estimate allows (plus the margin)."""
        return self.spent_usd + self.counted_usd

    def verdict(self, budget_usd: float | None) -> tuple[bool, str]:
        """(whether it needs an operator's approval, one line saying why or why not)."""
        what = (f"judging {self.release_id} under {self.judge_config}: {self.calls:,.0f} calls predicted"
                + (" (through the batch API, at its price)" if self.batch else ""))
        spent = f" ({usd_text(self.spent_usd)} already spent this month)" if self.spent_usd else ""
        counted = (f"; counted at {'; '.join(self.pricing)}: {usd_text(self.counted_usd)}" if self.pricing else "")
        if budget_usd is None:
            cost = usd_text(self.cost_usd) if self.cost_usd is not None else "unknown"
            return False, f"{what}, {cost}{spent}; no budget set{counted}"
        if self.cost_usd is None:
            return True, (f"{what}{spent}, at a cost nobody can predict: {', '.join(self.unpriced_models)} "
                          f"has no price, so the {usd_text(budget_usd)} budget cannot be checked at its own "
                          f"price{counted}, a month of {usd_text(self.month_total_usd)} that an approval allows "
                          f"(plus the {current_settings().judge_budget_margin:.0%} margin)")
        if self.spent_usd + self.cost_usd > budget_usd:
            return True, f"{what}, {usd_text(self.cost_usd)}{spent}: over the {usd_text(budget_usd)} budget"
        return False, f"{what}, {usd_text(self.cost_usd)}{spent}: within the {usd_text(budget_usd)} budget"

    def by(self, key: str) -> list[tuple[str, float, float | None]]:
        """(name, calls, USD or None) per system, metric or model, costliest first."""
        groups: dict[str, list[dict]] = {}
        for line in self.lines:
            groups.setdefault(line[key], []).append(line)
        out = []
        for name, lines in groups.items():
            calls = sum(x["calls"] for x in lines)
            costs = [x["cost_usd"] for x in lines if x["calls"]]
            out.append((name, calls, None if any(c is None for c in costs) else float(sum(costs))))
        return sorted(out, key=lambda g: (-(g[2] if g[2] is not None else float("inf")), g[0]))

    def table(self) -> str:
        """Markdown: the estimate by system, by metric and by model (what the approval shows)."""
        parts = []
        for key, title in (("system_id", "System"), ("metric", "Metric"), ("model", "Model")):
            rows = [f"| {name} | {calls:,.0f} | {'unknown' if cost is None else usd_text(cost)} |"
                    for name, calls, cost in self.by(key)]
            parts.append("\n".join([f"| {title} | Calls | USD |", "|---|---:|---:|", *rows]))
        return "\n\n".join(parts)


def estimate_judging(engine: Engine, release_id: str, units: Sequence[dict], spec: JudgeSpec, *,
                     batch: bool = False, extra_lines: Sequence[dict] = ()) -> JudgingEstimate:
    """The estimate of the planned units (jobs.plan_units) and the month's spend so far under this judge
    (`batch`: judged through the provider's batch API, at its price; `extra_lines`: more predicted work of
    the month's budget, e.g. its drift check)."""
    with engine.connect() as conn:
        lines = predicted_unit_costs(conn, spec, units, batch=batch)
    return JudgingEstimate(release_id, spec.config_id, (*lines, *extra_lines),
                           month_judge_paid(engine, release_id, spec.config_id).counted_usd, batch)


def _month_spend(engine: Engine, release_id: str, judge_config: str) -> Audited:
    """The month's spend as a limit re-reads it: the stored judgments' unbilled requests read once (they do
    not change while judging runs), the billed answers at every read."""
    with engine.connect() as conn:
        unbilled = unbilled_judge_spend(conn, release_id, judge_config)
    return audit_of(engine, judging_scopes(release_id, judge_config), unbilled.counted_usd)


def limit_for(engine: Engine, release_id: str, spec: JudgeSpec, budget_usd: float | None, *,
              approved_usd: float | None = None, margin: float | None = None) -> SpendLimit | None:
    """The running limit of a month's judging: the budget, or the month's total an operator approved when
    that is more, plus the margin; None without a budget or for the local judge (it costs nothing)."""
    if budget_usd is None or spec.is_local:
        return None
    margin = current_settings().judge_budget_margin if margin is None else margin
    allowed = max(budget_usd, approved_usd or 0.0)
    return SpendLimit(allowed * (1 + margin), f"judging {release_id} under {spec.config_id}",
                      audited=_month_spend(engine, release_id, spec.config_id), refresh_seconds=5.0,
                      how_to_go_on=f"; {GO_ON}", scope=judging_scope(release_id, spec))


def drift_check_metrics(metrics: Sequence[str] | None) -> list[str] | None:
    """The metrics a run's drift check asks about: the run's that a drift check can ask about; None (every
    annotatable metric) when the run names none of them."""
    names = [m for m in metrics or () if m in registry.annotatable_metric_names()]
    return names or None


def drift_check_lines(engine: Engine, spec: JudgeSpec, metrics: Sequence[str] | None) -> list[dict]:
    """The month's drift check as estimate lines: per metric, its slice's questions (the stored slice's, else
    DEEPSCHOLAR_CALIBRATION_ITEMS, the most a slice drawn later holds) at one call's predicted price."""
    if spec.is_local:
        return []
    with engine.connect() as conn:
        stored: dict[str, int] = dict(conn.execute(sa.text("""
            SELECT metric, count(DISTINCT (report_id, item_key)) FROM calibration_items WHERE judge_config = :j
            GROUP BY metric"""), {"j": spec.config_id}).all())
        lines = []
        for name in drift_check_metrics(metrics) or registry.annotatable_metric_names():
            calls = float(stored.get(name) or current_settings().calibration_items)
            listed, counted, pricing = predicted_call_prices(conn, spec, name)
            lines.append({"system_id": DRIFT_CHECK, "metric": name, "model": spec.model_for(name), "reports": 0,
                          "calls": calls, "cost_usd": None if listed is None else calls * listed,
                          "counted_usd": calls * counted, "pricing": pricing})
    return lines


def record_estimate(engine: Engine, estimate: JudgingEstimate, run_id: str, budget_usd: float | None) -> None:
    """Keep what a run predicted before judging (judging_estimates; the page and `deepscholar cost` set it
    beside what the month then cost, and the DAG's approval shows and records it). A retried estimate of the
    same run replaces its row, and any approval of the one before: an approval is of what it showed."""
    needs, line = estimate.verdict(budget_usd)
    with engine.begin() as conn:
        conn.execute(sa.text("""
            INSERT INTO judging_estimates (release_id, judge_config, run_id, transport, predicted_calls,
                                           predicted_usd, spent_before_usd, budget_usd, needs_approval,
                                           month_total_usd, pricing, detail)
            VALUES (:r, :j, :run, :t, :calls, :usd, :spent, :budget, :needs, :total, :pricing, :detail)
            ON CONFLICT (release_id, judge_config, run_id) DO UPDATE SET transport = EXCLUDED.transport,
                predicted_calls = EXCLUDED.predicted_calls, predicted_usd = EXCLUDED.predicted_usd,
                spent_before_usd = EXCLUDED.spent_before_usd, budget_usd = EXCLUDED.budget_usd,
                needs_approval = EXCLUDED.needs_approval, month_total_usd = EXCLUDED.month_total_usd,
                pricing = EXCLUDED.pricing, detail = EXCLUDED.detail, approved_usd = NULL, approved_by = NULL,
                approved_at = NULL, estimated_at = now()"""),
            {"r": estimate.release_id, "j": estimate.judge_config, "run": run_id,
             "t": "batch" if estimate.batch else "direct", "calls": estimate.calls, "usd": estimate.cost_usd,
             "spent": estimate.spent_usd, "budget": budget_usd, "needs": needs,
             "total": estimate.month_total_usd, "pricing": "; ".join(estimate.pricing) or None,
             "detail": f"{line}\n\n{estimate.table()}"})


def run_estimate(engine: Engine, run_id: str) -> dict | None:
    """A run's latest estimate as kept (judging_estimates): release_id, judge_config, needs_approval, detail
    (the line and the table), month_total_usd, the approval's columns. None: the run kept none (the local
    judge)."""
    with engine.connect() as conn:
        row = conn.execute(sa.text("""
            SELECT release_id, judge_config, run_id, needs_approval, detail, month_total_usd::float8 AS month_total_usd,
                   budget_usd::float8 AS budget_usd, approved_usd::float8 AS approved_usd, approved_by, approved_at
            FROM judging_estimates WHERE run_id = :run ORDER BY estimated_at DESC LIMIT 1"""),
            {"run": run_id}).mappings().first()
    return dict(row) if row else None


def approve_estimate(engine: Engine, estimate: dict, approved_by: str) -> float:
    """Record that `approved_by` approved a run's estimate (run_estimate's row): the month's total it allows."""
    with engine.begin() as conn:
        conn.execute(sa.text("""
            UPDATE judging_estimates SET approved_usd = month_total_usd, approved_by = :who, approved_at = now()
            WHERE release_id = :r AND judge_config = :j AND run_id = :run"""),
            {"who": approved_by, "r": estimate["release_id"], "j": estimate["judge_config"], "run": estimate["run_id"]})
    return float(estimate["month_total_usd"] or 0.0)


def approved_total(engine: Engine, release_id: str, judge_config: str, run_id: str | None = None) -> float | None:
    """The month's total an operator approved for this run (judging_estimates), or with no run the latest one
    approved for the month under this judge; None when nothing was approved."""
    with engine.connect() as conn:
        return conn.execute(sa.text("""
            SELECT approved_usd::float8 FROM judging_estimates
            WHERE release_id = :r AND judge_config = :j AND approved_usd IS NOT NULL
              AND (CAST(:run AS text) IS NULL OR run_id = :run)
            ORDER BY approved_at DESC LIMIT 1"""), {"r": release_id, "j": judge_config, "run": run_id}).scalar()


def check_before_judging(engine: Engine, release_id: str, units: Sequence[dict], spec: JudgeSpec,
                         budget_usd: float | None, *, approve: bool = False,
                         batch: bool = False) -> tuple[JudgingEstimate | None, SpendLimit | None]:
    """Before any request: (the estimate, the running limit; None for the local judge, the limit None
    without a budget). Raises OverBudget, having sent nothing, when the estimate needs an approval that
    `approve` does not give."""
    if spec.is_local:
        return None, None
    estimate = estimate_judging(engine, release_id, units, spec, batch=batch)
    if budget_usd is None:
        return estimate, None
    needs_approval, line = estimate.verdict(budget_usd)
    if needs_approval and not approve:
        raise OverBudget(f"{line}; nothing was sent (`deepscholar cost --release {release_id} --judge "
                         f"{spec.config_id.removeprefix('llm:')}` itemises it): {GO_ON}")
    return estimate, limit_for(engine, release_id, spec, budget_usd,
                               approved_usd=estimate.month_total_usd if approve else None)


def drift_limit(engine: Engine, release_id: str, spec: JudgeSpec, predicted_usd: float, *,
                budget_usd: float | None, approved_usd: float | None) -> tuple[SpendLimit | None, str | None]:
    """(the running limit of the month's drift check, or why it is refused before sending anything). The
    check is paid from the month's judging budget (`budget_usd`, or the month's total approved when more) and
    bounded by DEEPSCHOLAR_CALIBRATION_MAX_COST_USD besides: its prediction must fit both, and while it runs it
    stops once the month's spend passes either by the margin. None, None: no bound at all."""
    if spec.is_local:  # offline and free
        return None, None
    settings = current_settings()
    bound, margin = settings.calibration_max_cost_usd, settings.judge_budget_margin
    what = f"judge drift check of {release_id} under {spec.config_id}"
    audited = _month_spend(engine, release_id, spec.config_id)
    spent = audited({})[0]
    limits = []
    if bound is not None:
        if predicted_usd > bound:
            return None, (f"{what} refused: the predicted cost {usd_text(predicted_usd)} is over the bound "
                          f"DEEPSCHOLAR_CALIBRATION_MAX_COST_USD={bound:g}")
        limits.append(spent + bound * (1 + margin))
    if budget_usd is not None:
        allowed = max(budget_usd, approved_usd or 0.0)
        if spent + predicted_usd > allowed:
            return None, (f"{what} refused: the month has spent {usd_text(spent)} of its {usd_text(allowed)} budget "
                          f"and the check would cost {usd_text(predicted_usd)} more")
        limits.append(allowed * (1 + margin))
    if not limits:
        return None, None
    return SpendLimit(min(limits), what, audited=audited, refresh_seconds=5.0,
                      scope=scope_of("drift", release_id, spec.config_id)), None

