"""A month's judging within a budget (DEEPSCHOLAR_JUDGE_BUDGET_USD, `deepscholar evaluate --max-cost`).

Before any judge request, the work planned (jobs.plan_units: what is pending, reports of equal content
once) is priced per system, metric and model (costs.predicted_unit_costs) and added to what the month has
already cost under that judge (the audit trail). Within the budget, judging goes on; over it, or with a model
whose price is unknown, it waits for an operator's approval (the CLI's `--yes`) and otherwise ends with one
line saying what it would have cost, having sent nothing. While it runs, a SpendLimit (llm/spend.py) stops
it once the month's actual spend passes the budget by DEEPSCHOLAR_JUDGE_BUDGET_MARGIN, or what the operator
approved by that margin when they approved more than the budget.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar.errors import OverBudget
from deepscholar.evaluation.costs import month_judge_spend, predicted_unit_costs
from deepscholar.evaluation.judging.judges import JudgeSpec
from deepscholar.llm.spend import SpendLimit, dollars
from deepscholar.settings import current_settings

__all__ = ["JudgingEstimate", "estimate_judging", "estimate_for_month", "check_before_judging", "limit_for",
           "record_estimate"]

GO_ON = ("raise the budget (DEEPSCHOLAR_JUDGE_BUDGET_USD, or `deepscholar evaluate --max-cost`) and run again, "
         "or approve it (`--yes`)")


@dataclass(frozen=True)
class JudgingEstimate:
    """What judging the planned work should cost, per (system, metric, model), beside what is spent."""

    release_id: str
    judge_config: str
    lines: tuple[dict, ...]  # system_id, metric, model, reports, calls, cost_usd (None: no price)
    spent_usd: float
    batch: bool = False  # priced at the batch API's rate

    @property
    def calls(self) -> float:
        return sum(line["calls"] for line in self.lines)

    @property
    def unpriced_models(self) -> list[str]:
        return sorted({line["model"] for line in self.lines if line["calls"] and line["cost_usd"] is None})

    @property
    def cost_usd(self) -> float | None:
        """The predicted cost of the pending work; None when a model it needs has no price."""
        if self.unpriced_models:
            return None
        return float(sum(line["cost_usd"] or 0.0 for line in self.lines))

    @property
    def month_total_usd(self) -> float | None:
        """The month's judging once this work is done: what is spent plus the prediction (None: unpriced).
        What an approval of this estimate allows."""
        return None if self.cost_usd is None else self.spent_usd + self.cost_usd

    def verdict(self, budget_usd: float | None) -> tuple[bool, str]:
        """(whether it needs an operator's approval, one line saying why or why not)."""
        what = (f"judging {self.release_id} under {self.judge_config}: {self.calls:,.0f} calls predicted"
                + (" (through the batch API, at its price)" if self.batch else ""))
        spent = f" ({dollars(self.spent_usd)} already spent this month)" if self.spent_usd else ""
        if budget_usd is None:
            return False, f"{what}, {dollars(self.cost_usd) if self.cost_usd is not None else 'unknown'}{spent}; no budget set"
        if self.cost_usd is None:
            return True, (f"{what}{spent}, at a cost nobody can predict: {', '.join(self.unpriced_models)} "
                          f"has no price, so the {dollars(budget_usd)} budget cannot be checked")
        if self.spent_usd + self.cost_usd > budget_usd:
            return True, f"{what}, {dollars(self.cost_usd)}{spent}: over the {dollars(budget_usd)} budget"
        return False, f"{what}, {dollars(self.cost_usd)}{spent}: within the {dollars(budget_usd)} budget"

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
            rows = [f"| {name} | {calls:,.0f} | {'unknown' if cost is None else dollars(cost)} |"
                    for name, calls, cost in self.by(key)]
            parts.append("\n".join([f"| {title} | Calls | USD |", "|---|---:|---:|", *rows]))
        return "\n\n".join(parts)


def estimate_judging(engine: Engine, release_id: str, units: Sequence[dict], spec: JudgeSpec, *,
                     batch: bool = False) -> JudgingEstimate:
    """The estimate of the planned units (jobs.plan_units) and the month's spend so far under this judge
    (`batch`: judged through the provider's batch API, at its price)."""
    with engine.connect() as conn:
        lines = predicted_unit_costs(conn, spec, units, batch=batch)
    return JudgingEstimate(release_id, spec.config_id, tuple(lines),
                           month_judge_spend(engine, release_id, spec.config_id), batch)


def limit_for(engine: Engine, release_id: str, spec: JudgeSpec, budget_usd: float | None, *,
              approved_usd: float | None = None, margin: float | None = None) -> SpendLimit | None:
    """The running limit of a month's judging: the budget, or the month's total an operator approved when
    that is more, plus the margin; None without a budget or for the local judge (it costs nothing)."""
    if budget_usd is None or spec.is_local:
        return None
    margin = current_settings().judge_budget_margin if margin is None else margin
    allowed = max(budget_usd, approved_usd or 0.0)
    return SpendLimit(allowed * (1 + margin), f"judging {release_id} under {spec.config_id}",
                      audited=lambda: month_judge_spend(engine, release_id, spec.config_id),
                      how_to_go_on=f"; {GO_ON}")


def estimate_for_month(engine: Engine, release_id: str, judge: str | JudgeSpec, budget_usd: float | None, *,
                       systems: Sequence[str] | None = None, metrics: Sequence[str] | None = None,
                       tracks: Sequence[str] | None = None, batch: bool = False,
                       run_id: str | None = None) -> dict:
    """What the benchmark DAG's approval step reads (an XCom: plain values): whether judging the month's
    pending work (planned as the run's judge jobs are: jobs.plan_units with the same selection) needs an
    operator's approval, the one line saying why, the estimate by system, metric and model, and the month's
    total an approval allows (spent + predicted; None when a price is unknown). `batch`: the run judges
    through the provider's batch API, priced at its rate. `run_id`: the estimate is kept as that run's
    (judging_estimates), for predicted against actual."""
    from deepscholar.evaluation.judging.jobs import plan_units

    spec = JudgeSpec.of(judge)
    if spec.is_local:
        return {"release_id": release_id, "needs_approval": False,
                "line": f"judging {release_id} under {spec.config_id}: the local judge costs nothing", "table": "",
                "budget_usd": budget_usd, "predicted_usd": 0.0, "spent_usd": 0.0, "approved_total_usd": None}
    units = plan_units(engine, release_id, systems or None, metrics or None, spec, tracks=tracks)
    estimate = estimate_judging(engine, release_id, units, spec, batch=batch)
    needs, line = estimate.verdict(budget_usd)
    if run_id is not None:
        record_estimate(engine, estimate, run_id, budget_usd)
    return {"release_id": release_id, "needs_approval": needs, "line": line, "table": estimate.table(),
            "budget_usd": budget_usd,
            "predicted_usd": estimate.cost_usd, "spent_usd": estimate.spent_usd,
            "approved_total_usd": estimate.month_total_usd}


def record_estimate(engine: Engine, estimate: JudgingEstimate, run_id: str, budget_usd: float | None) -> None:
    """Keep what a run predicted before judging (judging_estimates; the page and `deepscholar cost` set it
    beside what the month then cost). A retried estimate of the same run replaces its row."""
    with engine.begin() as conn:
        conn.execute(sa.text("""
            INSERT INTO judging_estimates (release_id, judge_config, run_id, transport, predicted_calls,
                                           predicted_usd, spent_before_usd, budget_usd, needs_approval)
            VALUES (:r, :j, :run, :t, :calls, :usd, :spent, :budget, :needs)
            ON CONFLICT (release_id, judge_config, run_id) DO UPDATE SET transport = EXCLUDED.transport,
                predicted_calls = EXCLUDED.predicted_calls, predicted_usd = EXCLUDED.predicted_usd,
                spent_before_usd = EXCLUDED.spent_before_usd, budget_usd = EXCLUDED.budget_usd,
                needs_approval = EXCLUDED.needs_approval, estimated_at = now()"""),
            {"r": estimate.release_id, "j": estimate.judge_config, "run": run_id,
             "t": "batch" if estimate.batch else "direct", "calls": estimate.calls, "usd": estimate.cost_usd,
             "spent": estimate.spent_usd, "budget": budget_usd, "needs": estimate.verdict(budget_usd)[0]})


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
