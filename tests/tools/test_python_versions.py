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
vermin and Python 3.10's grammar, in tests/python_310.py (with the reasons for each of
vermin's options), which test_rosdep_keys runs over the registered tests as well.

test_the_checks_catch_newer_python proves on temporary files that each kind of 3.11+
construct makes the check fail and that 3.10 code passes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from python_310 import syntax_violations, vermin_violations

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("m2sa_core", "m2sa_ros", "training", "scripts", "launch", "examples", "bench", "setup.py")
# Top-level directories that hold no product source: build outputs, data, the suite itself.
NOT_PRODUCT = {"tests", "build", "install", "log", "runs", "data", "models", "docs"}


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
