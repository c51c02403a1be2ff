"""The local judge's model encodes on one thread per process unless OMP_NUM_THREADS says otherwise.

Each case runs in a fresh process: torch's thread count is process-wide and set once.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("sentence_transformers", reason="the local judge's model extras are not installed")

PROBE = ("import torch; from deepscholar.llm import local_judge; local_judge.load_model(); "
         "local_judge.embed(['one sentence']); print(torch.get_num_threads())")


@pytest.mark.parametrize(("omp", "threads"), [(None, 1), ("2", 2)], ids=["default-one", "operator-says-two"])
def test_the_model_runs_on_one_thread_unless_the_operator_sets_omp_num_threads(omp, threads):
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"} | ({"OMP_NUM_THREADS": omp} if omp else {})
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert int(done.stdout.split()[-1]) == threads
