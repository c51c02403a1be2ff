"""The metric registry: one module per metric, each exporting `METRIC`; prompts in prompts/<name>_vN.txt."""

from __future__ import annotations

import importlib

from deepscholar.evaluation.base import METRIC_ORDER, Metric
from deepscholar.prompts import Prompt, load_prompt_file

__all__ = ["METRIC_NAMES", "get_metric", "all_metrics", "load_metric_prompt"]

METRIC_NAMES: tuple[str, ...] = METRIC_ORDER


def get_metric(name: str) -> Metric:
    if name not in METRIC_NAMES:
        raise KeyError(f"unknown metric {name!r}; known: {', '.join(METRIC_NAMES)}")
    return importlib.import_module(f"{__name__}.{name}").METRIC


def all_metrics() -> list[Metric]:
    return [get_metric(n) for n in METRIC_NAMES]


def load_metric_prompt(name: str) -> Prompt:
    """prompts/<name>.txt beside the metric modules, e.g. load_metric_prompt("organization_v1")."""
    return load_prompt_file(__name__, name)
