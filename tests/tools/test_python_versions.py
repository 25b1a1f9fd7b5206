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
The product code stays runnable on Python 3.10, the interpreter of ROS 2 Humble.

No Humble wheels exist, so the node cannot be run on Humble here; what can be shown is
that nothing in the code needs a newer Python (docs/ROS_INTERFACE.md, "ROS 2 Humble").
Two static checks cover every product file (PRODUCT below; tests/ is left out: the suite
runs in the development environment that requirements.lock builds, and three test files
read pyproject.toml with ``tomllib``, which on 3.10 would need the extra ``tomli``):

* vermin (pinned in requirements.in) finds the standard-library modules, members,
  keyword arguments and syntax each file needs and the lowest Python that has them.
  Options, each on purpose:

  - ``-t=3.10-``: the minimum it infers must be 3.10 or lower; a file needing 3.11 is a
    violation. Python 2 is not a target, so its "!2" verdicts are no violation.
  - ``--violations`` with ``--format parsable``: only offending lines are printed, as
    ``file:line:col:py2:py3:feature``, so the assertion message is the list of them.
  - ``--no-tips``: tips suggest options (backports, annotation evaluation); noise here.
  - ``--no-config-file``: a vermin.ini / setup.cfg in or above the tree cannot change
    the rules behind the test's back.
  - ``--eval-annotations``: annotations are judged as if evaluated. Most modules start
    with ``from __future__ import annotations``, so theirs are never evaluated and this
    is stricter than needed there; but the ``__init__`` modules, setup.py and
    scripts/freeze_lock.py lack that import and do evaluate theirs, and stricter costs
    nothing today (the verdict is the same without it).
  - ``--exclude str.decode``: a false positive. vermin takes ``d["key"].decode()`` (a
    subscript with a string key, as in m2sa_core/data/rle.py) for Python 2's
    ``str.decode`` and then calls the whole run inconclusive (2.x-only against 3.7+).
    Python 3 has no ``str.decode``, so excluding it hides nothing about 3.10.
  - no ``--backport``: nothing imports a backport package (typing_extensions, ...);
    vermin does not flag third-party modules anyway.

  A deliberate exception on one line can be marked ``# novm`` (vermin reads comments).

* ``ast.parse(..., feature_version=(3, 10))``: vermin parses with the interpreter that
  runs it and reports syntax that interpreter rejects (3.12's ``type X = ...``, PEP 695
  generics, PEP 701 f-strings on a 3.11 venv) only as an "error:" line with exit status
  0; it is counted as a violation here, and the 3.10 grammar check rejects what the
  parser knows to be 3.11+ (``except*``). Neither catches a starred subscript
  (``x[*a]``, ``*args: *Ts``, PEP 646), so a small AST walk does.

test_the_checks_catch_newer_python proves on temporary files that each kind of 3.11+
construct makes the check fail and that 3.10 code passes.
"""

from __future__ import annotations

import ast
from pathlib import Path
import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("m2sa_core", "m2sa_ros", "training", "scripts", "launch", "examples", "bench", "setup.py")
# Top-level directories that hold no product source: build outputs, data, the suite itself.
NOT_PRODUCT = {"tests", "build", "install", "log", "runs", "data", "models", "docs"}
TARGET = (3, 10)
VERMIN_OPTIONS = ["--no-config-file", f"-t={TARGET[0]}.{TARGET[1]}-", "--violations", "--no-tips",
                  "--format", "parsable", "--eval-annotations", "--exclude", "str.decode"]


def _is_python_script(path: Path) -> bool:
    if path.suffix == ".py":
        return True
    try:
        with path.open("rb") as f:
            first = f.readline(200)
    except OSError:
        return False
    return first.startswith(b"#!") and b"python" in first


def python_files(roots: list[Path]) -> list[Path]:
    """Every .py file and python-shebang script under ``roots``."""
    files: list[Path] = []
    for root in roots:
        candidates = [root] if root.is_file() else sorted(root.rglob("*"))
        files += [p for p in candidates if p.is_file() and "__pycache__" not in p.parts and _is_python_script(p)]
    return files


def vermin_violations(files: list[Path]) -> list[str]:
    """Return vermin's offending lines (``file:line:col:py2:py3:feature``) for ``files``."""
    # vermin has no ``__main__``; its console script calls ``vermin.main()`` like this.
    run = "import sys, vermin; sys.exit(vermin.main())"
    proc = subprocess.run([sys.executable, "-c", run, *VERMIN_OPTIONS, *map(str, files)],
                          capture_output=True, text=True, timeout=120)
    # Per-file and overall summary lines have an empty feature field; the rest are findings.
    found = [line for line in proc.stdout.splitlines() if line.rsplit(":", 1)[-1].strip()]
    if proc.returncode not in (0, 1) or (proc.returncode == 1 and not found):
        found.append(f"vermin exited {proc.returncode}: {proc.stderr.strip() or proc.stdout.strip()}")
    return found


def _starred(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Starred) or (
        isinstance(node, ast.Tuple) and any(isinstance(e, ast.Starred) for e in node.elts))


def syntax_violations(files: list[Path]) -> list[str]:
    """Syntax that Python 3.10's parser rejects, as ``file:line: reason``."""
    found: list[str] = []
    for path in files:
        source = path.read_bytes()
        try:
            tree = ast.parse(source, filename=str(path), feature_version=TARGET)
        except SyntaxError as e:
            found.append(f"{path}:{e.lineno}: {e.msg}")
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Subscript) and _starred(node.slice):
                found.append(f"{path}:{node.lineno}: starred subscript needs Python 3.11")
            elif isinstance(node, ast.arguments) and node.vararg is not None \
                    and isinstance(node.vararg.annotation, ast.Starred):
                found.append(f"{path}:{node.vararg.lineno}: starred *args annotation needs Python 3.11")
    return found


def test_product_code_runs_on_python_3_10():
    files = python_files([ROOT / p for p in PRODUCT])
    assert len(files) > 100, f"only {len(files)} product files found"
    assert ROOT / "scripts" / "perception_node.py" in files
    problems = vermin_violations(files) + syntax_violations(files)
    assert not problems, "needs a Python newer than 3.10 (Humble):\n" + "\n".join(problems)


def test_every_source_directory_is_checked():
    """A new top-level package must join PRODUCT, or it would escape the check silently."""
    unchecked = [d.name for d in sorted(ROOT.iterdir())
                 if d.is_dir() and not d.name.startswith(".") and d.name not in NOT_PRODUCT
                 and d.name not in PRODUCT and python_files([d])]
    assert not unchecked, f"directories with Python code missing from PRODUCT: {unchecked}"


NEWER = {
    "except_star.py": "try:\n    pass\nexcept* ValueError:\n    pass\n",
    "tomllib_import.py": "import tomllib\n",
    "file_digest.py": "import hashlib\n\n\ndef f(fp):\n    return hashlib.file_digest(fp, 'sha1')\n",
    "typing_self.py": "from typing import Self\n",
    "exception_group.py": "raise ExceptionGroup('x', [ValueError()])\n",
    "starred_subscript.py": "a = (1,)\nd = {}\nx = d[*a]\n",
    "starred_vararg.py": "def f(*args: *tuple[int, ...]) -> None:\n    pass\n",
    "py312_generic.py": "def first[T](xs: list[T]) -> T:\n    return xs[0]\n",
}
OLDER = {
    # 3.10 is the target: its own features (match, PEP 604 unions at runtime) must pass.
    "py310.py": ("import dataclasses\n\n\n@dataclasses.dataclass(slots=True, kw_only=True)\nclass P:\n"
                 "    x: int | None = None\n\n\ndef g(v):\n    match v:\n        case P(x=None):\n"
                 "            return isinstance(v.x, int | None)\n    return zip([1], [2], strict=True)\n"),
    "subscript_key_decode.py": "def f(rle):\n    return rle['counts'].decode('ascii')\n",
}


def test_the_checks_catch_newer_python(tmp_path):
    for name, source in {**NEWER, **OLDER}.items():
        (tmp_path / name).write_text("from __future__ import annotations\n\n" + source)
    files = sorted(tmp_path.iterdir())
    problems = vermin_violations(files) + syntax_violations(files)
    flagged = {Path(line.split(":", 1)[0]).name for line in problems}
    assert flagged == set(NEWER), "\n".join(problems)
