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
The generated interfaces are real: they cross Fast DDS on loopback intact.

One process, two nodes, a multi-threaded executor: what a planner and the perception
node do, minus the model.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

pytestmark = [pytest.mark.ros, pytest.mark.integration]


def _spin_until(executor, predicate, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        executor.spin_once(timeout_sec=0.05)
    return predicate()


def _result_with_two_targets():
    """Two targets: v5's cropped masks (the first with a complete shape), the second full frame as well."""
    from m2sa_ros.messages.mask_encoding import fill_target_masks
    from m2sa_ros.msg import SegmentationResult, Target

    h, w = 480, 640
    result = SegmentationResult(height=h, width=w, request_id="r-1", command="turn on the TV",
                                answer="Press the television_set_1's button and the remote_control_1's button.",
                                success=True, inference_ms=123.5, outcome=SegmentationResult.OUTCOME_TARGETS)
    result.header.frame_id = "camera_color_optical_frame"
    result.header.stamp.sec = 42
    result.header.stamp.nanosec = 7
    for i, (label, obj, part) in enumerate([("television_set_1's button", "television_set", "button"),
                                           ("remote_control_1's button", "remote_control", "button")]):
        mask = np.zeros((h, w), bool)
        mask[10 + 50 * i: 60 + 50 * i, 20 + 30 * i: 90 + 30 * i] = True
        target = Target(label=label, object_name=obj, instance=1, part_name=part,
                        granularity=Target.GRANULARITY_PART, score=0.9 - 0.1 * i, has_centroid=True)
        target.bbox.x_offset, target.bbox.y_offset = 20 + 30 * i, 10 + 50 * i
        target.bbox.width, target.bbox.height = 70, 50
        amodal = None if i else mask | np.pad(mask[5:], ((0, 5), (0, 0)))  # five rows more at the top
        fill_target_masks(target, mask, amodal, result.header, full_frame=i == 1)
        target.label_value = i + 1
        target.centroid.x, target.centroid.y, target.centroid.z = 0.1 * i, -0.2, 1.5
        result.targets.append(target)
    return result


def test_segmentation_result_with_two_targets_arrives_intact(ros_context):
    from m2sa_ros.msg import SegmentationResult
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
    pub_node = Node("iface_pub", context=ros_context)
    sub_node = Node("iface_sub", context=ros_context)
    received: list = []
    # A topic of this test's own: a node another test left on the graph must not answer.
    topic = "iface_dds_test/result"
    sub_node.create_subscription(SegmentationResult, topic, received.append, qos)
    pub = pub_node.create_publisher(SegmentationResult, topic, qos)
    executor = SingleThreadedExecutor(context=ros_context)
    executor.add_node(pub_node)
    executor.add_node(sub_node)
    sent = _result_with_two_targets()
    try:
        assert _spin_until(executor, lambda: pub.get_subscription_count() > 0)
        pub.publish(sent)
        assert _spin_until(executor, lambda: received), "no SegmentationResult received"
    finally:
        executor.shutdown()
        pub_node.destroy_node()
        sub_node.destroy_node()
    from rclpy.serialization import deserialize_message, serialize_message

    got = received[0]
    # Every field, mask bytes included, survived the trip. Compared field by field with
    # what the wire can carry (float32 fields rounded), not as CDR bytes: the serializer
    # leaves alignment padding (after a bool, before a double) unwritten, so two
    # serializations of one message can differ there.
    assert got == deserialize_message(serialize_message(sent), SegmentationResult)
    assert bytes(got.targets[0].mask_crop.data) == bytes(sent.targets[0].mask_crop.data)
    assert len(got.targets) == 2 and [t.label_value for t in got.targets] == [1, 2]
    from m2sa_ros.messages.mask_encoding import amodal_target_mask, target_mask

    first, second = (target_mask(t, 480, 640) for t in got.targets)
    assert first[10:60, 20:90].all() and first.sum() == 50 * 70
    assert amodal_target_mask(got.targets[0], 480, 640)[5:60, 20:90].all()
    assert (got.targets[0].amodal_bbox.y_offset, got.targets[0].amodal_bbox.height) == (5, 55)
    assert second[60:110, 50:120].all() and second.sum() == 50 * 70
    mask = np.frombuffer(bytes(got.targets[1].mask.data), np.uint8).reshape(480, 640)  # full frame too
    assert mask[60:110, 50:120].all() and mask.sum() == 255 * 50 * 70
    assert got.targets[0].granularity == got.targets[0].GRANULARITY_PART == 1
    assert got.header.frame_id == "camera_color_optical_frame" and got.header.stamp.sec == 42
    assert (got.outcome, got.missing) == (SegmentationResult.OUTCOME_TARGETS, "")  # v6


def test_segment_service_round_trip(ros_context):
    from m2sa_ros.srv import Segment
    from rclpy.executors import MultiThreadedExecutor
    from rclpy.node import Node

    server = Node("iface_srv", context=ros_context)
    client_node = Node("iface_cli", context=ros_context)

    def handle(request, response):
        response.result.command = request.command
        response.result.height = request.image.height
        response.result.width = request.image.width
        response.result.success = True
        return response

    server.create_service(Segment, "segment", handle)
    client = client_node.create_client(Segment, "segment")
    executor = MultiThreadedExecutor(context=ros_context)
    executor.add_node(server)
    executor.add_node(client_node)
    try:
        assert _spin_until(executor, client.service_is_ready)
        request = Segment.Request(command="I want to cut the bread", max_image_age=0.5)
        request.image.height, request.image.width = 2, 3
        future = client.call_async(request)
        assert _spin_until(executor, future.done)
    finally:
        executor.shutdown()
        server.destroy_node()
        client_node.destroy_node()
    result = future.result().result
    assert (result.command, result.height, result.width, result.success) == ("I want to cut the bread", 2, 3, True)


def test_segment_action_feedback_and_cancel(ros_context):
    from action_msgs.msg import GoalStatus
    from m2sa_ros.action import Segment
    from node_harness import action_client
    from rclpy.action import ActionServer, CancelResponse
    from rclpy.callback_groups import ReentrantCallbackGroup
    from rclpy.executors import MultiThreadedExecutor
    from rclpy.node import Node

    server_node = Node("iface_action_srv", context=ros_context)
    client_node = Node("iface_action_cli", context=ros_context)
    stages_sent = threading.Event()

    def execute(goal_handle):
        feedback = Segment.Feedback()
        for stage in ("waiting_for_image", "encoding", "generating"):
            feedback.stage, feedback.partial_answer = stage, f"{goal_handle.request.command}:{stage}"
            goal_handle.publish_feedback(feedback)
            time.sleep(0.05)
        stages_sent.set()
        deadline = time.monotonic() + 10
        while not goal_handle.is_cancel_requested and time.monotonic() < deadline:
            time.sleep(0.01)
        result = Segment.Result()
        if goal_handle.is_cancel_requested:
            goal_handle.canceled()
            result.result.success, result.result.error = False, "cancelled"
        else:
            goal_handle.succeed()
        return result

    ActionServer(server_node, Segment, "segment", execute_callback=execute,
                 cancel_callback=lambda _goal: CancelResponse.ACCEPT,
                 callback_group=ReentrantCallbackGroup())
    client = action_client(client_node, Segment, "segment")
    executor = MultiThreadedExecutor(num_threads=4, context=ros_context)
    executor.add_node(server_node)
    executor.add_node(client_node)
    feedback: list = []
    try:
        assert _spin_until(executor, client.server_is_ready)
        goal_future = client.send_goal_async(Segment.Goal(command="grab the mug"),
                                             feedback_callback=lambda fb: feedback.append(fb.feedback))
        assert _spin_until(executor, goal_future.done)
        goal_handle = goal_future.result()
        assert goal_handle.accepted
        assert _spin_until(executor, lambda: stages_sent.is_set() and len(feedback) == 3)
        cancel_future = goal_handle.cancel_goal_async()
        assert _spin_until(executor, cancel_future.done)
        result_future = goal_handle.get_result_async()
        assert _spin_until(executor, result_future.done)
    finally:
        executor.shutdown()
        server_node.destroy_node()
        client_node.destroy_node()
    assert [f.stage for f in feedback] == ["waiting_for_image", "encoding", "generating"]
    assert feedback[-1].partial_answer == "grab the mug:generating"
    assert result_future.result().status == GoalStatus.STATUS_CANCELED
    assert result_future.result().result.result.error == "cancelled"
