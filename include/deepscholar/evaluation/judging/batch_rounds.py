"""Judging a month through a provider's batch API, in rounds: collect → submit → wait → collect results →
judge again (llm/batch_transport.py does the requests and batches; this module, the judge's side).

Design notes: docs/MODULE_NOTES.md, `deepscholar.evaluation.judging.batch_rounds`.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Sequence

from sqlalchemy.engine import Engine

from deepscholar.errors import InfrastructureError, InvalidInput, OverBudget
from deepscholar.evaluation.judge_spec import JudgeSpec
from deepscholar.evaluation.judging.runner import JudgeRun, judge_units
from deepscholar.llm import batch_results, batch_transport
from deepscholar.llm.batch_transport import BatchQueue
from deepscholar.llm.prices import usd_text
from deepscholar.llm.spend import SpendLimit, billing
from deepscholar.settings import current_settings

__all__ = ["advance", "collect_round", "judge_by_batches", "submit_within", "MAX_ROUNDS"]

log = logging.getLogger("deepscholar.evaluation")

MAX_ROUNDS = 20  # a metric asks at most a few questions in a row (and re-asks); more rounds is a bug


def _check(spec: JudgeSpec, units: Sequence[dict]) -> None:
    if spec.is_local:
        raise InvalidInput("the local judge sends no requests: there is nothing to batch")
    models = {spec.model_for(u["metric"]) for u in units}
    unsupported = sorted(m for m in models if not batch_transport.supports(m))
    if unsupported:
        raise InvalidInput(f"judging through a batch API supports OpenAI's format (openai/<model>) only, not "
                           f"{', '.join(unsupported)}")


def collect_round(engine: Engine, release_id: str, units: Sequence[dict], spec: JudgeSpec, *, run_id: str,
                  api_base: str | None = None, concurrency: int | None = None) -> tuple[list[JudgeRun], int]:
    """One collect pass of run `run_id`: (the judge runs, report-metrics left waiting for a batch). 0
    waiting: done. The requests it records are billed to the month's judging (their answers will be)."""
    from deepscholar.evaluation.money.budget import judging_scope

    _check(spec, units)
    with billing(judging_scope(release_id, spec)):
        runs = judge_units(engine, release_id, units, spec, api_base=api_base, concurrency=concurrency,
                           batch=BatchQueue(release_id, spec.config_id, run_id))
    return runs, sum(r.awaiting_reports for r in runs)


_COUNTS = ("rounds", "batches", "answered", "retried", "failed", "polls")


def submit_within(engine: Engine, queue: BatchQueue, limit: SpendLimit | None, *,
                  api: batch_transport.Api | None = None) -> list[str]:
    """Submit the queue's waiting requests unless that would take the month past its limit (the spend so
    far and what they should cost at the batch price): then OverBudget, nothing sent. The keys of the
    batches sent."""
    _check_budget(engine, queue, limit)
    return batch_transport.submit_pending(engine, queue, api=api or batch_transport.default_api)


def _check_budget(engine: Engine, queue: BatchQueue, limit: SpendLimit | None) -> None:
    """Refuse a submission that would take the month past its limit (what was paid from its budget, and what
    the queue's waiting requests should cost at the batch price, unpriced models at their fallback)."""
    if limit is None:
        return
    from deepscholar.evaluation.money.costs import predicted_pending_batch_cost

    with engine.connect() as conn:
        pending_usd, unpriced = predicted_pending_batch_cost(conn, queue.release_id, queue.judge_config)
    spent = limit.refreshed()
    if spent + pending_usd > limit.limit_usd:
        raise OverBudget(f"{limit.what}: stopped at {usd_text(spent)} of {usd_text(limit.limit_usd)}; the next batch "
                         f"would cost about {usd_text(pending_usd)}"
                         + (f" (counting {unpriced} requests of unpriced models at their fallback price)"
                            if unpriced else "")
                         + f"; it was not submitted and its requests wait{limit.how_to_go_on}")


def _cancel_over_budget(engine: Engine, queue: BatchQueue, limit: SpendLimit | None,
                        api: batch_transport.Api) -> str | None:
    """While the queue's batches run: when what was paid plus what its submitted requests should cost passes
    the limit, cancel those batches through the provider's API; the line saying so, or None."""
    if limit is None:
        return None
    from deepscholar.evaluation.money.costs import predicted_batch_costs

    with engine.connect() as conn:
        running, _ = predicted_batch_costs(conn, queue.release_id, queue.judge_config, "submitted")
    spent = limit.refreshed()
    if not running or spent + sum(running.values()) <= limit.limit_usd:
        return None
    reason = (f"{limit.what}: cancelled at {usd_text(spent)} of {usd_text(limit.limit_usd)}, its running batches "
              f"would cost about {usd_text(sum(running.values()))} more")
    cancelled = batch_transport.cancel_batches(engine, [k for k in running if k], reason, api=api)
    if not cancelled:  # cancelling already: their end is awaited like any batch's
        return None
    return (f"{reason}: {len(cancelled)} batches cancelled; what they answered before the cancel is paid for "
            "anyway and kept, the rest waits")


def advance(engine: Engine, release_id: str, units: Sequence[dict], spec: JudgeSpec, *, run_id: str,
            api_base: str | None = None, concurrency: int | None = None, api: batch_transport.Api | None = None,
            limit: Callable[[], SpendLimit | None] | None = None) -> dict:
    """One step of run `run_id` judging through batches, on the month's queue under this judge config: ask
    about its running batches; while any runs (or one is not sent yet, or one's files could not be
    downloaded now), that is all. Else collect the ended ones, judge again from the cache and submit what
    is still missing, within `limit()` (made when something is to be submitted, or while batches run: then
    a batch that would pass it is cancelled). Returns the step's counts (_COUNTS), `waiting` (report-metrics
    still waiting for a batch), `status` (batch_transport.batch_status) and, when nothing waits any more,
    `runs` (the last pass's runs): then the units are judged."""
    queue = BatchQueue(release_id, spec.config_id, run_id)
    api = api or batch_transport.default_api
    step = dict.fromkeys(_COUNTS, 0)
    status = batch_transport.poll_batches(engine, queue, api=api)
    step["polls"] = 1
    if status["unsent"]:  # left half sent by a killed step (within the budget when they were batched), or
        # held by another sender (its lease runs out)
        step["batches"] += len(batch_transport.submit_pending(engine, queue, api=api, assign=False))
        status = batch_transport.batch_status(engine, queue)
    if status["open"] or status["unsent"]:
        if status["open"] and (cancelled := _cancel_over_budget(engine, queue, limit() if limit else None, api)):
            log.warning("%s", cancelled)
            return {**step, "waiting": None, "status": batch_transport.batch_status(engine, queue),
                    "cancelled": cancelled}
        return {**step, "waiting": None, "status": status}
    collected = batch_results.collect_results(engine, queue, api=api)
    for k in ("answered", "retried", "failed"):
        step[k] = collected[k]
    if collected["deferred"]:  # a file to download again at the next step: nothing to judge from yet
        return {**step, "waiting": None, "status": batch_transport.batch_status(engine, queue)}
    runs, waiting = collect_round(engine, release_id, units, spec, run_id=run_id, api_base=api_base,
                                  concurrency=concurrency)
    step["rounds"] = 1
    log.info("batch round of %s: %d report-metrics wait for a batch", release_id, waiting)
    if waiting:
        step["batches"] += len(submit_within(engine, queue, limit() if limit else None, api=api))
    out = {**step, "waiting": waiting, "status": batch_transport.batch_status(engine, queue)}
    if not waiting:
        out["runs"] = runs
    return out


def judge_by_batches(engine: Engine, release_id: str, units: Sequence[dict], spec: JudgeSpec, *,
                     api_base: str | None = None, concurrency: int | None = None, poll: float | None = None,
                     api: batch_transport.Api | None = None, sleep: Callable[[float], None] = time.sleep,
                     max_rounds: int = MAX_ROUNDS, limit: SpendLimit | None = None,
                     summary: Callable[[str, JudgeSpec, list[JudgeRun]], dict] | None = None,
                     run_id: str | None = None) -> dict:
    """Judge the units through the batch API until a collect pass finds nothing waiting, in this process
    (one run: `run_id`, default a new id for this call).

    `poll`: seconds between looks at running batches (default DEEPSCHOLAR_BATCH_POLL_SECONDS); `api`: the
    batch API client of an endpoint (default: OpenAI's, or `api_base`'s, with OPENAI_API_KEY); `limit`: the
    month's spend limit checked before each submission and while batches run. Returns the last pass's runs
    (everything judged from the cache then; `summary(release_id, spec, runs)` adds its keys, as `deepscholar
    evaluate` reports a direct run) and what the steps took: rounds, batches submitted, requests answered,
    re-submitted and failed."""
    poll = current_settings().batch_poll_seconds if poll is None else poll
    run_id = run_id or f"local-{uuid.uuid4().hex[:16]}"
    totals = dict.fromkeys(_COUNTS, 0)
    while True:
        step = advance(engine, release_id, units, spec, run_id=run_id, api_base=api_base, concurrency=concurrency,
                       api=api, limit=(lambda: limit) if limit else None)
        for k in _COUNTS:
            totals[k] += step[k]
        if "runs" in step:
            done = batch_summary(release_id, spec, step["runs"], totals)
            return done if summary is None else done | summary(release_id, spec, step["runs"])
        if step["rounds"] and totals["rounds"] >= max_rounds:
            raise InfrastructureError("batch judging", f"{step['waiting']} report-metrics still wait after "
                                      f"{max_rounds} rounds: {step['status']}")
        if not step["rounds"]:  # batches still running: look again later
            sleep(poll)


def batch_summary(release_id: str, spec: JudgeSpec, runs: Sequence[JudgeRun], totals: dict) -> dict:
    return {"release_id": release_id, "judge_config": spec.config_id, **totals,
            "runs": [r.as_dict() for r in runs], "reports_judged": sum(r.reports for r in runs),
            "unscored_reports": sum(r.unscored_reports for r in runs)}


def batch_job_step(engine: Engine, jobs: Sequence[dict], spec: JudgeSpec, *, run_id: str,
                   budget_usd: float | None = None, approved_usd: float | None = None) -> dict | None:
    """What one poke of the benchmark DAG's `judge_batches` sensor runs for run `run_id` (the Airflow run's
    id: every poke, retry and clear of it is the same run): one `advance` over every planned job's units (a
    month judged through batches is one set of batches, not one per job). None while batches run or were
    just submitted; the summary (as a direct judge job's, with the step's counts) once judged.

    `budget_usd` (DEEPSCHOLAR_JUDGE_BUDGET_USD, which it may lower, never raise: budget.run_budget) and
    `approved_usd` bound the month's spend as for a direct judge job (evaluation/money/budget.py `limit_for`),
    checked before each submission and while batches run. A batch cancelled for the budget fails the step
    once it is collected (OverBudget at the next submission)."""
    from deepscholar.evaluation.money.budget import limit_for, run_budget

    if not jobs:
        return {"reports_judged": 0, "rounds": 0, "batches": 0, "runs": []}
    release_id = jobs[0]["release_id"]
    units = [u for job in jobs for u in job["units"]]
    budget = run_budget(budget_usd)
    step = advance(engine, release_id, units, spec, run_id=run_id,
                   limit=lambda: limit_for(engine, release_id, spec, budget, approved_usd=approved_usd))
    log.info("judging %s through batches: %s; batches %s", release_id,
             "done" if "runs" in step else f"{step['waiting']} report-metrics wait" if step["rounds"]
             else "waiting for the provider", step["status"])
    if "runs" not in step:
        return None
    return batch_summary(release_id, spec, step["runs"], {k: step[k] for k in _COUNTS})
