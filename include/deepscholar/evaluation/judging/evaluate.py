"""A month judged outside Airflow (`deepscholar evaluate`, tests, benches): every (metric, system) unit in
this process with the functions the benchmark DAG's tasks run (runner.py for the direct transport,
batch_rounds.py for a provider's batch API), within the month's budget, then the roll-up."""

from __future__ import annotations

import contextlib
import importlib
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from sqlalchemy.engine import Engine

from deepscholar.errors import UserError
from deepscholar.evaluation.judging.batch_rounds import judge_by_batches
from deepscholar.evaluation.judging.judges import JudgeSpec
from deepscholar.evaluation.judging.runner import judge_units, run_summary
from deepscholar.settings import current_settings

if TYPE_CHECKING:
    from deepscholar.evaluation.budget import JudgingEstimate
    from deepscholar.llm.spend import SpendLimit

__all__ = ["evaluate_release"]


def evaluate_release(
    engine: Engine,
    release_id: str,
    *,
    judge: str = "local",
    metric_models: dict[str, str] | None = None,
    metrics: Sequence[str] | None = None,
    systems: Sequence[str] | None = None,
    api_base: str | None = None,
    concurrency: int | None = None,
    timeout: float | None = None,  # each direct request's, over the settings'
    roll_up: bool = True,
    tracks: Sequence[str] | None = None,
    budget_usd: float | None = None,
    approve_over_budget: bool = False,
    transport: str = "direct",
) -> dict:
    """Every (metric, system) unit in this process, then the roll-up. Without `metrics`: the core's and
    those of `tracks` (default DEEPSCHOLAR_TRACKS). `budget_usd` (default DEEPSCHOLAR_JUDGE_BUDGET_USD): the
    planned work's predicted cost is checked against it before any request (evaluation/budget.py: OverBudget,
    nothing sent, unless `approve_over_budget`); judging stops once the month's spend passes it by the margin;
    the estimate is kept once judged. `transport`: 'direct' or 'batch' (waited for in this process)."""
    from deepscholar.evaluation.budget import check_before_judging, judging_scope, record_estimate
    from deepscholar.evaluation.judging.jobs import plan_units, refresh_judging_statistics
    from deepscholar.llm.spend import billing, spend_limit
    from deepscholar.release.context import require_published

    require_published(engine, release_id)
    spec = JudgeSpec.parse(judge, metric_models)
    refresh_judging_statistics(engine)
    units = plan_units(engine, release_id, systems, metrics, spec, tracks=tracks)
    if not units:
        which = f" of {', '.join(systems)}" if systems else ""
        raise UserError(f"release {release_id} has no ok reports{which} to judge: write them first with "
                        f"`deepscholar reports generate --release {release_id}` (or the benchmark DAG), or import them "
                        "with `deepscholar reports import`")
    # The roll-up's imports (scipy.stats, pandas: about 1 s) load while the judge waits for its provider.
    budget = current_settings().judge_budget_usd if budget_usd is None else budget_usd
    estimate, limit = check_before_judging(engine, release_id, units, spec, budget, approve=approve_over_budget,
                                           batch=transport == "batch")
    loading = _import_in_background("deepscholar.evaluation.boards.rollup") if roll_up and not spec.is_local else None
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
    if roll_up:
        if loading is not None:
            loading.join()
        from deepscholar.evaluation.boards.rollup import roll_up as do_roll_up

        result["leaderboard_rows"] = len(do_roll_up(engine, release_id, spec.config_id))
    return result




def _judge_by_batches(engine: Engine, release_id: str, units: list[dict], spec: JudgeSpec, api_base: str | None,
                      concurrency: int | None, limit: SpendLimit | None,
                      estimate: JudgingEstimate | None) -> dict:
    """Judged through batches in this process; the run's cost is the month's spend since the estimate (the
    batches' answers were paid for in the steps, and the last pass answers from the cache)."""
    result = judge_by_batches(engine, release_id, units, spec, api_base=api_base, concurrency=concurrency,
                              limit=limit, summary=run_summary)
    if estimate is not None:
        from deepscholar.evaluation.costs import month_judge_spend

        result["cost_usd"] = month_judge_spend(engine, release_id, spec.config_id) - estimate.spent_usd
    return result


def _import_in_background(module: str) -> threading.Thread:
    """Import `module` in a daemon thread; a failure is left for the caller's own import to raise."""
    def load() -> None:
        with contextlib.suppress(Exception):
            importlib.import_module(module)

    thread = threading.Thread(target=load, name=f"import {module}", daemon=True)
    thread.start()
    return thread
