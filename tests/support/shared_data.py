"""Where the team's real test data (papers' LaTeX, the published benchmark slice) is found, and what a
test does when it is not there.

The data is never copied into this repository. It is read from `DEEPSCHOLAR_SHARED_FIXTURES` when
set, else from `shared/fixtures` beside the checkout. When the folder is missing, a test that needs it
is skipped with the path in the reason, so a lone clone still runs the rest of the suite; under CI
(`CI=true`) it fails instead, so a CI run can never pass without having read the real data.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NoReturn

import pytest

ENV_VAR = "DEEPSCHOLAR_SHARED_FIXTURES"
DEFAULT_ROOT = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures"
# Stands in for the folder list of a parametrized test when the data is missing, so that test still
# runs once and says why (skip or fail) instead of silently collecting an empty parameter set.
MISSING = "shared-fixtures-missing"


def shared_root() -> Path:
    override = os.environ.get(ENV_VAR, "").strip()
    return Path(override).expanduser() if override else DEFAULT_ROOT


def on_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def missing(path: Path) -> NoReturn:
    reason = (f"shared test data not found at {path} (put shared/ beside the repository "
              f"or set {ENV_VAR})")
    if on_ci():
        pytest.fail(f"{reason}; CI=true requires it", pytrace=False)
    pytest.skip(reason)


def require(*parts: str) -> Path:
    """The path of `parts` under the shared fixtures, or skip (fail on CI) when it does not exist."""
    if MISSING in parts:
        missing(shared_root().joinpath(*parts[:parts.index(MISSING)]))
    path = shared_root().joinpath(*parts)
    if not path.exists():
        missing(path)
    return path


def folder_names(*parts: str) -> list[str]:
    """Sub-folder names of a shared fixture folder, for `parametrize`; [MISSING] when it is absent."""
    root = shared_root().joinpath(*parts)
    if not root.is_dir():
        return [MISSING]
    return sorted(p.name for p in root.iterdir() if p.is_dir())
