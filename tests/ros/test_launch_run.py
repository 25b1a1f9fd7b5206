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
`ros2 launch m2sa_ros perception.launch.py` run as a user runs it.

The real launch, launch_ros and ros2launch (built from ros-src/*.repos by make
setup), the launch file and node from a colcon install space, in a shell that sourced
both setup files.

Each test checks what an argument must do to the running node: ``namespace`` and
``cameras`` (the node and every camera's topics, service and actions under the
namespace, active), ``params_file``, ``use_sim_time`` and ``log_level`` (the parameters
the node read, its clock on /clock, its DEBUG lines), and the Ctrl-C sequence both ways
with goals pending: in a terminal (a pseudo-terminal, so launch sees a tty: the terminal's
SIGINT reaches the node and launch forwards none) and with ``-n`` (launch forwards SIGINT).
Either way the node answers every goal and exits 0, and so does launch.
``autostart:=false`` is checked in test_nav2_bond.py, where a lifecycle manager takes over.
"""

from __future__ import annotations

import os
from pathlib import Path
import re
import time
from typing import Any

from node_harness import held_parameters, spinning, wait_until
from node_process import hold_pending_goals, PENDING, segment_client, wait_done
import pytest
from ros_install import LaunchProcess, ros2, ros2_daemon_sees
import yaml

pytestmark = [pytest.mark.ros, pytest.mark.slow, pytest.mark.integration]

NODE = "perception_node"
ACTIVE = "active: listening"


@pytest.fixture
def launch_env(ros_shell, tmp_path) -> dict[str, str]:
    """Return the sourced shell, with launch's and the node's log files in the test's folder and plain output."""
    return {**ros_shell, "ROS_LOG_DIR": str(tmp_path / "ros_log"), "RCUTILS_COLORIZED_OUTPUT": "0"}


def _launch(env: dict[str, str], *arguments: str, terminal: bool = False, noninteractive: bool = False
            ) -> LaunchProcess:
    argv = ["ros2", "launch", *(["-n"] if noninteractive else []), "m2sa_ros", "perception.launch.py", *arguments]
    return LaunchProcess(argv, env, terminal=terminal)


def _stop(launch: LaunchProcess) -> int:
    """End a launch the way a user does (Ctrl-C) and return its exit status."""
    if launch.proc.poll() is None:
        launch.ctrl_c()
    try:
        return launch.wait(timeout=120)  # a bound for a loaded machine: ends when launch exits
    finally:
        launch.kill()


def _params_file(tmp_path: Path, **values: Any) -> Path:
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump({"/**": {"ros__parameters": values}}))
    return path


def _node_lines(output: str, fqn: str, level: str) -> list[str]:
    """Return the lines the node's own logger printed at ``level`` (``[DEBUG] [<stamp>] [ns.perception_node]``)."""
    logger = fqn.strip("/").replace("/", ".")
    return [line for line in output.splitlines() if f"[{level}]" in line and f"[{logger}]" in line]


def test_namespace_and_cameras_put_the_active_node_and_each_cameras_topics_under_the_namespace(
        launch_env, ros_context):
    from rclpy.node import Node

    ns = f"/launch_ns_{os.getpid()}"
    launch = _launch(launch_env, f"namespace:={ns}", "cameras:=[head, wrist]", "image_topic:=color/image_raw")
    probe = Node("launch_graph_probe", context=ros_context)
    try:
        launch.wait_for_line(ACTIVE, timeout=120)
        ros2_daemon_sees(launch_env, f"{ns}/{NODE}")
        state = ros2(launch_env, "lifecycle", "get", f"{ns}/{NODE}")
        assert state.returncode == 0 and state.stdout.strip() == "active [3]", state.stdout + state.stderr

        def graph() -> tuple[set, set, set, set] | None:
            if (NODE, ns) not in probe.get_node_names_and_namespaces():
                return None
            subs = {n for n, _ in probe.get_subscriber_names_and_types_by_node(NODE, ns)}
            pubs = {n for n, _ in probe.get_publisher_names_and_types_by_node(NODE, ns)}
            services = {n for n, _ in probe.get_service_names_and_types_by_node(NODE, ns)}
            topics = {n for n, _ in probe.get_topic_names_and_types()}
            return subs, pubs, services, topics

        def complete() -> tuple[set, set, set, set] | None:
            found = graph()
            return found if found and f"{ns}/wrist/command_stamped" in found[0] else None

        subs, pubs, services, topics = wait_until(complete, 30, f"{ns}/{NODE}'s subscriptions in the graph")
        for camera in ("head", "wrist"):
            # image_topic is a relative name applied under every camera; camera_info is its
            # sibling, as image_transport's CameraSubscriber takes it.
            assert {f"{ns}/{camera}/color/image_raw", f"{ns}/{camera}/command", f"{ns}/{camera}/command_stamped",
                    f"{ns}/{camera}/depth", f"{ns}/{camera}/color/camera_info"} <= subs, subs
            assert {f"{ns}/{camera}/result", f"{ns}/{camera}/overlay", f"{ns}/{camera}/markers"} <= pubs, pubs
            assert f"{ns}/{camera}/segment" in services, services
            # An action shows as its hidden topics.
            assert {f"{ns}/{camera}/segment/_action/feedback", f"{ns}/{camera}/track/_action/status"} <= topics
        assert f"{ns}/{NODE}/change_state" in services and f"{ns}/{NODE}/get_state" in services, services
        assert not any(name.startswith(("/image", "/command", "/result")) for name in subs | pubs), subs | pubs
        assert not _node_lines(launch.output, f"{ns}/{NODE}", "DEBUG"), "log_level defaults to info"
    finally:
        probe.destroy_node()
        code = _stop(launch)
    assert code == 0, launch.output


def test_params_file_use_sim_time_log_level_and_the_node_arguments_reach_the_node(launch_env, ros_context, tmp_path):
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.node import Node
    from rclpy.parameter_client import AsyncParameterClient
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from rosgraph_msgs.msg import Clock

    ns = f"/launch_params_{os.getpid()}"
    params = _params_file(tmp_path, max_queue=7, mask_threshold=0.25, wait_for_image=12.5,
                          diagnostics_period=0.5, device="cpu")
    launch = _launch(launch_env, f"namespace:={ns}", f"params_file:={params}", "use_sim_time:=true",
                     "log_level:=debug", "target_frame:=base_link", "tf_timeout:=0.25", "max_image_age:=30")
    probe = Node("launch_params_probe", context=ros_context)
    clock = probe.create_publisher(Clock, "/clock", QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE))
    sim_start_s = 4242
    ticks = [0]

    def tick() -> None:  # simulated time: 0.1 s per wall 0.05 s, from sim_start_s on
        ticks[0] += 1
        stamp = Clock()
        stamp.clock.sec, stamp.clock.nanosec = sim_start_s + ticks[0] // 10, (ticks[0] % 10) * 100_000_000
        clock.publish(stamp)

    probe.create_timer(0.05, tick)
    stamps: list[tuple[int, int]] = []
    probe.create_subscription(
        DiagnosticArray, "/diagnostics",
        lambda msg: stamps.append((msg.header.stamp.sec, msg.header.stamp.nanosec))
        if any(s.name.startswith(f"{ns}/{NODE}") for s in msg.status) else None, 10)
    try:
        with spinning(ros_context, probe):
            launch.wait_for_line(ACTIVE, timeout=120)
            client = AsyncParameterClient(probe, f"{ns}/{NODE}")
            assert client.wait_for_services(timeout_sec=30), launch.output
            names = ["max_queue", "mask_threshold", "wait_for_image", "diagnostics_period", "use_sim_time",
                     "target_frame", "tf_timeout", "max_image_age"]
            assert held_parameters(client, names, timeout=30) == {
                "max_queue": 7, "mask_threshold": 0.25, "wait_for_image": 12.5, "diagnostics_period": 0.5,
                "use_sim_time": True, "target_frame": "base_link", "tf_timeout": 0.25, "max_image_age": 30.0}
            # The node's clock is /clock: its diagnostics timer runs on simulated time and
            # stamps with it, far from the wall clock.
            wait_until(lambda: len(stamps) >= 2, 60, "diagnostics stamped on the simulated clock")
        sec, _ = stamps[-1]
        assert sim_start_s <= sec < sim_start_s + 3600, stamps
        assert abs(time.time() - sec) > 1e8, stamps
        debug = _node_lines(launch.output, f"{ns}/{NODE}", "DEBUG")
        assert debug, "log_level:=debug shows the node's DEBUG lines:\n" + launch.output[-3000:]
    finally:
        probe.destroy_node()
        code = _stop(launch)
    assert code == 0, launch.output[-3000:]


@pytest.mark.parametrize("mode", ["terminal", "noninteractive"])
def test_ctrl_c_answers_every_pending_goal_and_launch_exits_0(launch_env, ros_context, tmp_path, mode):
    """
    Ctrl-C with PENDING goals held.

    In a terminal the node gets the terminal's SIGINT and launch forwards none (it would send
    SIGTERM at 5 s); with ``-n`` launch forwards SIGINT itself.
    """
    from rclpy.node import Node

    ns = f"/launch_ctrl_c_{mode}_{os.getpid()}"
    params = _params_file(tmp_path, wait_for_image=60.0, max_queue=4, max_image_age=0.0)
    launch = _launch(launch_env, f"namespace:={ns}", f"params_file:={params}",
                     terminal=mode == "terminal", noninteractive=mode == "noninteractive")
    client_node = Node("launch_ctrl_c_planner", context=ros_context)
    client = segment_client(client_node, ns)
    try:
        launch.wait_for_line(ACTIVE, timeout=120)
        with spinning(ros_context, client_node):
            results = hold_pending_goals(client, launch)
            launch.ctrl_c()
            wait_done(results, launch, 120)  # bounds for a loaded machine: each ends on its event
            code = launch.wait(timeout=120)
    finally:
        client_node.destroy_node()
        launch.kill()
    out = launch.output
    assert code == 0, out
    assert re.search(rf"\[{NODE}-1\]: process has finished cleanly", out), out
    assert "SIGINT: shutting down" in out and "Traceback" not in out and "unclean shutdown" not in out, out
    forwarded = f"sending signal 'SIGINT' to process[{NODE}-1]" in out
    assert forwarded == (mode == "noninteractive"), out
    assert "SIGTERM" not in out, out  # the node was done before launch's sigterm_timeout
    answers = sorted((r.result().result.result.request_id, r.result().result.result.error) for r in results)
    assert [rid for rid, _ in answers] == [f"g{i}" for i in range(PENDING)], answers  # each exactly once
    assert all(error.startswith("cancelled: node shutting down (SIGINT)") for _, error in answers), answers
