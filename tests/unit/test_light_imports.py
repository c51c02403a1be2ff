"""What a board reader's process imports: the registry names every metric by importing its module, and the
plain `leaderboard`, `cost` and `release list` commands read stored rows. None of them needs pandas or numpy
(a second of a cold command's start-up on a small machine), so a metric, the GX plumbing or the reporting
module that imported them at the top would make every board command slow again."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
from deepscholar.evaluation.metrics import registry
for family in registry.families():
    registry.metric_names(family)
import deepscholar.cli.boards, deepscholar.cli.release
from deepscholar.evaluation.boards.leaderboard import format_leaderboard, load_leaderboard
from deepscholar.reporting import format_releases, list_releases
from deepscholar.evaluation.money import costs
print(sorted(m for m in ("pandas", "numpy", "scipy", "great_expectations") if m in sys.modules))
"""


def test_board_readers_import_no_pandas_or_numpy():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout + out.stderr
