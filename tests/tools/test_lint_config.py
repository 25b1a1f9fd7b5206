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
The linters' configuration: ROS's own flake8 settings, and one set of paths.

setup.cfg may differ from ament_flake8's configuration only in quote style and line length
(CONTRIBUTING.md, "Lint"), and `make lint` must check what `colcon test` checks
(CMakeLists.txt), over every Python file of the package.
"""

from __future__ import annotations

import configparser
import os
from pathlib import Path
import re

import ament_flake8

ROOT = Path(__file__).resolve().parents[2]
# What setup.cfg may change: line length, and double quotes where ROS's plugin default is single.
OWN_SETTINGS = {"max-line-length": "120", "inline-quotes": "double", "multiline-quotes": "double",
                "docstring-quotes": "double"}


def _flake8_section(path: Path) -> dict[str, str]:
    parser = configparser.ConfigParser()
    parser.read(path)
    return dict(parser["flake8"])


def _cmake_list(name: str) -> list[str]:
    """Return the values of ``set(<name> ...)`` in CMakeLists.txt."""
    match = re.search(rf"set\({name}\s+([^)]*)\)", (ROOT / "CMakeLists.txt").read_text())
    assert match, f"set({name} ...) not found in CMakeLists.txt"
    return match.group(1).split()


def _make_variable(name: str) -> list[str]:
    match = re.search(rf"^{name} := (.*)$", (ROOT / "Makefile").read_text(), flags=re.M)
    assert match, f"{name} not found in the Makefile"
    return match.group(1).split()


def test_setup_cfg_is_ament_flake8s_configuration_but_for_quotes_and_line_length():
    ros = _flake8_section(Path(ament_flake8.__file__).parent / "configuration" / "ament_flake8.ini")
    ours = _flake8_section(ROOT / "setup.cfg")
    assert {key: value for key, value in ours.items() if key not in OWN_SETTINGS} == \
        {key: value for key, value in ros.items() if key not in OWN_SETTINGS}
    assert {key: ours.get(key) for key in OWN_SETTINGS} == OWN_SETTINGS


def test_make_lint_checks_what_colcon_test_checks():
    assert _make_variable("LINT_EXCLUDE") == _cmake_list("AMENT_LINT_AUTO_FILE_EXCLUDE")
    assert _make_variable("LINT_PATHS") == _cmake_list("M2SA_LINT_PATHS")
    assert 'ament_cmake_flake8_CONFIG_FILE "${CMAKE_CURRENT_SOURCE_DIR}/setup.cfg"' in \
        (ROOT / "CMakeLists.txt").read_text()


def test_every_python_file_of_the_package_is_on_the_lint_paths():
    """The copyright check walks the listed paths only: a Python file outside them would go unchecked."""
    paths = _cmake_list("M2SA_LINT_PATHS")
    skipped = set(_cmake_list("AMENT_LINT_AUTO_FILE_EXCLUDE"))
    outside = []
    for folder, subfolders, files in os.walk(ROOT):
        here = Path(folder).relative_to(ROOT)
        # Folders starting with . or _ (the venvs, __pycache__) are skipped by every linter.
        subfolders[:] = [name for name in subfolders
                         if not name.startswith((".", "_")) and (here / name).as_posix() not in skipped]
        for name in files:
            relative = (here / name).as_posix()
            if name.endswith(".py") and not any(relative == path or relative.startswith(f"{path}/") for path in paths):
                outside.append(relative)
    assert not outside, f"Python files the linters' paths miss: {outside}"
