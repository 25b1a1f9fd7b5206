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
`colcon test` runs the ament linters a ROS package registers, and they pass.

CMakeLists.txt registers ament_lint_auto with ament_flake8 (configured by setup.cfg),
ament_pep257, ament_copyright and ament_xmllint. The package is built as a ROS user builds
it (the session's one colcon workspace, tests/ros/conftest.py), and the linters run from
its build folder over the checkout that colcon links as the source.
"""

from __future__ import annotations

import json
from pathlib import Path
import subprocess
import xml.etree.ElementTree as ElementTree

import pytest
from ros_install import COLCON, colcon_env, colcon_test_turn

pytestmark = [pytest.mark.ros, pytest.mark.slow, pytest.mark.integration]

LINTERS = {"flake8", "pep257", "copyright", "xmllint"}


def _ctest_tests(build: Path) -> dict[str, list[str]]:
    """Return the tests ctest has registered under the ``linter`` label: name -> command line."""
    out = subprocess.run(["ctest", "--show-only=json-v1", "-L", "linter"], cwd=build, capture_output=True,
                         text=True, timeout=120, check=True)
    return {test["name"]: test.get("command", []) for test in json.loads(out.stdout)["tests"]}


def test_colcon_test_runs_the_four_ament_linters_and_they_pass(colcon_workspace):
    build = colcon_workspace / "build" / "m2sa_ros"
    registered = _ctest_tests(build)
    assert set(registered) == LINTERS, registered
    flake8 = registered["flake8"]
    assert "--config" in flake8 and flake8[flake8.index("--config") + 1].endswith("/setup.cfg"), flake8
    # Nothing of what make setup leaves in the checkout is linted: the upstream sources under build/.
    assert "build" in flake8[flake8.index("--exclude") + 1:], flake8

    with colcon_test_turn(colcon_workspace):  # test_colcon_build.py runs colcon test in this workspace too
        run = subprocess.run(
            [str(COLCON), "test", "--base-paths", "src", "--build-base", "build", "--install-base", "install",
             "--ctest-args", "-L", "linter"],
            cwd=colcon_workspace, env=colcon_env(colcon_workspace), capture_output=True, text=True, timeout=900)
        assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
        results = build / "test_results" / "m2sa_ros"
        checked = {}
        for name in LINTERS:
            report = ElementTree.parse(results / f"{name}.xunit.xml").getroot()
            suite = report if report.tag == "testsuite" else report.find("testsuite")
            failed = int(suite.get("failures", 0)) + int(suite.get("errors", 0))
            output = (build / f"ament_{name}" / f"{name}.txt").read_text()
            assert failed == 0, f"{name}: {failed} findings\n{output[-4000:]}"
            listed = suite.findtext("system-out") or ""
            checked[name] = max(int(suite.get("tests", 0)), sum(line.startswith("* ") for line in listed.splitlines()))
    # Each ran over the package's files, not over nothing: pep257 and copyright report one
    # test case per file, flake8 lists the files it checked, xmllint checks package.xml.
    assert min(checked["flake8"], checked["pep257"], checked["copyright"]) > 250 and checked["xmllint"] >= 1, checked
