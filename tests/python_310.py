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
Two static checks that Python files need nothing newer than Python 3.10 (ROS 2 Humble's).

test_python_versions runs them over the product, test_rosdep_keys over the registered
tests and what they load; here, not in either test module, because a test module never
imports another.

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
"""

from __future__ import annotations

import ast
from pathlib import Path
import subprocess
import sys

TARGET = (3, 10)
VERMIN_OPTIONS = ["--no-config-file", f"-t={TARGET[0]}.{TARGET[1]}-", "--violations", "--no-tips",
                  "--format", "parsable", "--eval-annotations", "--exclude", "str.decode"]


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
