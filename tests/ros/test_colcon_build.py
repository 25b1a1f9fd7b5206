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
CI builds the package the way a ROS 2 user does.

`colcon build` (colcon from PyPI) against the venv's ROS 2 wheels into a scratch
workspace, then the *installed* `lib/m2sa_ros/perception_node` from that install
space goes active and answers a command, and `colcon test` finds the pytest files
CMake registers.
"""

from __future__ import annotations

import os
from pathlib import Path
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.ros, pytest.mark.slow, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
COLCON = VENV_BIN / "colcon"


def _env(workspace: Path) -> dict[str, str]:
    """Return the environment `source /opt/ros/<distro>/setup.bash` gives, with the venv as the underlay."""
    env = dict(os.environ)
    env["PATH"] = f"{VENV_BIN}:{env.get('PATH', '')}"
    env["AMENT_PREFIX_PATH"] = str(VENV_BIN.parent)
    env["CMAKE_PREFIX_PATH"] = str(VENV_BIN.parent)
    env["COLCON_LOG_PATH"] = str(workspace / "log")
    env.pop("PYTHONPATH", None)
    return env


@pytest.fixture(scope="module")
def workspace(colcon_workspace) -> Path:
    """Return the session's one colcon build (tests/ros/conftest.py), which the launch, CLI and Nav2 tests share."""
    return colcon_workspace


def _sourced(ws: Path, command: str) -> list[str]:
    # colcon-core writes the POSIX setup.sh (setup.bash comes from colcon-bash, not needed here).
    return ["bash", "-c", f". {ws}/install/setup.sh && {command}"]


def test_install_space_has_the_node_launch_config_rviz_and_model(workspace):
    share = workspace / "install" / "m2sa_ros" / "share" / "m2sa_ros"
    for path in ("launch/perception.launch.py", "config/perception.yaml", "rviz/m2sa_perception.rviz",
                 "examples/planner_client.py", "models/m2sa-tiny-synth/config.json", "msg/Command.msg"):
        assert (share / path).is_file(), path
    assert os.access(workspace / "install" / "m2sa_ros" / "lib" / "m2sa_ros" / "perception_node", os.X_OK)


def test_installed_node_is_imported_from_the_install_space(workspace):
    out = subprocess.run(_sourced(workspace, "python3 -c 'import m2sa_ros.perception_node as n, m2sa_ros.msg as m, "
                                             "m2sa_core as c; print(n.__file__); print(m.__file__); "
                                             "print(c.__file__)'"),
                         env=_env(workspace), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    install = workspace / "install" / "m2sa_ros"
    node_file, msg_file, core_file = out.stdout.split()
    assert node_file.startswith(str(install)) and msg_file.startswith(str(install)), out.stdout
    # m2sa_core is installed too; in this development venv the editable install of the
    # checkout (a setuptools meta-path finder) still wins over PYTHONPATH, as it would
    # for any editable package, so only its presence in the install space is checked.
    site = Path(node_file).parents[1]
    assert (site / "m2sa_core" / "__init__.py").is_file()
    assert (site / "m2sa_core" / "inference" / "segmenter.py").is_file()
    assert core_file.endswith("m2sa_core/__init__.py")


def test_installed_perception_node_goes_active_and_answers(workspace, ros_context):
    from m2sa_ros.msg import Command, SegmentationResult
    from node_harness import good_image
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import Image

    ns = f"/colcon_{os.getpid()}"
    node_exe = workspace / "install" / "m2sa_ros" / "lib" / "m2sa_ros" / "perception_node"
    env = _env(workspace)
    proc = subprocess.Popen(_sourced(workspace, f"exec {node_exe} --ros-args -r __ns:={ns} "
                                                "-p image_reliability:=reliable -p max_new_tokens:=8 "
                                                "-p max_image_age:=0.0"),
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    probe = Node("colcon_probe", context=ros_context)
    reliable = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
    results: list = []
    probe.create_subscription(SegmentationResult, f"{ns}/result", results.append, reliable)
    images = probe.create_publisher(Image, f"{ns}/image", reliable)
    commands = probe.create_publisher(Command, f"{ns}/command_stamped", reliable)
    executor = SingleThreadedExecutor(context=ros_context)
    executor.add_node(probe)
    try:
        for _ in range(1200):  # the node loads the shipped model from share/ and activates
            if images.get_subscription_count() and commands.get_subscription_count():
                break
            executor.spin_once(timeout_sec=0.1)
            assert proc.poll() is None, proc.stdout.read()
        else:
            raise AssertionError("the installed node never became active")
        # A reliable, volatile reader drops what a writer sent before the reader itself
        # matched it; the subscription counts above only say the writer side has. So the
        # keep-latest image is re-sent while waiting, and the command again if nothing came.
        frame = good_image(1)
        images.publish(frame)
        for _ in range(20):
            executor.spin_once(timeout_sec=0.05)
        for attempt in range(1200):
            if attempt % 150 == 0:
                commands.publish(Command(request_id="colcon-1", text="what can I drink from?"))
            if results:
                break
            if attempt % 5 == 0:
                images.publish(frame)
            executor.spin_once(timeout_sec=0.1)
        assert results, "no result from the installed node"
        assert results[0].request_id == "colcon-1" and results[0].success, results[0].error
    finally:
        proc.send_signal(2)
        try:
            code = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        out = proc.stdout.read()
        executor.shutdown()
        probe.destroy_node()
    assert code == 0, out
    assert "share/m2sa_ros/models/m2sa-tiny-synth" in out, out  # the installed copy of the shipped model


TOOLS = ("m2sa-bag", "m2sa-bag-eval", "m2sa-camera", "perception_node")


def _clean_env(ws: Path) -> dict[str, str]:
    """
    Return what `env -i` leaves, for a shell that then sources only install/setup.sh: a robot's service.

    No venv is activated. Only the test's DDS isolation (its own domain, localhost discovery) is kept.
    """
    keep = {k: os.environ[k] for k in ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE") if k in os.environ}
    return {"HOME": str(ws), "PATH": "/usr/bin:/bin", **keep}


def _clean_shell(ws: Path, command: str) -> subprocess.CompletedProcess:
    """Run ``command`` in `env -i` after only `. install/setup.sh`."""
    return subprocess.run(["bash", "-c", f". {ws}/install/setup.sh && {command}"], env=_clean_env(ws),
                          capture_output=True, text=True, timeout=180)


def test_installed_executables_start_with_the_interpreter_colcon_build_found(workspace):
    lib = workspace / "install" / "m2sa_ros" / "lib" / "m2sa_ros"
    assert sorted(p.name for p in lib.iterdir()) == sorted(TOOLS)
    for tool in TOOLS:
        assert (lib / tool).read_text().splitlines()[0] == f"#!{sys.executable}", tool  # the venv's, not env's
    # In that shell, `python3` is not the model's: only the executables' own line finds it.
    bare = _clean_shell(workspace, "python3 -c 'import torch'")
    assert bare.returncode != 0 and "torch" in bare.stderr, bare.stdout + bare.stderr


def test_ros2_run_in_a_clean_shell_lists_every_tool_and_each_runs(workspace):
    listed = _clean_shell(workspace, "ros2 pkg executables m2sa_ros")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert sorted(listed.stdout.split()) == sorted(["m2sa_ros"] * len(TOOLS) + list(TOOLS)), listed.stdout
    for tool, says in (("m2sa-bag", "usage: m2sa-bag"), ("m2sa-bag-eval", "usage: m2sa-bag-eval"),
                       ("m2sa-camera", "usage: m2sa-camera")):
        done = _clean_shell(workspace, f"ros2 run m2sa_ros {tool} --help")
        assert done.returncode == 0 and says in done.stdout, (tool, done.stdout[-2000:], done.stderr[-2000:])


@pytest.mark.parametrize("command", ["ros2 run m2sa_ros perception_node --ros-args -r __ns:={ns}",
                                     "ros2 launch m2sa_ros perception.launch.py namespace:={ns}"])
def test_ros2_run_and_launch_in_a_clean_shell_bring_the_node_to_active(workspace, command):
    from ros_install import LaunchProcess

    ns = f"/clean_{os.getpid()}_{command.split()[1]}"
    # On a terminal, as a user types it: Ctrl-C reaches `ros2` and the node it started.
    run = LaunchProcess(["bash", "-c", f". {workspace}/install/setup.sh && exec {command.format(ns=ns)}"],
                        _clean_env(workspace), terminal=True)
    try:
        run.wait_for_line("active: listening", timeout=120)
        run.ctrl_c()
        assert run.wait(timeout=60) == 0, run.output
    finally:
        run.kill()
    assert "Traceback" not in run.output, run.output


def test_colcon_test_runs_the_registered_pytest_files(workspace):
    from ros_install import colcon_test_turn

    with colcon_test_turn(workspace):  # test_colcon_lint.py runs the linters in this workspace too
        run = subprocess.run(
            [str(COLCON), "test", "--base-paths", "src", "--build-base", "build", "--install-base", "install",
             "--ctest-args", "-R", "test_node_params|test_package"],
            cwd=workspace, env=_env(workspace), capture_output=True, text=True, timeout=900)
        assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
        result = subprocess.run([str(COLCON), "test-result", "--test-result-base", "build", "--verbose"],
                                cwd=workspace, env=_env(workspace), capture_output=True, text=True, timeout=120)
    assert "0 errors, 0 failures" in result.stdout, result.stdout[-3000:]
    assert "tests" in result.stdout and not result.stdout.startswith("Summary: 0 tests")


# One spacing, the tight one: the others are the same signal handling, proven on the
# console script in test_shutdown_signals.py; what this adds is colcon's executable.
@pytest.mark.parametrize("second_sigint_after", [0.15], ids=["second-0.15s"])
def test_ctrl_c_under_launch_ends_the_installed_node_with_exit_0(workspace, ros_context, second_sigint_after):
    """
    Ctrl-C under launch ends the installed node with exit 0.

    The terminal + ``ros2 launch`` signal sequence (node_process.py) on the install space's
    executable, as launch starts it: every pending command answered, exit 0.
    """
    from node_process import answer_then_ctrl_c, start_active_node

    ns = f"/colcon_ctrl_c_{os.getpid()}_{int(second_sigint_after * 1000)}"
    node_exe = workspace / "install" / "m2sa_ros" / "lib" / "m2sa_ros" / "perception_node"
    node = start_active_node(_sourced(workspace, f"exec {node_exe} --ros-args -r __ns:={ns} "
                                                 "-p wait_for_image:=60.0 -p max_queue:=4 -p max_image_age:=0.0"),
                             env=_env(workspace))
    answer_then_ctrl_c(ns, node, ros_context, second_sigint_after)
