"""No import cycle, between the parts of any package at any depth or between modules (every import counted,
function-level ones too).

A cycle means neither side can be understood, loaded or tested without the other; a function-level
import only hides it from the interpreter. What two places share belongs in the lower one.
The graph is the one tests/unit/test_layering.py judges (support/source_imports.py).
"""

from __future__ import annotations

from collections import defaultdict

from support.source_imports import PACKAGE, SOURCES, imports, module_name

Edge = tuple[str, str]


def _resolve(target: str, name: str, modules: set[str]) -> str | None:
    """The module an import loads: `from deepscholar.x import y` is the module x.y when that exists, else x."""
    if name and f"{target}.{name}" in modules:
        return f"{target}.{name}"
    return target if target in modules else None


def _graph() -> tuple[dict[str, set[str]], dict[Edge, str]]:
    """Module -> the modules it imports, and one 'path:line' per edge for the failure message."""
    modules = {module_name(p) for p in SOURCES}
    graph: dict[str, set[str]] = defaultdict(set)
    where: dict[Edge, str] = {}
    for path in SOURCES:
        here = module_name(path)
        graph.setdefault(here, set())  # every module is a node, importing or not
        for target, name, line in imports(path):
            there = _resolve(target, name, modules)
            if there is None:
                continue
            graph[here].add(there)
            where.setdefault((here, there), f"{path.relative_to(PACKAGE.parent)}:{line}")
    return graph, where


def _parts_graphs(graph: dict[str, set[str]],
                  where: dict[Edge, str]) -> dict[str, tuple[dict[str, set[str]], dict[Edge, str]]]:
    """Per package, at every depth (the library itself included), the graph between its parts: its modules
    and sub-packages, a sub-package standing for everything below it. A module import is an edge of the one
    package that holds both sides in different parts (their deepest common package); a package's own
    `__init__` is the package, not one of its parts."""
    parts: dict[str, tuple[dict[str, set[str]], dict[Edge, str]]] = {}
    for module, targets in graph.items():
        for target in targets:
            a, b = module.split("."), target.split(".")
            common = 0
            while common < min(len(a), len(b)) and a[common] == b[common]:
                common += 1
            if common == 0 or common == len(a) or common == len(b):
                continue  # another library, or one side is the package holding the other
            package = ".".join(a[:common])
            here, there = ".".join(a[:common + 1]), ".".join(b[:common + 1])
            edges, places = parts.setdefault(package, (defaultdict(set), {}))
            edges[here].add(there)
            edges.setdefault(there, set())
            places.setdefault((here, there), f"{where[module, target]} ({module} -> {target})")
    return parts


def _cycles_among_parts(graph: dict[str, set[str]], where: dict[Edge, str]) -> str:
    """Every package's cycles among its parts, described; '' when there is none."""
    found = []
    for package, (edges, places) in sorted(_parts_graphs(graph, where).items()):
        cycles = [c for c in _strongly_connected(edges) if len(c) > 1]
        if cycles:
            found.append(f"in {package}:\n" + _describe(cycles, edges, places))
    return "\n".join(found)


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components, each sorted; iterative, so no recursion limit applies."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(sorted(component))
    return components


def _describe(components: list[list[str]], graph: dict[str, set[str]], where: dict[Edge, str]) -> str:
    lines = []
    for component in components:
        members = set(component)
        lines.append("cycle: " + ", ".join(component))
        lines += [f"  {a} -> {b}  at {where[a, b]}" for a in component for b in sorted(graph[a] & members)]
    return "\n".join(lines)


def test_no_cycle_among_the_parts_of_any_package_at_any_depth():
    """The top-level packages, evaluation's sub-packages, metrics' families, systems.external's formats, ..."""
    cycles = _cycles_among_parts(*_graph())
    assert not cycles, "parts of a package import each other; move what they share to the lower one:\n" + cycles


def test_no_cycle_between_modules():
    graph, where = _graph()
    cycles = [c for c in _strongly_connected(graph) if len(c) > 1 or c[0] in graph[c[0]]]
    assert not cycles, "modules import each other; move what they share to the lower one:\n" + _describe(
        cycles, graph, where)


def test_a_cycle_between_sub_packages_is_found_where_no_module_cycle_is():
    """Two sub-packages three levels down that import each other through different modules: no module cycle,
    and no cycle between top-level packages, but a cycle among x.y's parts."""
    graph = {"x.y.a.one": {"x.y.b.two"}, "x.y.b.three": {"x.y.a.four"}, "x.y.a.four": set(), "x.y.b.two": set(),
             "x.y.c": {"x.y.a.one"}}
    where = {(m, t): "here" for m, targets in graph.items() for t in targets}
    assert all(len(c) == 1 for c in _strongly_connected(graph))
    assert set(_parts_graphs(graph, where)) == {"x.y"}
    assert "cycle: x.y.a, x.y.b" in _cycles_among_parts(graph, where)
    graph["x.y.b.three"] = set()
    assert _cycles_among_parts(graph, where) == ""


def test_the_cycle_finder_finds_a_cycle():
    """The check itself: a three-module ring and a self-import are reported, a chain is not."""
    ring = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    components = _strongly_connected(ring)
    assert ["a", "b", "c"] in components and ["d"] in components and ["e"] in components
    assert all(len(c) == 1 for c in _strongly_connected({"a": {"b"}, "b": {"c"}, "c": set()}))
