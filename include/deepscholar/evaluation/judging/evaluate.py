"""A month judged outside Airflow (`deepscholar evaluate`, tests, benches): every (metric, system) unit in
this process with the functions the benchmark DAG's tasks run (runner.py for the direct transport,
batch_rounds.py for a provider's batch API), within the month's budget; and the estimate of a month's
planned judging that the benchmark DAG's approval step reads. The roll-up comes after, from the caller
(evaluation/pipeline.py, the DAG's roll_up task): judging never reaches up into boards."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from sqlalchemy.engine import Engine

from deepscholar.errors import UserError
from deepscholar.evaluation.judge_spec import JudgeSpec
from deepscholar.evaluation.judging.batch_rounds import judge_by_batches
from deepscholar.evaluation.judging.runner import judge_units, run_summary
from deepscholar.settings import current_settings

if TYPE_CHECKING:
    from deepscholar.evaluation.money.budget import JudgingEstimate
    from deepscholar.llm.spend import SpendLimit

__all__ = ["judge_release", "estimate_for_month"]


def judge_release(
    engine: Engine,
    release_id: str,
    spec: JudgeSpec,
    *,
    metrics: Sequence[str] | None = None,
    systems: Sequence[str] | None = None,
    api_base: str | None = None,
    concurrency: int | None = None,
    timeout: float | None = None,  # each direct request's, over the settings'
    tracks: Sequence[str] | None = None,
    budget_usd: float | None = None,
    approve_over_budget: bool = False,
    transport: str = "direct",
) -> dict:
    """Every (metric, system) unit in this process. Without `metrics`: the core's and those of `tracks`
    (default DEEPSCHOLAR_TRACKS). `budget_usd` (default DEEPSCHOLAR_JUDGE_BUDGET_USD): the planned work's
    predicted cost is checked against it before any request (evaluation/money/budget.py: OverBudget, nothing
    sent, unless `approve_over_budget`); judging stops once the month's spend passes it by the margin; the
    estimate is kept once judged. `transport`: 'direct' or 'batch' (waited for in this process)."""
    from deepscholar.evaluation.judging.jobs import plan_units, refresh_judging_statistics
    from deepscholar.evaluation.money.budget import check_before_judging, judging_scope, record_estimate
    from deepscholar.llm.spend import billing, spend_limit
    from deepscholar.release.context import require_published

    require_published(engine, release_id)
    refresh_judging_statistics(engine)
    units = plan_units(engine, release_id, systems, metrics, spec, tracks=tracks)
    if not units:
        which = f" of {', '.join(systems)}" if systems else ""
        raise UserError(f"release {release_id} has no ok reports{which} to judge: write them first with "
                        f"`deepscholar reports generate --release {release_id}` (or the benchmark DAG), or import them "
                        "with `deepscholar reports import`")
    budget = current_settings().judge_budget_usd if budget_usd is None else budget_usd
    estimate, limit = check_before_judging(engine, release_id, units, spec, budget, approve=approve_over_budget,
                                           batch=transport == "batch")
    if transport == "batch":
        result = _judge_by_batches(engine, release_id, units, spec, api_base, concurrency, limit, estimate)
    else:
        with billing(judging_scope(release_id, spec)), spend_limit(limit):
            result = run_summary(release_id, spec, judge_units(engine, release_id, units, spec, api_base=api_base,
                                                           concurrency=concurrency, timeout=timeout))
    if estimate is not None:
        record_estimate(engine, estimate, f"cli:{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}", budget)
        result["budget"] = {"budget_usd": budget, "predicted_cost_usd": estimate.cost_usd,
                            "predicted_calls": round(estimate.calls, 1), "spent_before_usd": estimate.spent_usd,
                            "limit_usd": None if limit is None else limit.limit_usd,
                            "approved_over_budget": approve_over_budget and estimate.verdict(budget)[0]}
    return result


def estimate_for_month(engine: Engine, release_id: str, spec: JudgeSpec, budget_usd: float | None, *,
                       systems: Sequence[str] | None = None, metrics: Sequence[str] | None = None,
                       tracks: Sequence[str] | None = None, batch: bool = False,
                       run_id: str | None = None, drift_check: bool = False) -> dict:
    """What the benchmark DAG's approval step reads: whether judging the month's pending work (planned as
    the run's judge jobs are: jobs.plan_units with the same selection; with `drift_check`, the month's drift
    check too) needs an operator's approval, the one line saying why, the estimate by system, metric and model,
    and the month's total an approval allows (spent + predicted, unpriced models at their fallback price).
    `batch`: the run judges through the provider's batch API, priced at its rate. `run_id`: the estimate is
    kept as that run's (judging_estimates): what its approval shows and records, and what predicted against
    actual reads."""
    from deepscholar.evaluation.judging.jobs import plan_units
    from deepscholar.evaluation.money.budget import drift_check_lines, estimate_judging, record_estimate

    if spec.is_local:
        return {"release_id": release_id, "needs_approval": False,
                "line": f"judging {release_id} under {spec.config_id}: the local judge costs nothing", "table": "",
                "budget_usd": budget_usd, "predicted_usd": 0.0, "spent_usd": 0.0, "approved_total_usd": None}
    units = plan_units(engine, release_id, systems or None, metrics or None, spec, tracks=tracks)
    extra = drift_check_lines(engine, spec, metrics) if drift_check else []
    estimate = estimate_judging(engine, release_id, units, spec, batch=batch, extra_lines=extra)
    needs, line = estimate.verdict(budget_usd)
    if run_id is not None:
        record_estimate(engine, estimate, run_id, budget_usd)
    return {"release_id": release_id, "needs_approval": needs, "line": line, "table": estimate.table(),
            "budget_usd": budget_usd,
            "predicted_usd": estimate.cost_usd, "spent_usd": estimate.spent_usd,
            "approved_total_usd": estimate.month_total_usd, "pricing": estimate.pricing}


def _judge_by_batches(engine: Engine, release_id: str, units: list[dict], spec: JudgeSpec, api_base: str | None,
                      concurrency: int | None, limit: SpendLimit | None,
                      estimate: JudgingEstimate | None) -> dict:
    """Judged through batches in this process; the run's cost is the month's spend since the estimate (the
    batches' answers were paid for in the steps, and the last pass answers from the cache)."""
    result = judge_by_batches(engine, release_id, units, spec, api_base=api_base, concurrency=concurrency,
                              limit=limit, summary=run_summary)
    if estimate is not None:
        from deepscholar.evaluation.money.costs import month_judge_spend

        result["cost_usd"] = month_judge_spend(engine, release_id, spec.config_id) - estimate.spent_usd
    return result

