"""Judging a month through a provider's batch API, in rounds: collect → submit → wait → collect results →
judge again (llm/batch_transport.py does the requests and batches; this module, the judge's side).

A collect pass (`collect_round`) is the ordinary judge (runner.judge_units) with clients in batch mode: what
the llm_calls cache answers is judged and stored as always; an item needing a request the cache cannot
answer records it and its report-metric is left unstored (no unscored row, nothing half-stored), while the
other items and reports go on, so their requests join the same batch. A question that depends on an earlier
answer (a second step, a re-ask after an unparseable answer) is recorded in a later round. A pass that finds
nothing waiting has judged everything from the cache: the judgments and scores are the ones the direct path
stores for the same answers.

`judge_by_batches` runs the rounds in one process (the CLI, tests, benches). A deferrable Airflow task runs
the steps apart instead, holding no worker slot while the provider works: `collect_round` and
`batch_transport.submit_pending` in one task, a trigger or a sensor in reschedule mode calling
`batch_transport.poll_batches` until nothing is open, then `batch_transport.collect_results` and the next
`collect_round`. Every step is idempotent (natural keys, upserts), so a retried or restarted task resumes
the same batches.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from sqlalchemy.engine import Engine

from deepscholar.errors import InfrastructureError, InvalidInput
from deepscholar.evaluation.judging.judges import JudgeSpec
from deepscholar.evaluation.judging.runner import JudgeRun, judge_units
from deepscholar.llm import batch_transport
from deepscholar.settings import current_settings

__all__ = ["collect_round", "judge_by_batches", "MAX_ROUNDS"]

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


def collect_round(engine: Engine, release_id: str, units: Sequence[dict], spec: JudgeSpec, *,
                  api_base: str | None = None, concurrency: int | None = None) -> tuple[list[JudgeRun], int]:
    """One collect pass: (the judge runs, report-metrics left waiting for a batch). 0 waiting: done."""
    _check(spec, units)
    runs = judge_units(engine, release_id, units, spec, api_base=api_base, concurrency=concurrency, batch=True)
    return runs, sum(r.awaiting_reports for r in runs)


def judge_by_batches(engine: Engine, release_id: str, units: Sequence[dict], spec: JudgeSpec, *,
                     api_base: str | None = None, concurrency: int | None = None, poll: float | None = None,
                     api: batch_transport.Api | None = None, sleep: Callable[[float], None] = time.sleep,
                     max_rounds: int = MAX_ROUNDS) -> dict:
    """Judge the units through the batch API until a collect pass finds nothing waiting, in this process.

    `poll`: seconds between looks at running batches (default DEEPSCHOLAR_BATCH_POLL_SECONDS); `api`: the
    batch API client of an endpoint (default: OpenAI's, or `api_base`'s, with OPENAI_API_KEY). Returns the
    last pass's runs (everything judged from the cache then) and what the rounds took: rounds, batches
    submitted, requests answered, re-submitted and failed."""
    poll = current_settings().batch_poll_seconds if poll is None else poll
    steps = {"api": api} if api is not None else {}
    totals = {"rounds": 0, "batches": 0, "answered": 0, "retried": 0, "failed": 0, "polls": 0}
    while True:
        totals["rounds"] += 1
        runs, waiting = collect_round(engine, release_id, units, spec, api_base=api_base, concurrency=concurrency)
        log.info("batch round %d of %s: %d report-metrics wait for a batch", totals["rounds"], release_id, waiting)
        if not waiting:
            return {"release_id": release_id, "judge_config": spec.config_id, **totals,
                    "runs": [r.as_dict() for r in runs],
                    "reports_judged": sum(r.reports for r in runs),
                    "unscored_reports": sum(r.unscored_reports for r in runs)}
        if totals["rounds"] >= max_rounds:
            raise InfrastructureError("batch judging", f"{waiting} report-metrics still wait after {max_rounds} "
                                      f"rounds: {batch_transport.batch_status(engine)}")
        totals["batches"] += len(batch_transport.submit_pending(engine, **steps))
        while True:
            status = batch_transport.poll_batches(engine, **steps)
            totals["polls"] += 1
            if status["unsent"]:  # another sender held one (its lease runs out if it died): try again
                totals["batches"] += len(batch_transport.submit_pending(engine, **steps))
            if not status["open"] and not status["unsent"]:
                break
            sleep(poll)
        collected = batch_transport.collect_results(engine, **steps)
        for k in ("answered", "retried", "failed"):
            totals[k] += collected[k]
