# Copyright 2026 m2sa_ros maintainers
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.

"""
No import circle in the product: m2sa_core, m2sa_ros (bag/ too), training, bench and scripts.

Every ``import`` and ``from ... import`` counts, wherever it stands: at module level,
inside a function (a lazy import still ties the two modules) and under
``if TYPE_CHECKING:`` (a circle closed only for the type checker is still a circle for
a reader, and the first refactor that needs the name at run time makes it real), and so
does ``importlib.import_module("a.literal.name")`` (or ``__import__``), a lazy import
by name. The graph is read with ``ast``, so nothing is imported. An import of a package's face
(``from m2sa_core.inference import Segmenter``) is an edge to its ``__init__.py``;
importing a submodule draws no edge to the packages above it (Python runs their
``__init__`` first, but a package that hands its submodules' names on is no circle).

A failure names each circle as a path of modules, with the line of every import on it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("m2sa_core", "m2sa_ros", "training", "bench", "scripts")

Graph = dict[str, dict[str, int]]  # module -> {imported module: line of its first import}


def module_files(root: Path, packages: Iterable[str]) -> dict[str, Path]:
    """Dotted module name -> file, for every .py under the given top-level folders."""
    modules: dict[str, Path] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if "__pycache__" in parts:
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = path
    return modules


def _resolve(name: str, modules: Mapping[str, Path]) -> str | None:
    """Return the longest known module that ``name`` names or lies inside (``a.b.func`` -> ``a.b``)."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def _base(module: str, path: Path, node: ast.ImportFrom) -> str:
    """Return the absolute module a ``from`` import reads from (relative imports resolved)."""
    if not node.level:
        return node.module or ""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{node.module}" if node.module else package


def _dynamic_import(call: ast.Call) -> bool:
    """``importlib.import_module("name")``, ``import_module("name")`` or ``__import__("name")``."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return (name in ("import_module", "__import__") and bool(call.args) and isinstance(call.args[0], ast.Constant)
            and isinstance(call.args[0].value, str))


def import_graph(modules: Mapping[str, Path]) -> Graph:
    """Each module's imports of other known modules, every import statement in the file counted."""
    graph: Graph = {}
    for module, path in modules.items():
        edges: dict[str, int] = {}
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            targets: list[str | None] = []
            if isinstance(node, ast.Import):
                targets = [_resolve(alias.name, modules) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _base(module, path, node)
                # "from pkg import sub" imports the module pkg.sub; "from mod import name" imports mod
                targets = [_resolve(f"{base}.{alias.name}", modules) if f"{base}.{alias.name}" in modules
                           else _resolve(base, modules) for alias in node.names]
            elif isinstance(node, ast.Call) and _dynamic_import(node):
                targets = [_resolve(node.args[0].value, modules)]
            for target in targets:
                if target is not None and target != module:
                    edges[target] = min(edges.get(target, node.lineno), node.lineno)
        graph[module] = edges
    return graph


def circles(graph: Graph) -> list[list[str]]:
    """
    One circle (a closed path of modules, first repeated last) per strongly connected group.

    Tarjan's algorithm finds the groups of modules that reach each other; within each, a
    breadth-first search from its first module gives a shortest way back to it.
    """
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(start: str) -> None:  # iterative, so a deep chain of imports cannot overflow
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)

    found = []
    for group in sorted(groups):
        members, first = set(group), group[0]
        came_from: dict[str, str] = {}
        frontier = [first]
        while frontier and first not in came_from:
            nxt = []
            for node in frontier:
                for child in sorted(graph[node]):
                    if child in members and child not in came_from:
                        came_from[child] = node
                        nxt.append(child)
            frontier = nxt
        path = [first]
        while path[-1] != first or len(path) == 1:
            path.append(came_from[path[-1]])
        found.append(path[::-1])
    return found


def describe(circle: list[str], graph: Graph, modules: Mapping[str, Path], root: Path) -> str:
    """``a.py:12 imports b -> b.py:30 imports a``: each step of a circle with its import line."""
    steps = [f"{modules[a].relative_to(root)}:{graph[a][b]} imports {b}" for a, b in zip(circle, circle[1:])]
    return f"{len(circle) - 1} modules: " + " -> ".join(steps)


def test_the_product_has_no_import_circle():
    modules = module_files(REPO, PACKAGES)
    graph = import_graph(modules)
    found = [describe(c, graph, modules, REPO) for c in circles(graph)]
    assert not found, "import circles (TYPE_CHECKING and function-level imports count):\n  " + "\n  ".join(found)


def test_the_walker_sees_type_checking_and_function_level_imports(tmp_path):
    """The check above is only as good as its reading: a toy tree with each kind of hidden tie."""
    pkg = tmp_path / "toy"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from toy.sub.b import B\n")
    (pkg / "a.py").write_text("from toy.sub import b\n")
    (pkg / "sub" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from toy.a import A\nclass B: ...\n")
    (pkg / "c.py").write_text("def f():\n    from .d import g\n    return g\n")
    (pkg / "d.py").write_text("import importlib\ndef g():\n    return importlib.import_module('toy.c')\n")
    (pkg / "e.py").write_text("from toy.sub import B\n")  # the face, no circle
    modules = module_files(tmp_path, ["toy"])
    graph = import_graph(modules)
    assert graph["toy.a"] == {"toy.sub.b": 1} and graph["toy.sub.b"] == {"toy.a": 3}
    assert graph["toy.c"] == {"toy.d": 2} and graph["toy.d"] == {"toy.c": 3} and graph["toy.e"] == {"toy.sub": 1}
    assert circles(graph) == [["toy.a", "toy.sub.b", "toy.a"], ["toy.c", "toy.d", "toy.c"]]
    assert describe(circles(graph)[0], graph, modules, tmp_path) == \
        "2 modules: toy/a.py:1 imports toy.sub.b -> toy/sub/b.py:3 imports toy.a"
