"""The package metadata that colcon, pip and users read is consistent."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

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


def test_package_xml_version_matches_pyproject():
    package = parse_package(str(ROOT / "package.xml"))
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert package.version == project["version"]


def test_cmake_generates_every_interface_file():
    cmake = (ROOT / "CMakeLists.txt").read_text()
    files = sorted(p.relative_to(ROOT).as_posix() for d in ("msg", "srv", "action")
                   for p in (ROOT / d).iterdir())
    assert files, "no interface definitions found"
    for f in files:
        assert f'"{f}"' in cmake, f"{f} is not passed to rosidl_generate_interfaces"


def test_lock_pins_every_dependency_exactly():
    lines = [l for l in (ROOT / "requirements.lock").read_text().splitlines()
             if l.strip() and not l.startswith("#")]
    assert all(re.fullmatch(r"[A-Za-z0-9_.\-]+==[^=\s]+", l) for l in lines), lines
    names = {l.split("==")[0].lower() for l in lines}
    for needed in ("torch", "torchvision", "transformers", "peft", "segment-anything",
                   "safetensors", "pycocotools", "rosbags", "ros-rclpy", "ros-rmw-fastrtps-cpp"):
        assert needed in names, needed
    assert "torch==2.14.1" in lines and "torchvision==0.29.1" in lines


def _imported_modules(paths) -> set[str]:
    import ast

    names: set[str] = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
    return names


def test_package_xml_lists_every_ros_package_and_rosdep_key_the_ros_side_imports():
    """Every ROS package (an ament index entry) imported by the node, tools, launch file
    and example is a dependency, and so are the Python libraries that have rosdep keys."""
    import sys

    package = parse_package(str(ROOT / "package.xml"))
    depends = {d.name for d in package.build_depends + package.exec_depends + package.buildtool_depends}
    sources = [*(ROOT / "m2sa_ros").glob("*.py"), *(ROOT / "launch").glob("*.py"), *(ROOT / "examples").glob("*.py")]
    imported = _imported_modules(sources)
    index = Path(sys.prefix) / "share" / "ament_index" / "resource_index" / "packages"
    ros = {name for name in imported if (index / name).exists() and name != "m2sa_ros"}
    assert {"rclpy", "sensor_msgs", "visualization_msgs", "rcl_interfaces", "diagnostic_msgs"} <= ros
    assert ros - depends == set(), f"imported but not in package.xml: {sorted(ros - depends)}"
    assert {"launch", "launch_ros"} <= depends  # not on PyPI, so not in the ament index here
    rosdep = {"numpy": "python3-numpy", "cv2": "python3-opencv", "yaml": "python3-yaml", "scipy": "python3-scipy",
              "tqdm": "python3-tqdm", "psutil": "python3-psutil", "PIL": "python3-pil",
              "matplotlib": "python3-matplotlib"}
    wanted = {rosdep[m] for m in imported | _imported_modules((ROOT / "m2sa_core").rglob("*.py")) if m in rosdep}
    assert wanted - depends == set(), sorted(wanted - depends)


def test_model_requirements_are_the_lock_without_ros_colcon_numpy_and_opencv():
    lock = {l.split("==")[0].lower(): l for l in (ROOT / "requirements.lock").read_text().splitlines()
            if l.strip() and not l.startswith("#")}
    model = [l for l in (ROOT / "requirements-model.txt").read_text().splitlines() if l.strip() and not l.startswith("#")]
    names = {l.split("==")[0].lower() for l in model}
    assert not any(n.startswith(("ros-", "colcon-")) for n in names)
    assert not names & {"numpy", "opencv-python-headless", "catkin-pkg", "empy"}
    assert all(lock.get(l.split("==")[0].lower()) == l for l in model), "pins differ from requirements.lock"
    assert {"torch", "torchvision", "transformers", "peft", "segment-anything", "safetensors", "rosbags"} <= names
