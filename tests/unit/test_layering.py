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
    **dict.fromkeys(("web", "site", "cli", "demo", "reporting", "local_airflow", "scheduling", "warm", "export",
                     "__init__", "__main__", "budget_approval", "notifications"), 2),
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


# evaluation/'s parts stand on floors, bottom first: a module imports its own part and the floors below, never
# a floor above nor another part of its own floor. Metrics know no judge; JudgeSpec names one; money prices and
# bounds judging; judging stores judgments and scores; boards roll them up; judge validation reads all of them;
# pipeline sequences judging then the roll-up (the DAG does the same with tasks). docs/ARCHITECTURE.md, "Layers".
EVALUATION = "deepscholar.evaluation"
EVALUATION_FLOORS: tuple[tuple[str, ...], ...] = (
    ("metrics", "title_evidence"),
    ("judge_spec",),
    ("money",),
    ("judging",),
    ("boards",),
    ("judge_validation",),
    ("pipeline",),
)
FLOOR_OF = {part: n for n, parts in enumerate(EVALUATION_FLOORS) for part in parts}


def _evaluation_part(module: str) -> str | None:
    """deepscholar.evaluation.judging.runner -> judging; None outside evaluation or for its own __init__."""
    prefix = EVALUATION + "."
    return module[len(prefix):].split(".")[0] if module.startswith(prefix) else None


def _floor_problem(module: str, target: str) -> str | None:
    """Why `module` may not import `target` (an upward import, or a peer on its floor); None when it may."""
    here, there = _evaluation_part(module), _evaluation_part(target)
    if here is None or there is None or here == there:
        return None
    if FLOOR_OF[there] > FLOOR_OF[here]:
        return f"{here} (floor {FLOOR_OF[here]}) imports {there}, a floor above (floor {FLOOR_OF[there]})"
    if FLOOR_OF[there] == FLOOR_OF[here]:
        return f"{here} imports {there}, a part on its own floor ({FLOOR_OF[here]})"
    return None


def test_every_part_of_evaluation_stands_on_a_floor():
    folder = PACKAGE / "evaluation"
    parts = {p.stem for p in folder.glob("*.py") if p.stem != "__init__"} | {
        p.parent.name for p in folder.glob("*/__init__.py")}
    assert parts == set(FLOOR_OF), f"place these in EVALUATION_FLOORS: {sorted(parts - set(FLOOR_OF))}; " \
                                   f"gone: {sorted(set(FLOOR_OF) - parts)}"


@pytest.mark.parametrize("path", [p for p in SOURCES if _evaluation_part(module_name(p))],
                         ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_evaluation_module_imports_a_floor_above_its_own(path):
    module = module_name(path)
    problems = [f"line {line}: {problem}" for target, _, line in imports(path)
                if (problem := _floor_problem(module, target))]
    assert not problems, f"{module}:\n" + "\n".join(problems)


def test_the_floor_check_refuses_an_upward_import_and_a_peer():
    """A metric reaching into judging (the import that once closed evaluation's cycle) is refused, so is
    judging calling the roll-up; judging reading the registry or the pipeline calling the roll-up is not."""
    assert _floor_problem("deepscholar.evaluation.metrics.core.document_importance",
                          "deepscholar.evaluation.judging.report_contexts")
    assert _floor_problem("deepscholar.evaluation.judging.evaluate", "deepscholar.evaluation.boards.rollup")
    assert _floor_problem("deepscholar.evaluation.metrics.registry", "deepscholar.evaluation.title_evidence")
    assert _floor_problem("deepscholar.evaluation.judging.jobs", "deepscholar.evaluation.metrics.registry") is None
    assert _floor_problem("deepscholar.evaluation.pipeline", "deepscholar.evaluation.boards.rollup") is None
    assert _floor_problem("deepscholar.cli.boards", "deepscholar.evaluation.pipeline") is None


# evaluation/ is split by concern; each sub-package's __init__ names its public modules in `__all__`.
SUB_PACKAGES = ("deepscholar.evaluation.money", "deepscholar.evaluation.judging", "deepscholar.evaluation.boards",
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
