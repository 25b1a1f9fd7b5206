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
A command about something not in view, over DDS: every output says "nothing here", and what.

The model double (fake_models.AbsentBoxes) answers "press the microwave's start button" as
a model that learned to refuse: no [SEG], "There is no microwave here.". The result is a
success with outcome OUTCOME_ABSENT and ``missing`` "microwave" (interfaces v6) whichever
way the command came (topic, service, the Segment action); the vision_msgs arrays beside
it are empty and its labels image is all background; a Track goal on it ends at once, its
result ABSENT and its reason saying what is missing, without a tracked frame. Commands
that name a target say OUTCOME_TARGETS and failures OUTCOME_FAILED, on the same node.

One node serves the whole module (its tests read only what their own requests caused).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fake_models import AbsentBoxes
from node_harness import action_client, Graph, now_ns, track_client, TrackGoal, wait_until
import numpy as np
import pytest
from scenes import H, random_scene, stamped_image, W

pytestmark = [pytest.mark.ros, pytest.mark.integration]

ABSENT_COMMAND = "press the microwave's start button"


@dataclass
class Rig:
    """The module's node, its double, the client's subscriptions and the frame every command is about."""

    graph: Graph
    node: Any
    seg: AbsentBoxes
    results: list
    labels: list
    arrays_2d: list
    arrays_3d: list
    commands: Any
    stamp: int


@pytest.fixture(scope="module")
def rig(module_context):
    from m2sa_ros.msg import Command, SegmentationResult
    from sensor_msgs.msg import Image
    from vision_msgs.msg import Detection2DArray, Detection3DArray

    graph = Graph(module_context)
    try:
        seg = AbsentBoxes("microwave")
        node = graph.add_node(seg)
        graph.start(node)
        results = graph.collect(SegmentationResult, "result")
        labels = graph.collect(Image, "labels")
        arrays_2d, arrays_3d = graph.collect(Detection2DArray, "detections_2d"), graph.collect(
            Detection3DArray, "detections_3d")
        camera = node.camera()
        wait_until(lambda: camera.outputs.labels.get_subscription_count() > 0
                   and camera.outputs.detections_2d.get_subscription_count() > 0
                   and camera.outputs.detections_3d.get_subscription_count() > 0, 10, "the client's subscriptions")
        stamp = now_ns(node)
        graph.publish_frame(node, graph.publisher(Image, "image", 1),
                            stamped_image(random_scene(), stamp, frame_id="camera_optical"))
        yield Rig(graph, node, seg, results, labels, arrays_2d, arrays_3d, graph.publisher(Command, "command_stamped"),
                  stamp)
    finally:
        graph.close()


def _stamp_ns(header: Any) -> int:
    return int(header.stamp.sec) * 10**9 + int(header.stamp.nanosec)


def _command(rig: Rig, request_id: str, text: str) -> tuple[Any, Any, Any, Any]:
    """Send one stamped command; its result and the labels image and the 2-D and 3-D arrays after it."""
    from m2sa_ros.msg import Command

    before = len(rig.labels), len(rig.arrays_2d), len(rig.arrays_3d)
    rig.commands.publish(Command(request_id=request_id, text=text))
    result = wait_until(lambda: [r for r in rig.results if r.request_id == request_id], 30, request_id)[0]
    if not result.success:
        return result, None, None, None
    # Each topic's next message is this result's: one command at a time, published in order.
    wait_until(lambda: len(rig.labels) > before[0] and len(rig.arrays_2d) > before[1]
               and len(rig.arrays_3d) > before[2], 30, f"the labels and arrays of {request_id}")
    return result, rig.labels[before[0]], rig.arrays_2d[before[1]], rig.arrays_3d[before[2]]


def test_an_absent_answer_is_a_success_with_no_target_on_every_output(rig):
    from m2sa_core.inference.absence import absent_answer
    from m2sa_ros.messages.image_conversion import msg_to_labels
    from m2sa_ros.msg import SegmentationResult as Msg

    result, labels, array_2d, array_3d = _command(rig, "absent-1", ABSENT_COMMAND)
    assert (result.success, result.error, result.outcome, result.missing) == (True, "", Msg.OUTCOME_ABSENT,
                                                                              "microwave")
    assert list(result.targets) == [] and result.answer == absent_answer("microwave")
    assert (_stamp_ns(result.header), result.header.frame_id) == (rig.stamp, "camera_optical")
    # The arrays say "no detection on this frame" (a failure sends none), on the result's header.
    assert list(array_2d.detections) == [] and list(array_3d.detections) == []
    assert _stamp_ns(array_2d.header) == _stamp_ns(array_3d.header) == rig.stamp
    # The labels image is the frame's size and all background.
    pixels = msg_to_labels(labels)
    assert _stamp_ns(labels.header) == rig.stamp and pixels.shape == (H, W) and not np.any(pixels)
    assert rig.seg.absent_calls >= 1


def test_targets_and_failures_on_the_same_node_say_their_own_outcome(rig):
    from m2sa_ros.messages.image_conversion import msg_to_labels
    from m2sa_ros.msg import SegmentationResult as Msg

    result, labels, array_2d, _array_3d = _command(rig, "mug-1", "the mug")
    assert (result.success, result.outcome, result.missing) == (True, Msg.OUTCOME_TARGETS, "")
    assert len(result.targets) == 1
    assert len(array_2d.detections) == 1 and msg_to_labels(labels).any()
    failed, *_ = _command(rig, "empty-1", "   ")
    assert (failed.success, failed.outcome, failed.missing) == (False, Msg.OUTCOME_FAILED, "")
    assert failed.error == "empty command"
    # An answer with no [SEG] in words of its own (weights that never learned to refuse): absent, nothing named.
    rig.seg.answer = "I am not sure what you mean."
    try:
        silent, labels, array_2d, _array_3d = _command(rig, "absent-2", "where is the microwave?")
    finally:
        rig.seg.answer = None
    assert (silent.success, silent.outcome, silent.missing) == (True, Msg.OUTCOME_ABSENT, "")
    assert list(silent.targets) == [] and list(array_2d.detections) == [] and not msg_to_labels(labels).any()


def test_the_service_and_the_segment_action_answer_absent_and_the_goal_succeeds(rig):
    from action_msgs.msg import GoalStatus
    from m2sa_ros.action import Segment as SegmentAction
    from m2sa_ros.msg import SegmentationResult as Msg
    from m2sa_ros.srv import Segment

    service = rig.graph.client.create_client(Segment, "segment")
    wait_until(service.service_is_ready, 10, "the segment service")
    response = service.call(Segment.Request(command=ABSENT_COMMAND, request_id="srv-1"), timeout_sec=30)
    assert (response.result.request_id, response.result.success, response.result.outcome,
            response.result.missing) == ("srv-1", True, Msg.OUTCOME_ABSENT, "microwave")

    client = action_client(rig.graph.client, SegmentAction, "segment")
    wait_until(client.server_is_ready, 10, "the segment action")
    future = client.send_goal_async(SegmentAction.Goal(command=ABSENT_COMMAND, request_id="act-1"))
    handle = wait_until(lambda: future.done() and future.result(), 30, "goal acceptance")
    result = handle.get_result_async()
    done = wait_until(lambda: result.done() and result.result(), 30, "the action's result")
    assert done.status == GoalStatus.STATUS_SUCCEEDED  # an answer, not an abort: the planner reads outcome
    assert (done.result.result.request_id, done.result.result.outcome, done.result.result.missing,
            list(done.result.result.targets)) == ("act-1", Msg.OUTCOME_ABSENT, "microwave", [])


def test_a_track_on_an_absent_answer_ends_at_once_saying_what_is_missing(rig):
    from action_msgs.msg import GoalStatus
    from m2sa_ros.action import Track
    from m2sa_ros.msg import SegmentationResult as Msg

    tracked_before = rig.seg.track_calls
    # The feedback as published: rclpy's action client drops a goal's feedback that comes after
    # its result, and here the two leave the node together.
    published: list = []
    topic = rig.graph.client.create_subscription(Track.Impl.FeedbackMessage, "track/_action/feedback",
                                                 lambda m: rig.graph._append(published, m), 100)
    client = track_client(rig.graph)
    wait_until(lambda: topic.get_publisher_count() > 0, 10, "the feedback topic")
    goal = TrackGoal(rig.graph, client, command=ABSENT_COMMAND, request_id="track-1")
    done = goal.result(30)
    assert done.status == GoalStatus.STATUS_SUCCEEDED
    assert done.result.reason == "absent: no microwave in view"
    assert done.result.reason.startswith(Track.Result.REASON_ABSENT_PREFIX) and done.result.frames == 0
    final = done.result.result
    assert (final.request_id, final.success, final.outcome, final.missing, list(final.targets)) == (
        "track-1", True, Msg.OUTCOME_ABSENT, "microwave", [])
    # The answer went out as feedback frame 0, saying the same; no frame was tracked after it.
    goal_id = bytes(goal.handle.goal_id.uuid)
    mine = wait_until(lambda: [m.feedback for m in published if bytes(m.goal_id.uuid) == goal_id], 10,
                      "the answer's feedback")
    assert [(f.frame_seq, f.result.outcome, f.result.missing) for f in mine] == [(0, Msg.OUTCOME_ABSENT, "microwave")]
    assert rig.seg.track_calls == tracked_before
