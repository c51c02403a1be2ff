"""The fixture policy, proved on a real pytest run: missing shared test data skips locally, fails on CI.

Each case runs a small pytest subprocess that loads tests/conftest.py as a plugin and points
DEEPSCHOLAR_SHARED_FIXTURES somewhere of our choosing.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # runs pytest in subprocesses

TESTS_DIR = Path(__file__).resolve().parents[1]

PROBE = '''
import pytest
from support import shared_data

def test_uses_the_fixture(shared_fixtures):
    assert (shared_fixtures / "latex_real").is_dir()

@pytest.mark.parametrize("name", shared_data.folder_names("latex_real"))
def test_per_paper(name):
    assert (shared_data.require("latex_real", name) / "main.tex").is_file()
'''


def run_probe(tmp_path: Path, fixtures: Path, ci: bool) -> tuple[int, str]:
    (tmp_path / "test_probe.py").write_text(PROBE)
    env = {k: v for k, v in os.environ.items() if k not in {"CI", "PYTEST_ADDOPTS"}}
    env.update(PYTHONPATH=str(TESTS_DIR), DEEPSCHOLAR_SHARED_FIXTURES=str(fixtures))
    if ci:
        env["CI"] = "true"
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider", "-q", "-rsE",
         "test_probe.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    return out.returncode, out.stdout + out.stderr


def counts(output: str) -> dict[str, int]:
    return {kind: int(n) for n, kind in re.findall(r"(\d+) (passed|skipped|failed|errors?)\b", output)}


def test_missing_data_skips_with_the_path_in_the_reason(tmp_path):
    absent = tmp_path / "no-such-folder"
    code, output = run_probe(tmp_path, absent, ci=False)
    assert code == 0, output
    assert counts(output) == {"skipped": 2}, output
    assert f"shared test data not found at {absent}" in output
    assert "DEEPSCHOLAR_SHARED_FIXTURES" in output


def test_missing_data_fails_under_ci(tmp_path):
    absent = tmp_path / "no-such-folder"
    code, output = run_probe(tmp_path, absent, ci=True)
    assert code == 1, output
    # The fixture fails at setup (an error), the parametrized test in its body (a failure).
    assert counts(output) in ({"failed": 1, "error": 1}, {"failed": 1, "errors": 1}), output
    assert "CI=true requires it" in output
    assert "skipped" not in output


def test_the_override_is_where_the_data_is_read(tmp_path):
    data = tmp_path / "elsewhere"
    (data / "latex_real" / "paper_a").mkdir(parents=True)
    (data / "latex_real" / "paper_a" / "main.tex").write_text("\\section{Related Work}\n")
    code, output = run_probe(tmp_path, data, ci=True)
    assert code == 0, output
    assert counts(output) == {"passed": 2}, output
