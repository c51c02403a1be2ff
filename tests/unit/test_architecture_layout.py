"""docs/ARCHITECTURE.md's layout names every library module, so a newcomer finds each file where the map
says it is (and a new module is placed on the map when it is added).

The layout is the fenced block that starts with `include/deepscholar/`. A package's section starts at a
line `  <package>/` and runs until the next such line; a module is named when its file name (`runner.py`)
appears in its top-level package's section, or, for a module directly under include/deepscholar, on a
line of the block that starts no section. A folder written as `<folder>/<one ... per ...>` (one file per
metric, one module per format) covers every module in it. `__init__.py` files are left out: the package
line names them.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "include" / "deepscholar"
ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"
MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\.py")
SECTION = re.compile(r"^  ([a-z_]+)/")
ONE_PER = re.compile(r"([a-z_]+)/\s*<one [^>]* per [^>]*>")


def layout_block(text: str) -> list[str]:
    blocks = re.findall(r"```\n(include/deepscholar/\n.*?)```", text, flags=re.S)
    assert len(blocks) == 1, "docs/ARCHITECTURE.md must have exactly one layout block starting with include/deepscholar/"
    return blocks[0].splitlines()[1:]


def named_modules(lines: list[str]) -> tuple[dict[str, set[str]], set[str], dict[str, set[str]]]:
    """(package -> file names in its section, top-level file names, package -> folders it covers whole)."""
    sections: dict[str, set[str]] = {}
    folders: dict[str, set[str]] = {}
    top: set[str] = set()
    current: str | None = None
    for line in lines:
        if match := SECTION.match(line):
            current = match.group(1)
        elif not line.startswith("      "):
            current = None  # a line of top-level modules
        names = set(MODULE.findall(line))
        if current is None:
            top |= names
        else:
            sections.setdefault(current, set()).update(names)
            folders.setdefault(current, set()).update(ONE_PER.findall(line))
    return sections, top, folders


def unplaced(modules: list[Path], lines: list[str]) -> list[str]:
    sections, top, folders = named_modules(lines)
    missing = []
    for path in modules:
        rel = path.relative_to(PACKAGE)
        if rel.name == "__init__.py":
            continue
        if len(rel.parts) == 1:
            if rel.name not in top:
                missing.append(rel.as_posix())
            continue
        package = rel.parts[0]
        covered = any(folder in rel.parts[1:-1] for folder in folders.get(package, ()))
        if not covered and rel.name not in sections.get(package, set()):
            missing.append(rel.as_posix())
    return missing


def test_every_library_module_is_on_the_layout():
    modules = sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)
    missing = unplaced(modules, layout_block(ARCHITECTURE.read_text(encoding="utf-8")))
    assert not missing, ("docs/ARCHITECTURE.md's layout (the block starting include/deepscholar/) does not name "
                         "these modules; add each, with a few words on what it is for:\n  " + "\n  ".join(missing))


def test_the_check_finds_a_module_left_off(tmp_path):
    lines = ["  errors.py   failure families", "  evaluation/ runner.py", "              metrics/<one file per metric>"]
    package = tmp_path / "deepscholar"
    files = [package / "errors.py", package / "clock.py", package / "evaluation" / "runner.py",
             package / "evaluation" / "drift.py", package / "evaluation" / "metrics" / "organization.py"]
    relative = [PACKAGE / f.relative_to(package) for f in files]
    assert unplaced(relative, lines) == ["clock.py", "evaluation/drift.py"]
