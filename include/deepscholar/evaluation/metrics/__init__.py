"""The core metrics, one module per metric, each exporting `METRIC`; prompts in prompts/<name>_vN.txt.

Which metrics exist, and in what order, is the registry's business (evaluation/metrics/registry.py), which
finds every module here by itself: adding a metric is adding a module.
"""

from __future__ import annotations

from deepscholar.evaluation.metrics import registry
from deepscholar.evaluation.metrics.base import Metric
from deepscholar.prompts import Prompt, load_prompt_file

__all__ = ["get_metric", "all_metrics", "load_metric_prompt"]


def get_metric(name: str) -> Metric:
    """The registered metric `name` (InvalidInput naming the known ones otherwise)."""
    return registry.get(name)


def all_metrics() -> list[Metric]:
    return registry.metrics()


def load_metric_prompt(name: str) -> Prompt:
    """prompts/<name>.txt beside the metric modules, e.g. load_metric_prompt("organization_v1")."""
    return load_prompt_file(__name__, name)
