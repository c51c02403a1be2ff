"""The scheduler and Celery workers import litellm and the local judge's model code (sentence_transformers)
once, before they fork task processes; other Airflow processes do not pay it (Airflow's real settings
initialisation reading plugins/airflow_local_settings.py).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from deepscholar.warm import forks_tasks, warm_imports

pytestmark = pytest.mark.slow  # starts Airflow processes

PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_PROBE = """
import sys, time
sys.argv = {argv!r}
import airflow  # initialises settings: imports airflow_local_settings from the plugins folder
sys.stdout.flush()
print("PROBE", "litellm" in sys.modules and "sentence_transformers" in sys.modules, flush=True)
if "litellm" in sys.modules:
    import os
    pid = os.fork()  # what LocalExecutor does per task
    if pid == 0:
        started = time.monotonic()
        import litellm  # noqa: F401 - already there in the task process
        import sentence_transformers  # noqa: F401 - so is the local judge's model code
        print(f"PROBE {{time.monotonic() - started:.3f}}", flush=True)
        os._exit(0)
    os.waitpid(pid, 0)
"""


def _probe(argv: list[str], tmp_path, **env) -> list[str]:
    environ = {**os.environ, "AIRFLOW_HOME": str(tmp_path), "LITELLM_LOCAL_MODEL_COST_MAP": "True",
               "AIRFLOW__CORE__PLUGINS_FOLDER": os.path.join(PROJECT_ROOT, "plugins"),
               "AIRFLOW__CORE__LOAD_EXAMPLES": "False", **env}
    out = subprocess.run([sys.executable, "-c", _PROBE.format(argv=argv)], env=environ, capture_output=True,
                         text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    # Airflow may log to stdout too (e.g. writing a first config): only the probe's own lines count.
    return [line.split(" ", 1)[1] for line in out.stdout.splitlines() if line.startswith("PROBE ")]


@pytest.mark.parametrize("argv", [["airflow", "scheduler"], ["airflow", "celery", "worker", "-q", "x"]])
def test_processes_that_fork_tasks_are_warm_and_their_tasks_import_nothing(argv, tmp_path):
    warm, child_import_seconds = _probe(argv, tmp_path)
    assert warm == "True"
    assert float(child_import_seconds) < 0.05


@pytest.mark.parametrize("argv", [["airflow", "api-server"], ["airflow", "dag-processor"], ["airflow", "dags", "list"]])
def test_other_airflow_processes_start_as_before(argv, tmp_path):
    assert _probe(argv, tmp_path) == ["False"]


def test_warming_can_be_turned_off(tmp_path):
    assert _probe(["airflow", "scheduler"], tmp_path, DEEPSCHOLAR_WARM_IMPORTS="none") == ["False"]


def test_which_commands_fork_tasks():
    assert forks_tasks(["/venv/bin/airflow", "scheduler"]) and forks_tasks(["airflow", "celery", "worker"])
    assert not forks_tasks(["airflow", "celery", "flower"]) and not forks_tasks(["airflow", "standalone"])


def test_a_missing_module_is_reported_not_raised(caplog):
    assert warm_imports(["json", "no_such_module_anywhere"]).keys() == {"json"}
    assert "no_such_module_anywhere" in caplog.text
