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
A terminal Ctrl-C under ``ros2 launch`` ends the installed node cleanly.

The node gets SIGINT from the terminal, a second SIGINT forwarded by launch anywhere from
0 to 2 s later, and SIGTERM 5 s after the first if it is still running (node_process.py).
Whatever the spacing, the process must exit 0 after answering every command it held,
also while a command is running and while a track is running. The entry point is the
installed console script with the shipped model, as a user starts it; the colcon install
space's ``lib/m2sa_ros/perception_node`` is checked the same way in test_colcon_build.py.
"""

from __future__ import annotations

import os
from pathlib import Path
import sys
import time
from typing import Any

from node_harness import action_client, spinning
from node_process import (
    answer_then_ctrl_c,
    assert_clean_exit,
    ctrl_c_under_launch,
    in_background,
    NodeProcess,
    send_goals,
    start_active_node,
    wait_done,
)
import numpy as np
import pytest

pytestmark = [pytest.mark.ros, pytest.mark.slow, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
ENTRY = Path(sys.executable).parent / "m2sa-perception"
SPACINGS_S = [0.0, 0.15, 0.4, 1.0, 2.0]


def start_node(ns: str, *params: str) -> NodeProcess:
    if not ENTRY.exists():
        pytest.skip(f"{ENTRY} not installed (make setup)")
    return start_active_node([str(ENTRY), "--ros-args", "-r", f"__ns:={ns}", *params], cwd=ROOT)


@pytest.mark.parametrize("second_sigint_after", SPACINGS_S, ids=[f"second-{s}s" for s in SPACINGS_S])
def test_ctrl_c_under_launch_answers_pending_commands_and_exits_0(ros_context, second_sigint_after):
    ns = f"/ctrl_c_{os.getpid()}_{int(second_sigint_after * 1000)}"
    node = start_node(ns, "-p", "wait_for_image:=60.0", "-p", "max_queue:=4", "-p", "max_image_age:=0.0")
    answer_then_ctrl_c(ns, node, ros_context, second_sigint_after)


def _tv_scene() -> np.ndarray:
    """Return a synthetic scene with a television set, for which the shipped model names one target."""
    from m2sa_core.data.synthetic.scene import render_scene

    scene = render_scene(np.random.default_rng(3), size=320)
    assert "television_set" in [o.category for o in scene.objects]
    return scene.image


@pytest.mark.parametrize("second_sigint_after", [0.4, 1.0], ids=["second-0.4s", "second-1.0s"])
def test_ctrl_c_under_launch_ends_a_running_track_with_its_result_and_exits_0(ros_context, second_sigint_after):
    from m2sa_ros.action import Track
    from m2sa_ros.messages.image_conversion import rgb_to_msg
    from rclpy.node import Node
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    ns = f"/ctrl_c_track_{os.getpid()}_{int(second_sigint_after * 1000)}"
    node = start_node(ns, "-p", "image_reliability:=reliable")
    client_node = Node("ctrl_c_tracker", context=ros_context)
    frame = rgb_to_msg(_tv_scene())
    frame.header.frame_id = "camera_optical"
    images = client_node.create_publisher(type(frame), f"{ns}/image",
                                          QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE))

    def publish_frame() -> None:
        frame.header.stamp = client_node.get_clock().now().to_msg()
        images.publish(frame)

    client_node.create_timer(0.1, publish_frame)
    client = action_client(client_node, Track, f"{ns}/track")
    feedback: list[Any] = []
    try:
        with spinning(ros_context, client_node):
            assert client.wait_for_server(timeout_sec=60), node.output
            [handle] = send_goals(client, [Track.Goal(command="I want to turn on the TV", request_id="t1")], node,
                                  feedback_callback=feedback.append)
            assert handle.accepted, node.output
            result = handle.get_result_async()
            deadline = time.monotonic() + 60
            while sum(1 for f in feedback if f.feedback.frame_seq > 0) < 2:  # the answer, then tracked frames
                assert not result.done(), (result.result().result.reason, node.output)
                assert time.monotonic() < deadline, node.output
                time.sleep(0.05)
            sender, sent = in_background(lambda: ctrl_c_under_launch(node.proc, second_sigint_after))
            wait_done([result], node, 30)
            code = node.wait(timeout=30)
            sender.join(10)
        assert_clean_exit(node, sent[0], code)
        ended = result.result().result
        assert ended.reason.startswith("node shutting down (SIGINT)"), ended.reason
        assert ended.result.request_id == "t1" and ended.frames >= 1, (ended.frames, ended.result.request_id)
    finally:
        node.kill()
        client_node.destroy_node()
