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
package.xml is complete for rosdep, checked offline against rosdistro.

``rosdep install --from-paths . -y`` followed by ``colcon build`` and ``colcon test`` must
give a robot everything the package imports: the node, the bag tools, training, the
launch file, the example, and the tests CMakeLists.txt registers for ``colcon test``.
So every third-party module they import maps to one of:

* a ROS package released in Humble, Jazzy and Kilted (their distribution.yaml), which
  package.xml lists;
* a rosdep key of rosdep/base.yaml or rosdep/python.yaml that installs from the
  distribution's Ubuntu release through apt (as the ROS buildfarm requires: no pip
  keys), which package.xml lists;
* the pip-only model stack (torch, transformers, segment-anything, ...): installed from
  requirements-model.txt at the lock's exact versions into a venv over the ROS install
  (README, "On a ROS 2 install"), never through rosdep, even where rosdep has a key
  (Ubuntu's python3-torch is not the build the model is tested with, and the ``-pip``
  keys pin no version and have no rule on every platform). package.xml names each of
  them in its comment.

The keys and package lists come from rosdistro at the commit ros-src/rosdistro.repos pins
(``$ROS_SRC/rosdistro.tar.gz``; CI's offline mirror), extracted into build/rosdistro/ here:
read-only input, never committed.
"""

from __future__ import annotations

import ast
from collections import defaultdict
import hashlib
import os
from pathlib import Path
import re
import shutil
import sys
import tarfile
import tempfile

from catkin_pkg.package import parse_package
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
ROS_SRC = Path(os.environ.get("ROS_SRC", ROOT.parent / "shared" / "ros-src"))
TARBALL = ROS_SRC / "rosdistro.tar.gz"
DISTROS = ("humble", "jazzy", "kilted")

# Installed and run on the robot: imports need an exec (or plain) dependency.
PRODUCT = ("m2sa_core", "m2sa_ros", "training", "launch", "examples")
PRODUCT_SCRIPTS = ("scripts/perception_node.py",)
NOT_INSTALLED = ("training/tiny/research",)  # the research bench: never imported, not a package
FIRST_PARTY = {"m2sa_core", "m2sa_ros", "training", "bench", "scripts", "tests"}

# A module whose ROS package has another name (ROS 2 ships tf2_ros's Python side as tf2_ros_py).
ROS_MODULE_PACKAGES = {"tf2_ros": "tf2_ros_py"}
# Python libraries with apt rosdep keys.
PYTHON_KEYS = {
    "numpy": "python3-numpy",
    "cv2": "python3-opencv",
    "yaml": "python3-yaml",
    "scipy": "python3-scipy",
    "tqdm": "python3-tqdm",
    "psutil": "python3-psutil",
    "PIL": "python3-pil",
    "matplotlib": "python3-matplotlib",
    "hypothesis": "python3-hypothesis",
    "filelock": "python3-filelock",
    "pytest": "python3-pytest",
    "catkin_pkg": "python3-catkin-pkg-modules",
}
# The pip-only model stack: import name -> distribution pinned in requirements-model.txt.
MODEL_STACK = {
    "torch": "torch",
    "transformers": "transformers",
    "tokenizers": "tokenizers",
    "peft": "peft",
    "segment_anything": "segment-anything",
    "safetensors": "safetensors",
    "bitsandbytes": "bitsandbytes",
    "pycocotools": "pycocotools",
    "rosbags": "rosbags",
}
INSTALLERS = {"apt", "pip", "source", "homebrew", "dnf", "yum", "pacman", "portage", "nix", "apk", "zypper"}


# ----------------------------------------------------------------------------- rosdistro
def _extract(tarball: Path) -> Path:
    """Return rosdistro's rosdep rules and package lists, unpacked once per tarball under build/."""
    if not tarball.is_file():
        message = (f"{tarball}: not found; rosdistro.tar.gz at the commit ros-src/rosdistro.repos pins is needed "
                   f"(set ROS_SRC to the offline mirror that holds it)")
        if "ROS_SRC" in os.environ:  # a mirror was given (CI's): it must hold rosdistro
            pytest.fail(message)
        pytest.skip(message)  # a user's clone has no mirror
    digest = hashlib.sha256(tarball.read_bytes()).hexdigest()[:16]
    target = ROOT / "build" / "rosdistro" / digest
    if (target / ".done").is_file():
        return target / "rosdistro"
    wanted = {"rosdistro/rosdep/base.yaml", "rosdistro/rosdep/python.yaml",
              *(f"rosdistro/{d}/distribution.yaml" for d in DISTROS)}
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(dir=target.parent))
    with tarfile.open(tarball) as tar:
        members = [m for m in tar.getmembers() if m.name in wanted and m.isfile()]
        assert {m.name for m in members} == wanted, f"{tarball} lacks {sorted(wanted - {m.name for m in members})}"
        for member in members:  # regular files at known names: nothing to filter
            source = tar.extractfile(member)
            assert source is not None
            out = scratch / member.name
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(source.read())
    (scratch / ".done").write_text(f"{tarball}\n")
    try:
        scratch.rename(target)  # atomic: a concurrent run either wins or finds it done
    except OSError:
        shutil.rmtree(scratch, ignore_errors=True)
    return target / "rosdistro"


def _load(path: Path) -> dict:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with path.open(encoding="utf-8") as f:
        return yaml.load(f, Loader=loader)


class Rosdistro:
    """The rosdep rules (base.yaml + python.yaml) and each distribution's released packages."""

    def __init__(self, folder: Path) -> None:
        self.rules = {**_load(folder / "rosdep" / "base.yaml"), **_load(folder / "rosdep" / "python.yaml")}
        self.packages: dict[str, set[str]] = {}
        self.ubuntu: dict[str, list[str]] = {}
        for distro in DISTROS:
            data = _load(folder / distro / "distribution.yaml")
            self.ubuntu[distro] = list(data["release_platforms"]["ubuntu"])
            released: set[str] = set()
            for name, repo in data["repositories"].items():
                release = repo.get("release") or {}
                if release.get("version"):
                    released |= set(release.get("packages") or [name])
            self.packages[distro] = released

    def apt_rule(self, key: str, codename: str) -> bool:
        """Whether ``key`` installs on Ubuntu ``codename`` through apt (a package list or ``apt:``)."""
        rule = self.rules.get(key)
        if not isinstance(rule, dict):
            return False
        rule = rule.get("ubuntu", rule.get("*"))
        if isinstance(rule, dict) and not set(rule) & INSTALLERS:
            if codename in rule:
                rule = rule[codename]  # an explicit null: not on this release
            else:
                rule = rule.get("*")
        if isinstance(rule, list):
            return True  # apt packages (an empty list: nothing to install)
        return isinstance(rule, dict) and "apt" in rule and "pip" not in rule

    def missing(self, key: str) -> list[str]:
        """Return the distributions (with their Ubuntu release) on which ``key`` does not resolve."""
        gaps = []
        for distro in DISTROS:
            if key in self.packages[distro]:
                continue
            bad = [c for c in self.ubuntu[distro] if not self.apt_rule(key, c)]
            if bad:
                gaps.append(f"{distro} ({', '.join(bad)})")
        return gaps


@pytest.fixture(scope="module")
def rosdistro() -> Rosdistro:
    return Rosdistro(_extract(TARBALL))


# ----------------------------------------------------------------------------- what is imported
def _imports(path: Path) -> set[str]:
    """Top-level names ``path`` imports, function-level imports and ``importorskip`` included."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)
              and getattr(node.func, "attr", getattr(node.func, "id", "")) in ("importorskip", "import_module")):
            names.add(node.args[0].value.split(".")[0])
    return names


def _third_party(names: set[str], helpers: set[str]) -> set[str]:
    return {n for n in names if n not in sys.stdlib_module_names and n not in FIRST_PARTY and n not in helpers}


def registered_tests() -> list[str]:
    """Return the test files CMakeLists.txt hands to ``colcon test`` (M2SA_COLCON_TESTS)."""
    cmake = (ROOT / "CMakeLists.txt").read_text()
    block = re.search(r"set\(M2SA_COLCON_TESTS(.*?)\)", cmake, re.S)
    assert block, "M2SA_COLCON_TESTS not found in CMakeLists.txt"
    paths = [line.split("#")[0].strip() for line in block.group(1).splitlines()]
    return [p for p in paths if p]


def product_imports() -> dict[str, set[str]]:
    """Third-party module -> the installed files that import it."""
    files = [p for folder in PRODUCT for p in (ROOT / folder).rglob("*.py")
             if not any(p.relative_to(ROOT).as_posix().startswith(skip) for skip in NOT_INSTALLED)]
    files += [ROOT / script for script in PRODUCT_SCRIPTS]
    found: dict[str, set[str]] = defaultdict(set)
    for path in files:
        for name in _third_party(_imports(path), set()):
            found[name].add(path.relative_to(ROOT).as_posix())
    return found


def _test_helpers() -> dict[str, Path]:
    """Return the tests/ modules by name: the suite imports its helpers (node_harness, ...) that way."""
    return {p.stem: p for p in sorted((ROOT / "tests").rglob("*.py"), key=lambda p: len(p.parts))}


def registered_test_files() -> list[Path]:
    """
    Return the registered test files and what they load, transitively.

    That is the conftest.py files pytest loads for them, and the tests/ helper modules they import.
    """
    tests, helpers = ROOT / "tests", _test_helpers()
    todo = [tests / f"{t}.py" for t in registered_tests()]
    todo += [c for t in registered_tests() for c in (tests / "conftest.py", tests / Path(t).parent / "conftest.py")
             if c.is_file()]
    seen: set[Path] = set()
    while todo:
        path = todo.pop()
        if path not in seen:
            seen.add(path)
            todo += [helpers[n] for n in _imports(path) if n in helpers]
    return sorted(seen)


def registered_test_imports() -> dict[str, set[str]]:
    """Third-party module -> the registered test files (and the conftest / helpers they load) importing it."""
    helpers = set(_test_helpers())
    found: dict[str, set[str]] = defaultdict(set)
    for path in registered_test_files():
        for name in _third_party(_imports(path), helpers):
            found[name].add(path.relative_to(ROOT).as_posix())
    return found


def _key(module: str, rosdistro: Rosdistro) -> str | None:
    """Return the rosdep key of ``module``: its ROS package or its Python key; None for the model stack."""
    if module in MODEL_STACK:
        return None
    if module in PYTHON_KEYS:
        return PYTHON_KEYS[module]
    package = ROS_MODULE_PACKAGES.get(module, module)
    if any(package in rosdistro.packages[d] for d in DISTROS):
        return package
    raise AssertionError(f"import {module!r}: no ROS package of that name in {', '.join(DISTROS)}, and not in "
                         f"this test's PYTHON_KEYS or MODEL_STACK; add its rosdep key to package.xml and "
                         f"PYTHON_KEYS, or pin it in requirements-model.txt and add it to MODEL_STACK")


def _depends() -> dict[str, set[str]]:
    package = parse_package(str(ROOT / "package.xml"))
    return {"exec": {d.name for d in package.exec_depends},
            "build": {d.name for d in package.build_depends + package.buildtool_depends},
            "test": {d.name for d in package.test_depends}}


def _unlisted(imports: dict[str, set[str]], listed: set[str], rosdistro: Rosdistro) -> dict[str, list[str]]:
    """Return the rosdep keys ``imports`` need that ``listed`` lacks, each with up to three files importing it."""
    missing = {}
    for module, files in sorted(imports.items()):
        key = _key(module, rosdistro)
        if key is not None and key not in listed:
            missing[f"{key} (import {module})"] = sorted(files)[:3]
    return missing


# ----------------------------------------------------------------------------- the checks
def test_every_import_of_the_product_has_an_exec_dependency_or_is_the_pip_model_stack(rosdistro):
    exec_depends = _depends()["exec"]
    imports = product_imports()
    assert {"rclpy", "numpy", "torch", "launch_ros"} <= set(imports)  # the scan sees the node, model and launch
    missing = _unlisted(imports, exec_depends, rosdistro)
    assert not missing, f"package.xml lacks these exec_depends: {missing}"


def test_every_import_of_the_registered_tests_has_a_dependency_or_is_the_pip_model_stack(rosdistro):
    depends = _depends()
    listed = depends["exec"] | depends["build"] | depends["test"]
    imports = registered_test_imports()
    assert {"pytest", "hypothesis", "catkin_pkg"} <= set(imports)  # the scan sees the registered tests
    missing = _unlisted(imports, listed, rosdistro)
    assert not missing, f"package.xml lacks these test_depends: {missing}"


def test_every_key_package_xml_lists_resolves_on_humble_jazzy_and_kilted(rosdistro):
    """A key rosdep cannot resolve fails ``rosdep install`` for the whole package."""
    package = parse_package(str(ROOT / "package.xml"))
    keys = {d.name for group in (package.buildtool_depends, package.build_depends, package.build_export_depends,
                                 package.exec_depends, package.test_depends) for d in group}
    unresolved = {key: rosdistro.missing(key) for key in sorted(keys) if rosdistro.missing(key)}
    assert not unresolved, f"keys without an apt rule or a released package: {unresolved}"


def test_the_pip_model_stack_is_pinned_and_named_in_package_xml_and_the_model_table_is_used(rosdistro):
    pins = {line.split("==")[0].strip().lower()
            for line in (ROOT / "requirements-model.txt").read_text().splitlines()
            if line.strip() and not line.startswith("#")}
    assert {dist.lower() for dist in MODEL_STACK.values()} <= pins, "model stack not pinned in requirements-model.txt"
    comments = " ".join(re.findall(r"<!--(.*?)-->", (ROOT / "package.xml").read_text(), re.S))
    unnamed = [dist for dist in MODEL_STACK.values() if not re.search(rf"\b{re.escape(dist)}\b", comments)]
    assert not unnamed, f"package.xml's comment does not name the pip-only {unnamed}"
    assert "requirements-model.txt" in comments
    imported = set(product_imports()) | set(registered_test_imports())
    stale = sorted((set(MODEL_STACK) | set(PYTHON_KEYS)) - imported)
    assert not stale, f"nothing imports {stale} any more: drop them from this test's tables (and package.xml)"


def test_the_python_keys_resolve_and_the_model_stack_has_no_key_package_xml_lists(rosdistro):
    """
    The table above is right.

    Each Python key installs through apt on every distribution, and no model-stack library is
    half-installed by rosdep as well (an apt torch under a pip one).
    """
    for module, key in PYTHON_KEYS.items():
        assert not rosdistro.missing(key), (module, key, rosdistro.missing(key))
    listed = set().union(*_depends().values())
    doubled = sorted(f"python3-{dist}" for dist in MODEL_STACK.values() if f"python3-{dist}" in listed)
    assert not doubled, f"pip-only, yet listed for rosdep: {doubled}"


@pytest.mark.integration
def test_the_registered_tests_and_what_they_load_run_on_python_3_10():
    """
    ``colcon test`` on Humble runs them with its Python 3.10 (test_package.py once imported tomllib, 3.11's).

    The same two checks as the product's (test_python_versions).
    """
    from python_310 import syntax_violations, vermin_violations

    files = registered_test_files()
    assert ROOT / "tests" / "tools" / "test_package.py" in files and ROOT / "tests" / "conftest.py" in files
    problems = vermin_violations(files) + syntax_violations(files)
    assert not problems, "needs a Python newer than 3.10 (Humble):\n" + "\n".join(problems)
