"""A month evaluated outside Airflow: judging, then the roll-up, in that order (`deepscholar evaluate`,
tests, benches). The benchmark DAG sequences the same two floors as tasks (its judge tasks, then roll_up);
here one function does, so that judging never calls up into boards."""

from __future__ import annotations

import contextlib
import importlib
import threading
from collections.abc import Sequence

from sqlalchemy.engine import Engine

from deepscholar.evaluation.judge_spec import JudgeSpec
from deepscholar.evaluation.judging.evaluate import judge_release

__all__ = ["evaluate_release"]

_ROLLUP = "deepscholar.evaluation.boards.rollup"


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
    timeout: float | None = None,
    roll_up: bool = True,
    tracks: Sequence[str] | None = None,
    budget_usd: float | None = None,
    approve_over_budget: bool = False,
    transport: str = "direct",
) -> dict:
    """The month judged (judging.evaluate.judge_release: what each keyword means), then, with `roll_up`, its
    boards rolled up under the judge. `judge`: the judge's text as `evaluate --judge` takes it (with
    `metric_models`, per-metric models), parsed here, once."""
    spec = JudgeSpec.parse(judge, metric_models)
    # The roll-up's imports (scipy.stats, pandas: about 1 s) load while an LLM judge waits for its provider.
    loading = _import_in_background(_ROLLUP) if roll_up and not spec.is_local else None
    result = judge_release(engine, release_id, spec, metrics=metrics, systems=systems, api_base=api_base,
                           concurrency=concurrency, timeout=timeout, tracks=tracks, budget_usd=budget_usd,
                           approve_over_budget=approve_over_budget, transport=transport)
    if roll_up:
        if loading is not None:
            loading.join()
        from deepscholar.evaluation.boards.rollup import roll_up as roll_up_month

        result["leaderboard_rows"] = len(roll_up_month(engine, release_id, spec.config_id))
    return result


def _import_in_background(module: str) -> threading.Thread:
    """Import `module` in a daemon thread; a failure is left for the caller's own import to raise."""
    def load() -> None:
        with contextlib.suppress(Exception):
            importlib.import_module(module)

    thread = threading.Thread(target=load, name=f"import {module}", daemon=True)
    thread.start()
    return thread
