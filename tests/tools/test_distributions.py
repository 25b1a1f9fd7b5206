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
Kilted and Jazzy from one checkout.

The Makefile picks the distribution from ROS_DISTRO, the two requirement sets differ only
in their ROS wheels, the bag tools' typestore follows the distribution, and a venv's
setup.sh gives a shell what the ament index (and so the `ros2` CLI) needs.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
from pathlib import Path
import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
# Kilted wheels Jazzy has no `ros-jazzy-*` name for, the one renamed, and the three Jazzy's
# wheels use without declaring them (configuring the interfaces fails without them).
KILTED_ONLY = {"ament-cmake-ros-core", "rmw-security-common", "rmw-test-fixture", "rmw-test-fixture-implementation"}
JAZZY_NAME = {"fastdds": "fastrtps"}
JAZZY_UNDECLARED = {"ament-cmake-gmock", "ament-cmake-gtest", "python-cmake-module"}
DISTRO_INDEPENDENT = {"ros-wheels-bootstrapper"}


def _requirements(name: str) -> list[str]:
    lines = (line.split("#")[0].strip() for line in (ROOT / name).read_text().splitlines())
    return [line for line in lines if line]


def _split(requirements: list[str]) -> tuple[list[str], dict[str, str]]:
    """Return (the non-ROS lines, {ROS package: version}) with ros-/ros-jazzy- taken off the names."""
    others, ros = [], {}
    for line in requirements:
        name, _, version = line.partition("==")
        if name.startswith("ros-") and name not in DISTRO_INDEPENDENT:
            ros[name.removeprefix("ros-").removeprefix("jazzy-")] = version
        else:
            others.append(line)
    return others, ros


def test_jazzy_requirements_are_kilteds_with_jazzys_ros_wheels():
    kilted_others, kilted_ros = _split(_requirements("requirements.in"))
    jazzy_lines = _requirements("requirements-jazzy.in")
    jazzy_others, jazzy_ros = _split(jazzy_lines)
    assert jazzy_others == kilted_others, "requirements-jazzy.in must keep requirements.in's non-ROS lines"
    assert all(line.startswith("ros-jazzy-") for line in jazzy_lines if line.startswith("ros-")
               and line.split("==")[0] not in DISTRO_INDEPENDENT), "Jazzy takes its ROS wheels through ros-jazzy-*"
    expected = {JAZZY_NAME.get(n, n) for n in kilted_ros} - KILTED_ONLY | JAZZY_UNDECLARED
    assert set(jazzy_ros) == expected
    assert all(re.fullmatch(r"[0-9.]+", v) for v in jazzy_ros.values()), "ROS wheels are pinned exactly"


def _pins(name: str) -> dict[str, str]:
    lines = [line for line in (ROOT / name).read_text().splitlines() if line.strip() and not line.startswith("#")]
    assert all(re.fullmatch(r"[A-Za-z0-9_.\-]+==[^=\s]+", line) for line in lines), name
    return {line.split("==")[0].lower(): line.split("==")[1] for line in lines}


def test_both_locks_pin_one_model_stack_and_their_own_ros():
    kilted, jazzy = _pins("requirements.lock"), _pins("requirements-jazzy.lock")
    non_ros = lambda pins: {n: v for n, v in pins.items() if not n.startswith("ros-")}  # noqa: E731
    # So requirements-model.txt (a venv over /opt/ros/<distro>) is right for both.
    assert non_ros(jazzy) == non_ros(kilted)
    assert (jazzy["ros-rclpy"], jazzy["ros-rcl"], jazzy["ros-rosidl-generator-py"]) == ("7.1.6", "9.2.8", "0.22.2")
    assert jazzy["ros-jazzy-rclpy"] == "7.1.6" and "ros-fastrtps" in jazzy and "ros-fastdds" not in jazzy
    assert kilted["ros-rclpy"].startswith("9.") and not any(n.startswith("ros-jazzy-") for n in kilted)


def _make(*args: str, distro: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("ROS_DISTRO", "MAKEFLAGS", "MAKELEVEL")}
    if distro is not None:
        env["ROS_DISTRO"] = distro  # as a sourced /opt/ros/<distro>/setup.bash leaves it
    return subprocess.run(["make", "-n", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("distro, venv", [(None, ".venv"), ("", ".venv"), ("kilted", ".venv"),
                                          ("jazzy", ".venv-jazzy")])
def test_make_takes_the_distribution_from_ros_distro(distro, venv):
    out = _make("test", distro=distro)
    assert out.returncode == 0, out.stderr
    assert f"{venv}/bin/python -m pytest" in out.stdout
    assert _make("demo", distro=distro).stdout.rstrip().endswith(f"{venv}/bin/python -m m2sa_ros.bag.demo")
    if distro:  # and the same from the command line
        assert f"{venv}/bin/python -m pytest" in _make("test", f"ROS_DISTRO={distro}", distro=None).stdout


@pytest.mark.parametrize("distro, venv, python", [(None, ".venv", "python3.11"),
                                                  ("jazzy", ".venv-jazzy", "python3.12")])
def test_each_distributions_venv_is_built_on_its_python(distro, venv, python):
    # Jazzy's on Ubuntu 24.04's 3.12, as on a Jazzy robot; -B shows the recipe of a venv already built.
    out = _make("-B", "setup", distro=distro)
    assert out.returncode == 0, out.stderr
    assert re.search(rf"(^|/){re.escape(python)} -m venv {re.escape(venv)} ", out.stdout, re.MULTILINE), out.stdout
    # PYTHON=... names another interpreter for either
    named = _make("-B", "setup", "PYTHON=/opt/py/bin/python3", distro=distro)
    assert f"/opt/py/bin/python3 -m venv {venv} " in named.stdout, named.stdout


def test_ci_runs_jazzy_on_the_python_of_a_jazzy_robot():
    if os.environ.get("ROS_DISTRO") != "jazzy" or not os.environ.get("CI"):
        pytest.skip("CI's Jazzy half only (.ci/run: ROS_DISTRO=jazzy make test-ros)")
    assert sys.version_info[:2] == (3, 12), sys.version


def test_make_refuses_an_unknown_distribution_in_one_line():
    out = _make("test", distro="humble")
    assert out.returncode != 0 and out.stdout == ""
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "ROS_DISTRO=humble is not supported" in out.stderr and "jazzy" in out.stderr


# --------------------------------------------------------------------------- bag typestore
# nav_msgs/msg/Goals is new in Kilted: the one message rosbags' two stores disagree on.
KILTED_ONLY_MESSAGE = "nav_msgs/msg/Goals"


def test_bag_typestore_follows_ros_distro(monkeypatch):
    from m2sa_ros.bag import bag_io

    monkeypatch.setenv("ROS_DISTRO", "jazzy")
    assert bag_io.ros_distro() == "jazzy"
    jazzy = bag_io.message_typestore()
    monkeypatch.setenv("ROS_DISTRO", "kilted")
    kilted = bag_io.message_typestore()
    assert KILTED_ONLY_MESSAGE in kilted.fielddefs and KILTED_ONLY_MESSAGE not in jazzy.fielddefs
    for store in (jazzy, kilted):
        assert "m2sa_ros/msg/SegmentationResult" in store.fielddefs
    assert bag_io.message_typestore("jazzy") is jazzy  # an explicit distribution wins


def test_without_ros_distro_the_installed_rclpy_names_it(monkeypatch):
    from m2sa_ros.bag import bag_io

    monkeypatch.delenv("ROS_DISTRO", raising=False)
    for version, distro in (("7.1.6", "jazzy"), ("9.1.2", "kilted"), ("3.3.16", "humble")):
        monkeypatch.setattr(importlib.metadata, "version", lambda name, v=version: v)
        assert bag_io.ros_distro() == distro, version

    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    assert bag_io.ros_distro() == "kilted"  # no rclpy at all: what make setup builds by default


def test_a_distribution_rosbags_does_not_know_is_one_line(monkeypatch):
    from m2sa_ros.bag import bag_io

    monkeypatch.setenv("ROS_DISTRO", "rolling")
    with pytest.raises(bag_io.BagError) as err:
        bag_io.message_typestore()
    assert "\n" not in str(err.value) and "ROS_DISTRO=rolling" in str(err.value) and "jazzy" in str(err.value)


@pytest.mark.ros
def test_this_venvs_rclpy_setup_sh_and_make_agree_on_the_distribution(monkeypatch):
    from m2sa_ros.bag import bag_io

    given = os.environ.get("ROS_DISTRO")  # set when the run came through make
    monkeypatch.delenv("ROS_DISTRO", raising=False)
    distro = bag_io.ros_distro()
    assert distro in ("kilted", "jazzy")
    if given:
        assert distro == given
    setup = Path(sys.prefix) / "setup.sh"
    if setup.is_file():
        assert f"export ROS_DISTRO={distro}\n" in setup.read_text()


# --------------------------------------------------------------------------- venv setup.sh
_PROBE = """
import json, os, shutil, sys
from ament_index_python import get_package_share_directory, get_resources
print(json.dumps({"prefix": sys.prefix, "ament": os.environ["AMENT_PREFIX_PATH"],
                  "distro": os.environ["ROS_DISTRO"], "share": get_package_share_directory("m2sa_ros"),
                  "interfaces": "m2sa_ros" in get_resources("rosidl_interfaces"),
                  "node": shutil.which("m2sa-perception"), "ros2": shutil.which("ros2"),
                  "tf2": "tf2_ros_py" in get_resources("packages")}))
"""


@pytest.mark.ros
def test_venv_setup_sh_gives_a_shell_the_ament_index_ros2cli_reads():
    """
    The venv's setup.sh gives a shell the ament index that `ros2 interface show` reads.

    ros2cli (not on PyPI) finds packages through ament_index_python, which reads only
    AMENT_PREFIX_PATH: the venv's python alone cannot, its setup.sh can.
    """
    setup = Path(sys.prefix) / "setup.sh"
    if not setup.is_file():
        pytest.skip(f"{setup} missing: not a venv of make setup (a real install has /opt/ros/<distro>/setup.sh)")
    env = {k: v for k, v in os.environ.items() if k not in ("AMENT_PREFIX_PATH", "VIRTUAL_ENV", "ROS_DISTRO")}
    env["PATH"] = "/usr/bin:/bin"
    bare = subprocess.run([sys.executable, "-c", "import ament_index_python as a; a.get_resources('packages')"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert bare.returncode != 0 and "AMENT_PREFIX_PATH" in bare.stderr
    # Sourced twice, as a .bashrc and a terminal might: the prefix is listed once.
    out = subprocess.run(["bash", "-c", f'. "{setup}" && . "{setup}" && python -c \'{_PROBE}\''],
                         env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout)
    assert Path(seen["prefix"]) == Path(sys.prefix)
    # The venv, then the upstream packages make setup builds from ros-src/*.repos (ros2cli,
    # launch, tf2, ...; scripts/build_ros_src.sh), each once.
    upstream = ROOT / "build" / f"ros-src-{seen['distro']}" / "install"
    assert seen["ament"] == f"{sys.prefix}:{upstream}"
    assert seen["ros2"] == str(upstream / "bin" / "ros2") and seen["tf2"]
    assert Path(seen["share"]) == Path(sys.prefix) / "share" / "m2sa_ros" and seen["interfaces"]
    assert seen["distro"] in ("kilted", "jazzy")
    assert seen["node"] == str(Path(sys.prefix) / "bin" / "m2sa-perception")
