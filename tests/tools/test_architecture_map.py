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
docs/ARCHITECTURE.md's import diagrams are the imports: every module named, every arrow an import.

The diagrams of its section "The layers" and of the sections under it (one a package:
m2sa_ros, m2sa_core, training) draw imports: a box is a module or a package, an arrow
``A --> B`` (``A -- "text" --> B`` and ``A -.-> B`` too) means *A imports B*, and an
arrow to or from a group (a ``subgraph``) stands for imports of or by some of the modules
in it. The data-flow diagrams further down draw data, not imports, and are not read.

What a box stands for is read from the first line of its label (up to ``<br/>``, words
in brackets left out): ``pipeline.py`` a module, ``bag/`` a package, ``m2sa_core`` a
package or module by name, several of them separated by ``·``, ``/`` or ``+``. A name is
looked up in the package of each enclosing group that names one, innermost first, then
in the package the section's heading names (``m2sa_ros: the node's rooms``), then from
the repository's root. A box whose first line names nothing (prose) stands for the
modules of its group that no other box names. A group none of whose boxes an arrow
touches is drawn whole: it is one box at that diagram's level (the layers' m2sa_core).

For each diagram the test asserts that

* every module (every ``.py`` but ``__init__.py``) of each top-level package the
  diagram names lies in a box: a new module is drawn where it belongs;
* every import from a module of one box to a module of another is drawn: an arrow from
  the importer's box, or a group around it, to the imported module's box, or a group
  around it (imports inside one box, and of third-party or standard modules, do not count);
* every arrow is backed by at least one import from a module it starts at to one it
  ends at.

Imports are read with ``ast`` as tests/tools/test_architecture_rules.py reads them (module
level, in functions, under ``TYPE_CHECKING``, ``import_module("a.literal")``); nothing is
imported. The interfaces colcon generates (``m2sa_ros.msg``, ``.srv``, ``.action``) count
as modules though they are not in the checkout. A failure names the module, the box or
the arrow, with the file and line of the imports behind it. The test also holds every
path the document writes in backticks (and each docs/*.md it names) to an existing file.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
import functools
from pathlib import Path
import re

import pytest
from test_architecture_rules import imports, module_name, python_files

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "ARCHITECTURE.md"
PACKAGES = ("m2sa_core", "m2sa_ros", "training", "bench", "scripts")
#: The interfaces colcon generates from msg/, srv/ and action/: imported, never in the checkout.
GENERATED = ("m2sa_ros.msg", "m2sa_ros.srv", "m2sa_ros.action")
#: The section whose diagrams (its own and its subsections') draw imports.
IMPORT_SECTION = "The layers"

_ARROW = re.compile(r'\s*(?:--\s*"[^"]*"\s*-->|-\.\s*"[^"]*"\s*\.->|(?:-->|-\.->|==>)(?:\|[^|]*\|)?)\s*')
_NODE = re.compile(r'(\w+)(?:\s*\[(?:"([^"]*)"|([^\]"]*))\])?')
_SUBGRAPH = re.compile(r'subgraph\s+(\w+)(?:\s*\["([^"]*)"\])?\s*$')
_NAME = re.compile(r"[A-Za-z_]\w*(?:/[A-Za-z_]\w*)*(?:\.py|/)?")
_FORMS = 'the reader knows boxes id["label"] and arrows -->, -- "text" -->, -.->'
_SKIP = ("%%", "flowchart", "graph ", "direction ", "classDef ", "class ", "style ", "linkStyle ")


@dataclass
class Box:
    """A box or a group of a diagram, with the line of the document where it first appears."""

    name: str
    label: str
    line: int
    group: str | None
    is_group: bool = False
    labelled: bool = True


@dataclass
class Diagram:
    """One mermaid block: its heading, boxes and groups by id, and arrows (from, to, line)."""

    heading: str
    section: str
    line: int
    boxes: dict[str, Box] = field(default_factory=dict)
    arrows: list[tuple[str, str, int]] = field(default_factory=list)
    unread: list[str] = field(default_factory=list)  # the lines the reader could not read


def mermaid_diagrams(text: str) -> list[Diagram]:
    """Read every mermaid block of a markdown text: boxes, groups and arrows."""
    diagrams: list[Diagram] = []
    section = heading = ""
    current: Diagram | None = None
    groups: list[str] = []
    in_code = False  # in a fenced block that is not mermaid: its lines are no headings
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if current is None:
            if in_code or (stripped.startswith("```") and stripped != "```mermaid"):
                in_code = in_code != stripped.startswith("```")
            elif line.startswith("#"):
                heading = line.lstrip("#").strip()
                if line.startswith("## "):
                    section = heading
            elif stripped == "```mermaid":
                current, groups = Diagram(heading, section, number), []
            continue
        if stripped == "```":
            diagrams.append(current)
            current = None
        elif not stripped or stripped.startswith(_SKIP):
            continue
        elif stripped == "end" and groups:
            groups.pop()
        elif match := _SUBGRAPH.match(stripped):
            gid, label = match.groups()
            current.boxes[gid] = Box(gid, label or gid, number, groups[-1] if groups else None, True)
            groups.append(gid)
        else:
            _read_statement(stripped, number, current, groups[-1] if groups else None)
    return diagrams


def _read_statement(text: str, number: int, diagram: Diagram, group: str | None) -> None:
    """Read ``a["label"] --> b -- "text" --> c``: the boxes it defines and the arrows between them."""
    ids, pos = [], 0
    while True:
        node = _NODE.match(text, pos)
        if node is None:
            diagram.unread.append(f"ARCHITECTURE.md:{number}: cannot read {text[pos:]!r} ({_FORMS})")
            return
        bid, quoted, bare = node.groups()
        label = quoted if quoted is not None else bare
        box = diagram.boxes.get(bid)
        if box is None:
            diagram.boxes[bid] = Box(bid, label if label is not None else bid, number, group,
                                     labelled=label is not None)
        elif label is not None:
            box.label, box.labelled = label, True
        ids.append(bid)
        pos = node.end()
        if pos == len(text):
            break
        arrow = _ARROW.match(text, pos)
        if arrow is None:
            diagram.unread.append(f"ARCHITECTURE.md:{number}: cannot read {text[pos:]!r} ({_FORMS})")
            return
        pos = arrow.end()
    diagram.arrows.extend((a, b, number) for a, b in zip(ids, ids[1:]))


def import_diagrams(text: str) -> list[Diagram]:
    """Return the diagrams that draw imports: those of :data:`IMPORT_SECTION` and its subsections."""
    return [d for d in mermaid_diagrams(text) if d.section == IMPORT_SECTION]


@dataclass(frozen=True)
class Modules:
    """The modules a diagram may name: dotted name -> file (None: generated), and which are package faces."""

    root: Path
    files: Mapping[str, Path | None]
    faces: frozenset[str]

    def resolve(self, name: str) -> str | None:
        """Return the longest known module that ``name`` names or lies inside (``a.b.func`` -> ``a.b``)."""
        while name:
            if name in self.files:
                return name
            name = name.rpartition(".")[0]
        return None

    def is_package(self, name: str) -> bool:
        return any(m.startswith(name + ".") for m in self.files)


def modules_of(root: Path, packages: Iterable[str], generated: Iterable[str] = ()) -> Modules:
    """Return every module under the given folders of ``root``, and the generated ones."""
    files: dict[str, Path | None] = {}
    faces = set()
    for path in python_files(root, *packages):
        name = module_name(path, root)
        files[name] = path
        if path.name == "__init__.py":
            faces.add(name)
    files.update((name, None) for name in generated)
    return Modules(root, files, frozenset(faces))


Edge = tuple[str, str, str]  # importer, imported module, "path:line"


def import_edges(modules: Modules) -> list[Edge]:
    """Return every import of one known module by another, with the place of the import statement."""
    edges = []
    for importer, path in modules.files.items():
        if path is None:
            continue
        for imp in imports(path, modules.root):
            target = modules.resolve(imp.target)
            if target is not None and target != importer:
                edges.append((importer, target, f"{path.relative_to(modules.root)}:{imp.line}"))
    return edges


class Map:
    """What each box of one diagram stands for, and the checks of it against the imports."""

    def __init__(self, diagram: Diagram, modules: Modules, root_package: str) -> None:
        self.diagram, self.modules, self.problems = diagram, modules, list(diagram.unread)
        self._places: dict[str, str | None] = {}
        boxes = diagram.boxes
        for a, b, line in diagram.arrows:
            for end in (a, b):
                if not boxes[end].labelled:  # mermaid draws a box of that name: a typo, most likely
                    self.problems.append(f"ARCHITECTURE.md:{line}: arrow to or from {end}, which no box defines")
        touched = {end for a, b, _ in diagram.arrows for end in (a, b)}
        # a group is drawn whole when no arrow touches anything inside it: then it is one box
        self.parent = {bid: box.group for bid, box in boxes.items()}
        self.whole = {g for g, box in boxes.items() if box.is_group
                      and not any(self._inside(bid, g) for bid in touched)}
        self.names: dict[str, list[str]] = {}
        for bid in self._by_depth():
            self.names[bid] = self._names(boxes[bid], root_package)
        self.claims: list[tuple[str, str, bool]] = []  # pattern, place, whether the place is a box
        for bid, box in boxes.items():
            place = self._outermost_whole(bid)
            is_unit = place != bid or not box.is_group or bid in self.whole
            names = self.names[bid]
            if not names and not box.is_group:
                group = box.group
                names = self.names.get(group, []) if group else []
                if not names:
                    self.problems.append(f"ARCHITECTURE.md:{box.line}: box {bid} ({box.label!r}) names no module "
                                         "and stands in no group that names one")
            self.claims.extend((name, place, is_unit) for name in names)

    def _ancestors(self, bid: str) -> list[str]:
        found, group = [], self.parent.get(bid)
        while group is not None:
            found.append(group)
            group = self.parent.get(group)
        return found

    def _inside(self, bid: str, group: str) -> bool:
        return group in self._ancestors(bid)

    def _outermost_whole(self, bid: str) -> str:
        wholes = [g for g in [bid, *self._ancestors(bid)] if g in self.whole]
        return wholes[-1] if wholes else bid

    def _by_depth(self) -> list[str]:
        return sorted(self.diagram.boxes, key=lambda bid: len(self._ancestors(bid)))

    def _contexts(self, box: Box, root_package: str) -> list[str]:
        contexts = []
        for group in self._ancestors(box.name):
            names = self.names.get(group, [])
            if len(names) == 1 and self.modules.is_package(names[0]):
                contexts.append(names[0])
        return [*contexts, root_package, ""] if root_package else [*contexts, ""]

    def _names(self, box: Box, root_package: str) -> list[str]:
        """Return the modules or packages the first line of a box's label names ([] for prose)."""
        first = re.split(r"<br\s*/?>", box.label)[0]
        first = re.sub(r"\([^)]*\)", " ", first)
        found, unknown = [], []
        for word in _NAME.findall(first):
            dotted = word.removesuffix(".py").rstrip("/").replace("/", ".")
            for context in self._contexts(box, root_package):
                name = f"{context}.{dotted}" if context else dotted
                if word.endswith(".py"):
                    ok = name in self.modules.files and name not in self.modules.faces
                elif word.endswith("/"):
                    ok = self.modules.is_package(name)
                else:
                    ok = name in self.modules.files or self.modules.is_package(name)
                if ok:
                    found.append(name)
                    break
            else:
                unknown.append(word)
        if found and unknown:
            self.problems.append(f"ARCHITECTURE.md:{box.line}: box {box.name} names {', '.join(unknown)}, "
                                 "which is no module or package here")
        return found

    def place(self, module: str) -> str | None:
        """Return the box or group a module lies in: the one naming it most closely (a box before a group)."""
        if module not in self._places:
            self._places[module] = self._place(module)
        return self._places[module]

    def _place(self, module: str) -> str | None:
        best: tuple[int, bool] | None = None
        places: set[str] = set()
        for pattern, place, is_unit in self.claims:
            if module == pattern or module.startswith(pattern + "."):
                rank = (len(pattern), is_unit)
                if best is None or rank > best:
                    best, places = rank, {place}
                elif rank == best:
                    places.add(place)
        if len(places) > 1:
            self.problems.append(f"{module}: named by more than one box ({', '.join(sorted(places))})")
        return min(places) if places else None

    def _is_unit(self, place: str) -> bool:
        box = self.diagram.boxes[place]
        return not box.is_group or place in self.whole

    def _up(self, place: str, other: str) -> list[str]:
        """Return the place and the groups around it that do not hold ``other`` too."""
        return [p for p in [place, *self._ancestors(place)] if not (p == other or self._inside(other, p))]

    def check(self, edges: list[Edge]) -> list[str]:
        """Return the modules no box names, the imports no arrow draws and the arrows no import backs."""
        problems = []
        tops = {pattern.partition(".")[0] for pattern, _, _ in self.claims}
        for module, path in sorted(self.modules.files.items()):
            if path is None or module in self.modules.faces or module.partition(".")[0] not in tops:
                continue
            place = self.place(module)
            if place is None or not self._is_unit(place):
                problems.append(f"{path.relative_to(self.modules.root)}: no box names this module")
        arrows = {(a, b) for a, b, _ in self.diagram.arrows}
        missing: dict[tuple[str, str], list[str]] = {}
        backed: set[tuple[str, str]] = set()
        for importer, target, where in edges:
            source, dest = self.place(importer), self.place(target)
            if source is None or dest is None or source == dest:
                continue
            if self._inside(source, dest) or self._inside(dest, source):
                continue  # inside one group: not drawn at this diagram's level
            ups, downs = self._up(source, dest), self._up(dest, source)
            drawn = {(a, b) for a in ups for b in downs} & arrows
            backed |= drawn
            if not drawn:
                missing.setdefault((source, dest), []).append(f"{where} imports {target}")
        for (source, dest), places in sorted(missing.items()):
            places = list(dict.fromkeys(places))
            more = f" and {len(places) - 3} more" if len(places) > 3 else ""
            problems.append(f"missing arrow {source} --> {dest}: {'; '.join(places[:3])}{more}")
        for a, b, line in self.diagram.arrows:
            if (a, b) not in backed:
                problems.append(f"ARCHITECTURE.md:{line}: arrow {a} --> {b}: no module of {a} imports one of {b}")
        return list(dict.fromkeys(self.problems + problems))


def root_package(diagram: Diagram, modules: Modules) -> str:
    """Return the package a section's heading names (``m2sa_ros: the node's rooms``), or ''."""
    first = diagram.heading.partition(":")[0].strip()
    return first if diagram.heading != diagram.section and modules.is_package(first) else ""


def check_document(text: str, root: Path, packages: Iterable[str],
                   generated: Iterable[str] = ()) -> dict[str, list[str]]:
    """Return each import diagram's problems, by the heading it stands under."""
    modules = modules_of(root, packages, generated)
    edges = import_edges(modules)
    return {d.heading: Map(d, modules, root_package(d, modules)).check(edges) for d in import_diagrams(text)}


#: The checkout's folders whose backticked paths the document must keep true.
FOLDERS = ("m2sa_ros", "m2sa_core", "training", "tests", "bench", "scripts", "docs", "config", "launch", "msg", "srv",
           "action")
_DOC = re.compile(r"(?<![\w/])docs/[A-Z_]+\.md")


def missing_paths(text: str, root: Path, folders: Iterable[str] = FOLDERS) -> list[str]:
    """
    Return each path the document names that is not in the checkout, with its line.

    A backticked path (``m2sa_ros/pipeline.py``, ``m2sa_core/data/synthetic/``, a glob like
    ``training/tiny/*.yaml``) and a ``docs/NAME.md`` must exist; in a table row's last
    cell, a backticked bare ``name.py`` after a backticked folder is that folder's file.
    """
    path_span = re.compile(rf"`((?:{'|'.join(map(re.escape, folders))})/[^`\s]*)`")
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        named = [*path_span.findall(line), *_DOC.findall(line)]
        if line.startswith("|"):
            folder = None
            for span in re.findall(r"`([^`]+)`", line.rstrip(" |").rpartition("|")[2]):
                if path_span.fullmatch(f"`{span}`") and span.endswith("/"):
                    folder = span
                elif folder and re.fullmatch(r"\w+\.py", span):
                    named.append(folder + span)
        for path in named:
            exists = any(root.glob(path.rstrip("/"))) if "*" in path else (root / path).exists()
            if not exists:
                found.append(f"ARCHITECTURE.md:{number}: {path}")
    return found


@functools.cache
def _repo() -> tuple[str, Modules, tuple[Edge, ...]]:
    modules = modules_of(REPO, PACKAGES, GENERATED)
    return DOC.read_text(encoding="utf-8"), modules, tuple(import_edges(modules))


def _headings() -> list[str]:
    return [d.heading for d in import_diagrams(DOC.read_text(encoding="utf-8"))]


def test_the_document_draws_the_layers_and_each_package():
    text, modules, _ = _repo()
    roots = [root_package(d, modules) for d in import_diagrams(text)]
    assert roots == ["", "m2sa_ros", "m2sa_core", "training"], (
        f'ARCHITECTURE.md: the import diagrams under "{IMPORT_SECTION}" are for {roots}; the test reads them by '
        "their headings (a package's name before the colon)")


@pytest.mark.parametrize("heading", _headings())
def test_each_diagram_names_every_module_and_draws_every_import(heading):
    text, modules, edges = _repo()
    diagram = next(d for d in import_diagrams(text) if d.heading == heading)
    problems = Map(diagram, modules, root_package(diagram, modules)).check(list(edges))
    assert not problems, (f'docs/ARCHITECTURE.md, the diagram under "{heading}" (an arrow A --> B: A imports B):\n  '
                          + "\n  ".join(problems))


def test_the_paths_the_document_names_exist():
    found = missing_paths(DOC.read_text(encoding="utf-8"), REPO)
    assert not found, "docs/ARCHITECTURE.md names paths that are not in the checkout:\n  " + "\n  ".join(found)


TOY_DOC = """# Toy

## The layers

```mermaid
flowchart TB
    subgraph app_group["app (a prose box stands for the rest of it)"]
        entry["the entry point and the rest"]
        io["io/"]
    end
    subgraph lib_group["lib (drawn whole: no arrow touches its boxes)"]
        core["core.py"]
    end
    entry --> io
    io -- "under TYPE_CHECKING" --> entry
    app_group --> lib_group
```

### app: the app's rooms

```mermaid
flowchart TB
    main["main.py<br/>the entry point"]
    subgraph io["io/ (input and output)"]
        reader["reader.py"]
        writer["writer.py"]
    end
    misc["util · config"]
    lib["lib"]
    main --> io
    main -- "read only" --> reader
    reader -.-> misc
    writer --> lib
    main --> lib
```

## From data to data

```mermaid
flowchart LR
    a["not a module"] --> b["nor this"]
```

| concern | module |
|---|---|
| the reader | `app/io/`: `reader.py`, `gone.py`; `app/main.py` |
"""


def test_the_checker_sees_an_unnamed_module_a_missing_arrow_and_an_extra_arrow(tmp_path):
    """
    Check a toy package against its toy map: one module unnamed, one import undrawn, one arrow unbacked.

    Its layers diagram passes only if a prose box is read as the rest of its group and a
    group no arrow enters as one box; a line the reader cannot read is said, not skipped.
    """
    files = {
        "app/__init__.py": "",
        "app/main.py": "from app.io import reader\n\n\ndef f():\n    import lib.core\n",
        "app/io/__init__.py": "",
        "app/io/reader.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from app.config import C\n",
        "app/io/writer.py": "import os\n",  # the arrow writer --> lib has no import behind it
        "app/io/cache.py": "from . import reader\n",  # named by no box; its import is inside the io group
        "app/util.py": "from app.config import C\n",  # inside one box: not drawn
        "app/config.py": "import importlib\nimportlib.import_module('lib.core')\n",  # misc --> lib is not drawn
        "lib/__init__.py": "",
        "lib/core.py": "",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    diagrams = mermaid_diagrams(TOY_DOC)
    assert [d.heading for d in diagrams] == ["The layers", "app: the app's rooms", "From data to data"]
    assert [d.heading for d in import_diagrams(TOY_DOC)] == ["The layers", "app: the app's rooms"]
    rooms = diagrams[1]
    assert rooms.arrows[:2] == [("main", "io", 30), ("main", "reader", 31)] and rooms.boxes["reader"].group == "io"
    assert check_document(TOY_DOC, tmp_path, ["app", "lib"]) == {
        "The layers": [],
        "app: the app's rooms": [
            "app/io/cache.py: no box names this module",
            "missing arrow misc --> lib: app/config.py:2 imports lib.core",
            "ARCHITECTURE.md:33: arrow writer --> lib: no module of writer imports one of lib",
        ],
    }
    assert missing_paths(TOY_DOC, tmp_path, ["app"]) == ["ARCHITECTURE.md:46: app/io/gone.py"]
    odd = mermaid_diagrams("## The layers\n```mermaid\nflowchart TB\n    a((round)) --> b\n```\n")[0]
    assert odd.unread == [f"ARCHITECTURE.md:4: cannot read '((round)) --> b' ({_FORMS})"]
