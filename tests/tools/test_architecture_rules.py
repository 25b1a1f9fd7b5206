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
The rules the folders keep, checked on every change (the fast tier: ``ast`` only, nothing imported).

* **m2sa_ros is in rooms.** Only the process, the node and its orchestration sit directly
  in ``m2sa_ros/`` (:data:`TOP_LEVEL`); every other module is in the room (sub-package) of
  its concern (CONTRIBUTING.md, "Where new code goes"), and every room has an
  ``__init__.py`` whose docstring says what it holds (scripts/build_interfaces.sh links
  only folders that have one).
* **The product does not depend on the synthetic world.** No module of m2sa_core or
  m2sa_ros imports ``m2sa_core.data.synthetic``, but the world itself, the bag tools
  (``m2sa_ros/bag/``: they record bags from it) and the desk camera's synthetic source
  (:data:`SYNTHETIC_IMPORTERS`).
* **The benchmarks do not import the tests**: nothing under ``bench/`` imports ``tests``
  or a test helper by its name (``fake_models``, ``toy_batches``, ...); what both use lives
  where both may import it.

Every ``import`` counts, wherever it stands (module level, inside a function, under
``if TYPE_CHECKING:``), and so does ``importlib.import_module("a.literal.name")``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

#: The modules that stay directly in m2sa_ros/: the process, the node, the command
#: pipeline and the worker it runs on. Anything else goes in a room.
TOP_LEVEL = frozenset({"main", "perception_node", "command_intake", "pipeline", "worker"})

SYNTHETIC = "m2sa_core.data.synthetic"
#: Who in the product may import the synthetic world: a module (``package.*`` for every
#: module under it) and, where given, the class or function the import must stand in.
SYNTHETIC_IMPORTERS = (
    ("m2sa_core.data.synthetic.*", None),
    ("m2sa_ros.bag.*", None),
    ("m2sa_ros.tools.desk_camera", "SyntheticSource"),
)


@dataclass(frozen=True)
class Import:
    """One imported name (``a.b`` for ``from a import b``), its line and the classes and functions it stands in."""

    target: str
    line: int
    scope: tuple[str, ...]

    def where(self) -> str:
        return ".".join(self.scope) or "module level"


def module_name(path: Path, root: Path = REPO) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def python_files(root: Path, *folders: str) -> list[Path]:
    return [p for folder in folders for p in sorted((root / folder).rglob("*.py")) if "__pycache__" not in p.parts]


def imports(path: Path, root: Path = REPO) -> Iterator[Import]:
    """Yield each name ``path`` imports, with its scope: ``import a.b`` and ``from a import b`` both give ``a.b``."""
    module = module_name(path, root)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]

    def walk(node: ast.AST, scope: tuple[str, ...]) -> Iterator[Import]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                for alias in child.names:
                    yield Import(alias.name, child.lineno, scope)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = package
                    for _ in range(child.level - 1):
                        anchor = anchor.rpartition(".")[0]
                    base = f"{anchor}.{base}" if base else anchor
                for alias in child.names:
                    yield Import(f"{base}.{alias.name}", child.lineno, scope)
            elif (isinstance(child, ast.Call) and child.args and isinstance(child.args[0], ast.Constant)
                  and isinstance(child.args[0].value, str)
                  and getattr(child.func, "attr", getattr(child.func, "id", "")) in ("import_module", "__import__")):
                yield Import(child.args[0].value, child.lineno, scope)
            inner = scope + (child.name,) if isinstance(
                child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) else scope
            yield from walk(child, inner)

    yield from walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)), ())


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _allowed(module: str, scope: tuple[str, ...]) -> bool:
    for pattern, where in SYNTHETIC_IMPORTERS:
        matches = _within(module, pattern[:-2]) if pattern.endswith(".*") else module == pattern
        if matches and (where is None or where in scope):
            return True
    return False


def synthetic_imports(root: Path = REPO) -> list[str]:
    """``path:line imports name`` for each import of the synthetic world the product may not make."""
    found = []
    for path in python_files(root, "m2sa_core", "m2sa_ros"):
        module = module_name(path, root)
        for imp in imports(path, root):
            if _within(imp.target, SYNTHETIC) and not _allowed(module, imp.scope):
                found.append(f"{path.relative_to(root)}:{imp.line} imports {imp.target} ({imp.where()})")
    return sorted(set(found))


def bench_test_imports(root: Path = REPO) -> list[str]:
    """``path:line imports name`` for each import of ``tests`` or of a test helper by its name under bench/."""
    helpers = {p.stem for p in (root / "tests").glob("*.py")} - {"conftest"}
    found = []
    for path in python_files(root, "bench"):
        for imp in imports(path, root):
            top = imp.target.partition(".")[0]
            if top == "tests" or top in helpers or top == "conftest":
                found.append(f"{path.relative_to(root)}:{imp.line} imports {imp.target}")
    return sorted(set(found))


def loose_modules(root: Path = REPO) -> list[str]:
    """Name the modules directly in m2sa_ros/ that are not :data:`TOP_LEVEL`, and the rooms that say nothing."""
    package = root / "m2sa_ros"
    found = [f"m2sa_ros/{p.name}: not one of the top-level modules ({', '.join(sorted(TOP_LEVEL))}); "
             "put it in the room of its concern" for p in sorted(package.glob("*.py")) if p.stem not in TOP_LEVEL]
    for room in sorted(d for d in package.iterdir() if d.is_dir() and d.name != "__pycache__"):
        if not any(room.rglob("*.py")):
            continue
        init = room / "__init__.py"
        if not init.is_file():
            found.append(f"m2sa_ros/{room.name}/: no __init__.py (build_interfaces.sh links only a folder with one)")
        elif not ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))):
            found.append(f"m2sa_ros/{room.name}/__init__.py: no docstring saying what the room holds")
    return found


def test_m2sa_ros_modules_are_in_rooms():
    found = loose_modules()
    assert not found, 'm2sa_ros/ (CONTRIBUTING.md, "Where new code goes"):\n  ' + "\n  ".join(found)
    for name in TOP_LEVEL:
        assert (REPO / "m2sa_ros" / f"{name}.py").is_file(), f"TOP_LEVEL names m2sa_ros/{name}.py, which is gone"


def test_the_product_does_not_import_the_synthetic_world():
    found = synthetic_imports()
    assert not found, ("product code importing m2sa_core.data.synthetic (only the bag tools and the desk camera's "
                       "SyntheticSource may):\n  " + "\n  ".join(found))


def test_bench_does_not_import_the_tests():
    found = bench_test_imports()
    assert not found, "bench/ importing the tests (move what both use out of tests/):\n  " + "\n  ".join(found)


def test_the_rules_see_what_they_forbid(tmp_path):
    """Each check on a toy tree with one breach of each kind, and the allowed cases beside them."""
    files = {
        "m2sa_core/__init__.py": "",
        "m2sa_core/data/synthetic/__init__.py": "from m2sa_core.data.synthetic.world import W\n",
        "m2sa_core/data/synthetic/world.py": "W = 1\n",
        "m2sa_core/geometry/bad.py": "def f():\n    from m2sa_core.data import synthetic\n",
        "m2sa_ros/main.py": "",
        "m2sa_ros/loose.py": "import importlib\nimportlib.import_module('m2sa_core.data.synthetic.world')\n",
        "m2sa_ros/bag/__init__.py": '"""Bag tools."""\n',
        "m2sa_ros/bag/demo.py": "from m2sa_core.data.synthetic import main\n",
        "m2sa_ros/tools/__init__.py": '"""Tools."""\n',
        "m2sa_ros/tools/desk_camera.py": ("class SyntheticSource:\n    def open(self):\n"
                                          "        from m2sa_core.data.synthetic.world import W\n"
                                          "def elsewhere():\n    from m2sa_core.data.synthetic.world import W\n"),
        "m2sa_ros/nodoc/__init__.py": "",
        "m2sa_ros/nodoc/thing.py": "",
        "m2sa_ros/noinit/thing.py": "",
        "bench/__init__.py": "",
        "bench/ok.py": "from bench import common\nfrom m2sa_core.data.synthetic import world\n",
        "bench/bad.py": "from tests.toy_batches import fit_batch\n\n\ndef f():\n    import fake_models\n",
        "tests/toy_batches.py": "",
        "tests/fake_models.py": "",
        "tests/conftest.py": "",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert synthetic_imports(tmp_path) == [
        "m2sa_core/geometry/bad.py:2 imports m2sa_core.data.synthetic (f)",
        "m2sa_ros/loose.py:2 imports m2sa_core.data.synthetic.world (module level)",
        "m2sa_ros/tools/desk_camera.py:5 imports m2sa_core.data.synthetic.world.W (elsewhere)",
    ]
    assert bench_test_imports(tmp_path) == [
        "bench/bad.py:1 imports tests.toy_batches.fit_batch",
        "bench/bad.py:5 imports fake_models",
    ]
    assert [line.split(":")[0] for line in loose_modules(tmp_path)] == [
        "m2sa_ros/loose.py", "m2sa_ros/nodoc/__init__.py", "m2sa_ros/noinit/"]
