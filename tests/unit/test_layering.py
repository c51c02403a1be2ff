"""The library's import layering, checked on the source (every import, function-level ones included).

Three layers, each importing only its own layer and those below:
- foundations: text, sources, llm, db and the small shared modules (errors, clock, settings, gx, ...);
- the domain: release, systems, search, evaluation (and replay, the offline stand-in for the services);
- the edges: web, cli, the demo, reporting, Airflow helpers (and dags/, plugins/, outside the package).
Across packages only public names are imported: a leading underscore means "this package's business".
docs/ARCHITECTURE.md ("Layers") says where each concern lives.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "include" / "deepscholar"

LAYERS: dict[str, int] = {
    **dict.fromkeys(("errors", "clock", "text", "prompts", "progress", "http_guard", "rate_limit", "settings", "db", "connection_budget",
                     "migrations", "sources", "llm", "gx", "orchestration", "registry", "airflow_api"), 0),
    **dict.fromkeys(("release", "systems", "search", "evaluation", "replay"), 1),
    **dict.fromkeys(("web", "cli", "demo", "reporting", "local_airflow", "scheduling", "warm", "export", "__init__",
                     "__main__"), 2),
}


def _package_of(module: str) -> str:
    """deepscholar.systems.external.importer -> systems; deepscholar.errors -> errors."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _imports(path: Path) -> list[tuple[str, str, int]]:
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


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    return ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)


SOURCES = sorted(PACKAGE.rglob("*.py"))


def test_every_package_has_a_layer():
    unplaced = sorted({_package_of(_module_name(p)) for p in SOURCES} - set(LAYERS))
    assert not unplaced, f"place these in LAYERS (and in docs/ARCHITECTURE.md): {unplaced}"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_imports_a_higher_layer_or_another_packages_private_name(path):
    module = _module_name(path)
    here = _package_of(module)
    problems = []
    for target, name, line in _imports(path):
        there = _package_of(target)
        if LAYERS.get(there, 0) > LAYERS.get(here, 0):
            problems.append(f"line {line}: {here} (layer {LAYERS[here]}) imports {target} (layer {LAYERS[there]})")
        private = name.startswith("_") or any(p.startswith("_") and p not in ("__init__",)
                                              for p in target.split(".")[2:])
        if there != here and private:
            problems.append(f"line {line}: imports {target}.{name} — private to {there}")
    assert not problems, f"{module}:\n" + "\n".join(problems)
