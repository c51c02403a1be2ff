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

import ast

import pytest
from support.source_imports import PACKAGE, SOURCES, imports, module_name, package_of

LAYERS: dict[str, int] = {
    **dict.fromkeys(("errors", "clock", "text", "prompts", "family_packages", "progress", "http_guard", "url_bases", "rate_limit", "settings", "setting_kinds", "settings_docs", "db", "connection_budget", "warehouse_backup",
                     "migrations", "sources", "llm", "gx", "orchestration", "registry", "airflow_api"), 0),
    **dict.fromkeys(("release", "systems", "search", "evaluation", "replay"), 1),
    **dict.fromkeys(("web", "cli", "demo", "reporting", "local_airflow", "scheduling", "warm", "export", "__init__",
                     "__main__", "budget_approval", "notifications"), 2),
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


# evaluation/ is split by concern; each sub-package's __init__ names its public modules in `__all__`.
SUB_PACKAGES = ("deepscholar.evaluation.judging", "deepscholar.evaluation.boards",
                "deepscholar.evaluation.judge_validation")


def _public_modules(sub_package: str) -> set[str]:
    init = PACKAGE.parent.joinpath(*sub_package.split("."), "__init__.py")
    for node in ast.parse(init.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in node.targets):
            return set(ast.literal_eval(node.value))
    raise AssertionError(f"{init} names no public modules (__all__)")


def test_every_sub_package_names_its_public_modules_and_they_exist():
    for sub in SUB_PACKAGES:
        folder = PACKAGE.parent.joinpath(*sub.split("."))
        public = _public_modules(sub)
        assert public, sub
        assert all((folder / f"{m}.py").exists() and not m.startswith("_") for m in public), (sub, public)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_nothing_outside_an_evaluation_sub_package_imports_what_it_keeps_inside(path):
    """Boards and judge validation (and the edges) use judging's public modules only, and so on."""
    module = module_name(path)
    public = {sub: _public_modules(sub) for sub in SUB_PACKAGES}
    problems = []
    for target, name, line in imports(path):
        for sub in SUB_PACKAGES:
            if module == sub or module.startswith(sub + "."):
                continue
            if target == sub:
                member = name
            elif target.startswith(sub + "."):
                member = target[len(sub) + 1:].split(".")[0]
            else:
                continue
            if member not in public[sub]:
                problems.append(f"line {line}: imports {target}.{name}, which {sub} keeps inside "
                                f"(its public modules: {', '.join(sorted(public[sub]))})")
    assert not problems, f"{module}:\n" + "\n".join(problems)
