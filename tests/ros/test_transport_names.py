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
m2sa_ros/cameras/transport_names.py: the names image_transport gives a camera's inputs.

In-process with a stand-in for rclpy's name resolution (a namespace and a remapping
table), then on a real node: the subscriptions a remapped camera opens.
"""

from __future__ import annotations

from fake_models import BoxSegmenter
from m2sa_ros.cameras.transport_names import camera_info_topic, camera_inputs, CameraInputs, transport_topic
import pytest


def _resolver(namespace: str, remaps: dict[str, str]):
    """Stand in for rclpy's resolve_topic_name and its only_expand twin, for relative names under ``namespace``."""
    def expand(name: str) -> str:
        return name if name.startswith("/") else f"{namespace.rstrip('/')}/{name}"

    def resolve(name: str) -> str:
        return expand(remaps.get(name, name))

    return resolve, expand


def test_a_transport_follows_the_resolved_base_topic():
    assert transport_topic("/camera/color/image_raw", "raw") == "/camera/color/image_raw"
    assert transport_topic("/camera/color/image_raw", "compressed") == "/camera/color/image_raw/compressed"
    assert transport_topic("/cam/depth/", "compressedDepth") == "/cam/depth/compressedDepth"


def test_camera_info_is_the_image_topics_sibling_as_image_transport_names_it():
    # image_transport's getCameraInfoTopic: everything up to the last '/', then camera_info.
    assert camera_info_topic("/camera/color/image_raw") == "/camera/color/camera_info"
    assert camera_info_topic("/image") == "/camera_info"
    assert camera_info_topic("/robot1/head/image") == "/robot1/head/camera_info"


def test_a_remapped_image_brings_its_transport_and_camera_info_along():
    resolve, expand = _resolver("/robot1", {"image": "/camera/color/image_raw",
                                            "depth": "/camera/aligned_depth_to_color/image_raw"})
    inputs = camera_inputs(resolve, expand, image="image", depth="depth", camera_info="camera_info",
                           image_transport="compressed", depth_transport="compressedDepth")
    assert inputs == CameraInputs(image="/camera/color/image_raw/compressed",
                                  depth="/camera/aligned_depth_to_color/image_raw/compressedDepth",
                                  camera_info="/camera/color/camera_info")


def test_a_camera_info_remapped_on_its_own_is_kept():
    resolve, expand = _resolver("/", {"image": "/camera/color/image_raw", "camera_info": "/calibrated/info"})
    inputs = camera_inputs(resolve, expand, image="image", depth="depth", camera_info="camera_info",
                           image_transport="raw", depth_transport="raw")
    assert inputs == CameraInputs(image="/camera/color/image_raw", depth="/depth", camera_info="/calibrated/info")


def test_without_remappings_the_names_are_the_nodes_own():
    resolve, expand = _resolver("/front", {})
    inputs = camera_inputs(resolve, expand, image="head/image", depth="head/depth", camera_info="head/camera_info",
                           image_transport="raw", depth_transport="raw")
    assert inputs == CameraInputs(image="/front/head/image", depth="/front/head/depth",
                                  camera_info="/front/head/camera_info")


@pytest.mark.ros
@pytest.mark.integration
@pytest.mark.parametrize("params, expected", [
    # use_compressed with the image remapped: image_transport's name, not /image/compressed
    (["-p", "use_compressed:=true"], {"image": "/camera/color/image_raw/compressed",
                                      "depth": "/camera/aligned_depth_to_color/image_raw",
                                      "camera_info": "/camera/color/camera_info"}),
    # depth_image_proc's parameters choose the transports
    (["-p", "image_transport:=compressed", "-p", "depth_image_transport:=compressedDepth"],
     {"image": "/camera/color/image_raw/compressed",
      "depth": "/camera/aligned_depth_to_color/image_raw/compressedDepth",
      "camera_info": "/camera/color/camera_info"}),
    # and win over the older switches
    (["-p", "use_compressed:=true", "-p", "image_transport:=raw", "-r", "camera_info:=/calibrated/info"],
     {"image": "/camera/color/image_raw", "depth": "/camera/aligned_depth_to_color/image_raw",
      "camera_info": "/calibrated/info"}),
])
def test_a_remapped_node_subscribes_where_image_transport_would(ros_context, params, expected):
    from lifecycle_msgs.msg import State
    from m2sa_ros.perception_node import PerceptionNode
    from rclpy.qos import ReliabilityPolicy

    args = ["--ros-args", "-p", "autostart:=false", "-r", "image:=/camera/color/image_raw",
            "-r", "depth:=/camera/aligned_depth_to_color/image_raw", *params]
    node = PerceptionNode(context=ros_context, cli_args=args, segmenter_factory=lambda _p, _s: BoxSegmenter())
    try:
        node.trigger_configure()
        node.trigger_activate()
        assert node._state_machine.current_state[0] == State.PRIMARY_STATE_ACTIVE
        subscribed = {sub.topic_name: sub for sub in node.subscriptions}
        for role, topic in expected.items():
            assert topic in subscribed, (role, sorted(subscribed))
            # The sensor QoS of the role, whatever the topic is called.
            assert subscribed[topic].qos_profile.reliability == ReliabilityPolicy.BEST_EFFORT, role
        assert "/image/compressed" not in subscribed and "/camera_info" not in subscribed
    finally:
        node.close()
