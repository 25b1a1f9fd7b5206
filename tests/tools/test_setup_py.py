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

"""``python setup.py`` (legacy tools) yields the same distribution as the pyproject build."""

from __future__ import annotations

import configparser
from pathlib import Path
import subprocess
import sys
import tomllib

import pytest
from setuptools import find_packages

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def egg_info(tmp_path: Path) -> Path:
    """Run the legacy ``setup.py egg_info`` command and return its metadata folder."""
    subprocess.run([sys.executable, "setup.py", "-q", "egg_info", "--egg-base", str(tmp_path)],
                   cwd=ROOT, check=True, capture_output=True, text=True)
    (info,) = tmp_path.glob("*.egg-info")
    return info


def test_setup_py_declares_the_pyproject_packages_and_entry_points(tmp_path):
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    info = egg_info(tmp_path)

    entry_points = configparser.ConfigParser()
    entry_points.read(info / "entry_points.txt")
    assert dict(entry_points["console_scripts"]) == project["project"]["scripts"]

    include = project["tool"]["setuptools"]["packages"]["find"]["include"]
    expected = {p.split(".")[0] for p in find_packages(str(ROOT), include=include)}
    assert set((info / "top_level.txt").read_text().split()) == expected == {"m2sa_core", "training"}

    metadata = (info / "PKG-INFO").read_text()
    assert f"Name: {project['project']['name']}" in metadata
    assert f"Version: {project['project']['version']}" in metadata
    requires = (info / "requires.txt").read_text().split("\n\n")[0].split()
    assert requires == project["project"]["dependencies"]


def test_license_file_is_the_declared_apache_2():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0"
    assert "<license>Apache-2.0</license>" in (ROOT / "package.xml").read_text()
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
