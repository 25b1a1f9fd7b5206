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
The package metadata that colcon, pip and users read is consistent.

Registered for ``colcon test``, so it runs on Humble's Python 3.10 too: no tomllib
(3.11), and nothing beyond what package.xml's test_depends give. Whether package.xml
lists every import's rosdep key is tests/tools/test_rosdep_keys.py's job.
"""

from __future__ import annotations

from pathlib import Path
import re

from catkin_pkg.package import parse_package

ROOT = Path(__file__).resolve().parents[2]


def test_package_xml_parses_as_format_3_interface_package():
    package = parse_package(str(ROOT / "package.xml"))
    assert package.name == "m2sa_ros"
    assert package.package_format == 3
    assert "rosidl_interface_packages" in [g.name for g in package.member_of_groups]
    assert package.get_build_type() == "ament_cmake"
    depends = {d.name for d in package.build_depends + package.exec_depends + package.buildtool_depends}
    for needed in ("rclpy", "std_msgs", "sensor_msgs", "geometry_msgs", "action_msgs",
                   "lifecycle_msgs", "diagnostic_msgs", "rosidl_default_generators",
                   "rosidl_default_runtime", "ament_cmake_python"):
        assert needed in depends, needed


def _project_version(pyproject: str) -> str:
    """
    ``version`` of pyproject.toml's [project] table (a plain ``key = "value"`` line there).

    Read with a pattern because the TOML parser is 3.11's tomllib, which Humble's Python
    lacks, and rosdep has no key for its backport.
    """
    table = re.search(r"^\[project\]\s*$(.*?)(?=^\[|\Z)", pyproject, re.M | re.S)
    assert table, "pyproject.toml has no [project] table"
    version = re.search(r'^version\s*=\s*"([^"]+)"', table.group(1), re.M)
    assert version, '[project] has no version = "..." line'
    return version.group(1)


def test_package_xml_version_matches_pyproject():
    package = parse_package(str(ROOT / "package.xml"))
    assert package.version == _project_version((ROOT / "pyproject.toml").read_text())


def test_project_version_is_read_from_the_project_table_only():
    text = '[tool.x]\nversion = "9"\n\n[project]\nname = "m"\nversion = "1.2.3"  # keep\n[other]\nversion = "8"\n'
    assert _project_version(text) == "1.2.3"


def test_cmake_generates_every_interface_file():
    cmake = (ROOT / "CMakeLists.txt").read_text()
    files = sorted(p.relative_to(ROOT).as_posix() for d in ("msg", "srv", "action")
                   for p in (ROOT / d).iterdir())
    assert files, "no interface definitions found"
    for f in files:
        assert f'"{f}"' in cmake, f"{f} is not passed to rosidl_generate_interfaces"


def test_lock_pins_every_dependency_exactly():
    lines = [line for line in (ROOT / "requirements.lock").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert all(re.fullmatch(r"[A-Za-z0-9_.\-]+==[^=\s]+", line) for line in lines), lines
    names = {line.split("==")[0].lower() for line in lines}
    for needed in ("torch", "torchvision", "transformers", "peft", "segment-anything",
                   "safetensors", "pycocotools", "rosbags", "ros-rclpy", "ros-rmw-fastrtps-cpp"):
        assert needed in names, needed
    assert "torch==2.14.1" in lines and "torchvision==0.29.1" in lines


def test_model_requirements_are_the_lock_without_ros_colcon_numpy_and_opencv():
    lock = {line.split("==")[0].lower(): line for line in (ROOT / "requirements.lock").read_text().splitlines()
            if line.strip() and not line.startswith("#")}
    # The lock's Python (3.11) reads the lines without a marker and those whose marker names it
    # (scripts/model_requirements.py writes only `python_version == "X.Y" or ...` markers).
    model = [pin.strip() for pin, _, marker in (line.partition(";") for line in
                                                (ROOT / "requirements-model.txt").read_text().splitlines()
                                                if line.strip() and not line.startswith("#"))
             if not marker or 'python_version == "3.11"' in marker]
    names = {line.split("==")[0].lower() for line in model}
    assert not any(n.startswith(("ros-", "colcon-")) for n in names)
    assert not names & {"numpy", "opencv-python-headless", "catkin-pkg", "empy"}
    assert all(lock.get(line.split("==")[0].lower()) == line for line in model), "pins differ from requirements.lock"
    assert {"torch", "torchvision", "transformers", "peft", "segment-anything", "safetensors", "rosbags"} <= names
