"""What is measured: the registry (registry.py), what every metric shares (base.py), and one folder per
family (core/, race/, fact/, reportbench/, claims/), each holding its metrics (one module each, exporting
`METRIC`), its prompts (prompts/<name>_vN.txt) and, for a track, what it reads per query and builds at
release time. The registry finds the folders and their modules itself: adding a metric is adding a module,
adding a track is adding a folder (docs/ARCHITECTURE.md, "Adding a track").
"""

from __future__ import annotations

from deepscholar.evaluation.metrics import registry
from deepscholar.evaluation.metrics.base import Metric

__all__ = ["get_metric", "all_metrics"]


def get_metric(name: str) -> Metric:
    """The registered metric `name` (InvalidInput naming the known ones otherwise)."""
    return registry.get(name)


def all_metrics() -> list[Metric]:
    return registry.metrics()
