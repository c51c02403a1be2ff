"""Heavy imports paid once per long-lived Airflow process instead of once per task.

Design notes: docs/MODULE_NOTES.md, `deepscholar.warm`.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
import time

from deepscholar.errors import InvalidInput
from deepscholar.settings import Settings, current_settings

__all__ = ["DEFAULT_WARM_IMPORTS", "WARM_IMPORTS_ENV", "forks_tasks", "warm_airflow_process", "warm_imports"]

log = logging.getLogger(__name__)

WARM_IMPORTS_ENV = "DEEPSCHOLAR_WARM_IMPORTS"
DEFAULT_WARM_IMPORTS = Settings.warm_imports


def forks_tasks(argv: list[str]) -> bool:
    """Whether this Airflow command is a process that forks task processes: the scheduler (whose
    LocalExecutor workers fork each task) or a Celery worker."""
    words = [os.path.basename(a) for a in argv[1:3]]
    return words[:1] == ["scheduler"] or words[:2] == ["celery", "worker"]


def warm_imports(names: tuple[str, ...] | list[str] | None = None) -> dict[str, float]:
    """Import each module now; returns seconds per module (0.0 when it was already imported)."""
    if names is None:
        names = current_settings().warm_imports
    took = {}
    for name in names:
        started = time.monotonic()
        try:
            importlib.import_module(name)
        except ImportError as exc:  # an optional extra not installed: the tasks will say so themselves
            log.warning("warm import of %s failed: %s", name, exc)
            continue
        took[name] = round(time.monotonic() - started, 2)
    if "litellm" in sys.modules:
        import litellm  # already imported above: only binds the name

        litellm.suppress_debug_info = True
    return took


def warm_airflow_process(argv: list[str] | None = None) -> dict[str, float]:
    """Warm this process if it forks Airflow tasks; nothing otherwise."""
    argv = sys.argv if argv is None else argv
    if not forks_tasks(argv):
        return {}
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never fetch the cost map at start-up
    try:
        took = warm_imports()
    except InvalidInput as exc:  # a malformed setting: the tasks will say so; warming is only a saving
        log.error("not warming this process: %s", exc)
        return {}
    if took:
        log.info("warmed for the tasks this process forks: %s", ", ".join(f"{k} {v} s" for k, v in took.items()))
    return took
