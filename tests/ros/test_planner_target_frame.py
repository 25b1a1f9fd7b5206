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
examples/planner_client.py with the node's target_frame.

The press point and approach in base_link, from a static transform another node broadcasts,
and ``--frame`` refusing a result whose 3-D values are in another frame. The script runs as
a user runs it, a process of its own against a live node over DDS
(tests/ros/test_planner_example.py covers the rest).
"""

from __future__ import annotations

import uuid

from fake_models import SlowBoxes
from node_harness import give_a_frame_with_depth, planner_node, spinning
from node_process import run_planner_script
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

pytestmark = [pytest.mark.ros, pytest.mark.integration]

OPTICAL = "fuzz_camera"  # node_harness.FRAME: the frame of its images and depth
# The camera 1.2 m above base_link, looking ahead and 20 deg down (optical: z forward, y down).
IN_BASE = ((0.1, 0.0, 1.2), (Rotation.from_euler("y", 20, degrees=True)
                             * Rotation.from_euler("ZYX", [-90, 0, -90], degrees=True)).as_quat())


@pytest.fixture
def node_in_base(ros_context):
    """(namespace, base frame, the node) with target_frame:=<base> and the camera's static transform."""
    from geometry_msgs.msg import TransformStamped
    from rclpy.node import Node
    from tf2_ros import StaticTransformBroadcaster

    suffix = uuid.uuid4().hex[:8]
    namespace, base = f"/arm_camera_{suffix}", f"base_link_{suffix}"
    seg = SlowBoxes()
    node = planner_node(ros_context, seg, namespace, target_frame=base, tf_timeout=5.0)
    tf_node = Node(f"camera_mount_{suffix}", context=ros_context)
    mount = TransformStamped()
    mount.header.frame_id, mount.child_frame_id = base, OPTICAL
    t, q = mount.transform.translation, mount.transform.rotation
    (t.x, t.y, t.z), (q.x, q.y, q.z, q.w) = IN_BASE[0], IN_BASE[1]
    broadcaster = StaticTransformBroadcaster(tf_node)
    broadcaster.sendTransform(mount)
    try:
        with spinning(ros_context, node, tf_node, threads=8):
            give_a_frame_with_depth(node)
            yield namespace, base, node
    finally:
        tf_node.destroy_node()
        node.close()


def test_the_script_prints_press_point_and_approach_in_base_link(node_in_base):
    namespace, base, _node = node_in_base
    done = run_planner_script("the whole mug, please", "--namespace", namespace, "--request-id", "in-base",
                              "--brief", "--frame", base)
    assert done.returncode == 0, done.stdout + done.stderr
    # The optical frame's press point (the 10x8 box's face at 2 m, met head-on; see
    # test_planner_example), moved by the camera's mount.
    rotation, translation = Rotation.from_quat(IN_BASE[1]).as_matrix(), np.array(IN_BASE[0])
    px, py, pz = rotation @ np.array([-0.150, -0.100, 2.000]) + translation
    ax, ay, az = (round(c, 3) + 0.0 for c in rotation @ np.array([0.0, 0.0, -1.0]))
    assert done.stdout.splitlines() == [
        "request in-base: succeeded",
        "  answer: It is the mug_1.",
        f"  mug_1: press at ({px:+.3f}, {py:+.3f}, {pz:.3f}) m in {base}, approach ({ax:+.3f}, {ay:+.3f}, {az:+.3f})",
    ], done.stdout
    assert az > 0.3  # seen from above, the surface faces up: the tool comes down


def test_the_script_refuses_a_result_in_another_frame(node_in_base):
    from rclpy.parameter import Parameter

    namespace, base, node = node_in_base
    assert node.set_parameters([Parameter("target_frame", value="")])[0].successful
    done = run_planner_script("the whole mug, please", "--namespace", namespace, "--brief", "--frame", base)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.strip() == (f"3-D values are in {OPTICAL}, not {base}: the node has no target_frame "
                                   f"(start it with -p target_frame:={base})")
    assert "m, approach (+0.000, +0.000, -1.000)" in done.stdout  # printed, in the optical frame
