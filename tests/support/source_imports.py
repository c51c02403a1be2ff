"""The library's imports read from its source (an AST walk, so function-level imports count too).

Shared by the layering test and the import-cycle test: both judge the same graph.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "include" / "deepscholar"
SOURCES = sorted(PACKAGE.rglob("*.py"))


def package_of(module: str) -> str:
    """deepscholar.systems.external.importer -> systems; deepscholar.errors -> errors."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imports(path: Path) -> list[tuple[str, str, int]]:
    """(imported module, imported name or '', line) for every deepscholar import in a file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and (
                node.module == "deepscholar" or node.module.startswith("deepscholar.")):
            for alias in node.names:
                if node.module == "deepscholar":  # `from deepscholar import db`: a module
                    found.append((f"deepscholar.{alias.name}", "", node.lineno))
                else:
                    found.append((node.module, alias.name, node.lineno))
        elif isinstance(node, ast.Import):
            found += [(a.name, "", node.lineno) for a in node.names if a.name.startswith("deepscholar.")]
    return found


def module_name(path: Path) -> str:
    """include/deepscholar/systems/base.py -> deepscholar.systems.base; a package's __init__ -> the package."""
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    return ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
