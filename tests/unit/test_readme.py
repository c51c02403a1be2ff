"""README is the newcomer's first screen: short, its two commands real Makefile targets, its links alive."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_two_commands_are_make_targets_that_exist():
    first_block = re.search(r"```bash\n(.*?)```", README, flags=re.S)
    assert first_block, "README lacks its commands block"
    commands = [line.split("#")[0].strip() for line in first_block.group(1).splitlines() if line.strip()]
    assert commands == ["make demo", "make test"], commands
    targets = set(re.findall(r"^([a-z-]+):", (ROOT / "Makefile").read_text(encoding="utf-8"), flags=re.M))
    assert {"demo", "test"} <= targets
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
          if line.strip() and not line.lstrip().startswith("#")]
    assert ci[-1] == "make test", "CI runs README's test command last"


def test_it_stays_short_and_every_file_it_names_exists():
    assert len(README.splitlines()) <= 120
    named = set(re.findall(r"\b((?:docs|sql/queries|bench/results)/[\w./-]*\w)", README))
    assert "docs/OPERATIONS.md" in named and "docs/ARCHITECTURE.md" in named
    missing = sorted(p for p in named if not (ROOT / p).exists())
    assert not missing, f"README names files that do not exist: {missing}"
