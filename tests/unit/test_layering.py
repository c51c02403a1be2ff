"""The library's import layering, checked on the source (every import, function-level ones included).

Three layers, each importing only its own layer and those below:
- foundations: text, sources, llm, db and the small shared modules (errors, clock, settings, gx, ...);
- the domain: release, systems, search, evaluation (and replay, the offline stand-in for the services);
- the edges: web, cli, the demo, reporting, Airflow helpers (and dags/, plugins/, outside the package).
Across packages only public names are imported: a leading underscore means "this package's business".
docs/ARCHITECTURE.md ("Layers") says where each concern lives. tests/unit/test_import_cycles.py checks the
same graph has no cycle.
"""

from __future__ import annotations

import pytest
from support.source_imports import PACKAGE, SOURCES, imports, module_name, package_of

LAYERS: dict[str, int] = {
    **dict.fromkeys(("errors", "clock", "text", "prompts", "progress", "http_guard", "rate_limit", "settings", "setting_kinds", "db", "connection_budget",
                     "migrations", "sources", "llm", "gx", "orchestration", "registry", "airflow_api"), 0),
    **dict.fromkeys(("release", "systems", "search", "evaluation", "replay"), 1),
    **dict.fromkeys(("web", "cli", "demo", "reporting", "local_airflow", "scheduling", "warm", "export", "__init__",
                     "__main__"), 2),
}


def test_every_package_has_a_layer():
    unplaced = sorted({package_of(module_name(p)) for p in SOURCES} - set(LAYERS))
    assert not unplaced, f"place these in LAYERS (and in docs/ARCHITECTURE.md): {unplaced}"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_imports_a_higher_layer_or_another_packages_private_name(path):
    module = module_name(path)
    here = package_of(module)
    problems = []
    for target, name, line in imports(path):
        there = package_of(target)
        if LAYERS.get(there, 0) > LAYERS.get(here, 0):
            problems.append(f"line {line}: {here} (layer {LAYERS[here]}) imports {target} (layer {LAYERS[there]})")
        private = name.startswith("_") or any(p.startswith("_") and p not in ("__init__",)
                                              for p in target.split(".")[2:])
        if there != here and private:
            problems.append(f"line {line}: imports {target}.{name} — private to {there}")
    assert not problems, f"{module}:\n" + "\n".join(problems)
