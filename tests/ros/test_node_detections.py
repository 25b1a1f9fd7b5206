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
vision_msgs out, through the node: ``detections_2d`` and ``detections_3d`` beside every result.

Over real DDS with the real vision_msgs 4.1.1: a node fed a synthetic scene's RGB, its
registered depth and camera_info answers a command, and a subscriber receives one
Detection2DArray and one Detection3DArray with one detection per target (3-D: per target
with a pose), ids ``<request_id>/<index>``, the targets' ROIs and boxes, the result's stamp
and frames; with ``target_frame`` (a static transform over tf2) the 3-D boxes are in it;
tracked frames publish theirs too; a failed result publishes none. The topics
live under each camera's namespace. In a process of their own: vision_msgs absent (an
import hook) gives one warning and a node that still answers, and with
``publish_detections:=false`` the node never imports vision_msgs.
"""

from __future__ import annotations

import os
from pathlib import Path
import subprocess
import sys
import textwrap

from fake_models import SceneSegmenter, TrackingBoxes
from node_harness import CAMERA_FRAME, DepthFeed, DirectNode, now_ns, track_through_depths, wait_until
import numpy as np
import pytest
from scenes import synthetic_scene

pytestmark = [pytest.mark.ros, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]


def _no_depth_patch(targets, depth: np.ndarray, size: int = 6):
    """
    Return a ``size`` x ``size`` patch no target covers, its depth made invalid (NaN).

    A black, shiny object the camera sees no depth on. Returns the patch's mask.
    """
    covered = np.any([t.mask for t in targets], axis=0)
    for y in range(0, depth.shape[0] - size, size):
        for x in range(0, depth.shape[1] - size, size):
            if not covered[y:y + size, x:x + size].any():
                depth[y:y + size, x:x + size] = np.nan
                patch = np.zeros(depth.shape, bool)
                patch[y:y + size, x:x + size] = True
                return patch
    raise AssertionError("no free patch in the scene")


def _assert_detections_match(result, array_2d, array_3d) -> None:
    """Every field a vision_msgs reader uses, against the result it came from."""
    assert array_2d.header == result.header
    assert [d.id for d in array_2d.detections] == [f"{result.request_id}/{i}" for i in range(len(result.targets))]
    for detection, target in zip(array_2d.detections, result.targets):
        assert detection.header == result.header
        (hypothesis,) = detection.results
        assert (hypothesis.hypothesis.class_id, hypothesis.hypothesis.score) == (target.label, target.score)
        roi, box = target.bbox, detection.bbox
        assert (box.center.position.x, box.center.position.y, box.center.theta) == (
            roi.x_offset + roi.width / 2, roi.y_offset + roi.height / 2, 0.0)
        assert (box.size_x, box.size_y) == (roi.width, roi.height)
    posed = [i for i, t in enumerate(result.targets) if t.has_pose]
    assert array_3d.header.stamp == result.header.stamp
    assert array_3d.header.frame_id == (result.geometry_frame_id or result.header.frame_id)
    assert [d.id for d in array_3d.detections] == [f"{result.request_id}/{i}" for i in posed]
    for detection, index in zip(array_3d.detections, posed):
        target = result.targets[index]
        assert detection.header == array_3d.header
        assert detection.bbox.center == target.pose and detection.bbox.size == target.size
        (hypothesis,) = detection.results
        assert (hypothesis.hypothesis.class_id, hypothesis.hypothesis.score) == (target.label, target.score)
        assert hypothesis.pose.pose == target.pose


def _collect_results_and_detections(graph) -> tuple[list, list, list]:
    """Collect the results, detections_2d and detections_3d the client receives, as they arrive."""
    from m2sa_ros.msg import SegmentationResult
    from vision_msgs.msg import Detection2DArray, Detection3DArray

    return (graph.collect(SegmentationResult, "result"), graph.collect(Detection2DArray, "detections_2d"),
            graph.collect(Detection3DArray, "detections_3d"))


def test_a_command_on_a_scene_with_depth_gives_both_arrays_one_detection_per_target(graph):
    from m2sa_core.types import Granularity, Target
    from m2sa_ros.msg import Command

    seg = SceneSegmenter()
    feed = DepthFeed(graph, seg)
    node = feed.node
    results, arrays_2d, arrays_3d = _collect_results_and_detections(graph)
    commands = graph.publisher(Command, "command_stamped")
    wait_until(lambda: node.camera().outputs.detections_2d.get_subscription_count() > 0
               and node.camera().outputs.detections_3d.get_subscription_count() > 0, 10, "the detections' subscribers")

    scene, sd, targets, _truths = synthetic_scene(0)
    depth = sd.depth.copy()
    patch = _no_depth_patch(targets, depth)
    seg.targets = [*targets, Target("remote_control_9", "remote_control", 9, "", Granularity.OBJECT, patch,
                                    score=0.55)]
    stamp = now_ns(node)
    feed.send_scene(stamp, scene, sd, depth)

    commands.publish(Command(request_id="pick-7", text="every object and its parts"))
    result = wait_until(lambda: results and results[0], 60, "the result")
    array_2d = wait_until(lambda: arrays_2d and arrays_2d[0], 10, "detections_2d")
    array_3d = wait_until(lambda: arrays_3d and arrays_3d[0], 10, "detections_3d")
    assert result.success and len(result.targets) == len(seg.targets) >= 10
    assert sum(t.has_pose for t in result.targets) == len(targets)  # all but the one without depth
    assert not result.targets[-1].has_pose
    assert (result.header.stamp.sec * 10**9 + result.header.stamp.nanosec, result.header.frame_id) == (
        stamp, CAMERA_FRAME)
    assert array_3d.header.frame_id == CAMERA_FRAME  # no target_frame: the optical frame
    assert len(array_2d.detections) == len(seg.targets) and len(array_3d.detections) == len(targets)
    assert array_2d.detections[-1].id == f"pick-7/{len(targets)}"  # in 2-D, not in 3-D
    _assert_detections_match(result, array_2d, array_3d)

    # A failed result publishes no detections: the next arrays are the next good result's.
    commands.publish(Command(request_id="empty-1", text="   "))
    wait_until(lambda: len(results) > 1 and results[1], 10, "the error result")
    assert not results[1].success and results[1].request_id == "empty-1"
    commands.publish(Command(request_id="pick-8", text="every object and its parts"))
    wait_until(lambda: len(results) > 2 and len(arrays_2d) > 1 and len(arrays_3d) > 1, 60, "pick-8's detections")
    # An array for the error result would have come before pick-8's, on the same topics.
    assert {d.id.split("/")[0] for d in arrays_2d[1].detections} == {"pick-8"}
    assert {d.id.split("/")[0] for d in arrays_3d[1].detections} == {"pick-8"}
    _assert_detections_match(results[2], arrays_2d[1], arrays_3d[1])


def test_with_target_frame_the_3d_boxes_are_in_it_and_the_2d_boxes_stay_in_the_image(graph):
    """
    A static base_link -> optical transform from another node (tf2_ros' broadcaster).

    The result's 3-D values move into base_link, and detections_3d says base_link with
    the moved boxes, at the image's stamp; detections_2d stays in the image's frame.
    """
    from geometry_msgs.msg import TransformStamped
    from m2sa_ros.msg import Command
    from tf2_ros.static_transform_broadcaster import StaticTransformBroadcaster

    tf = TransformStamped()
    tf.header.frame_id, tf.child_frame_id = "base_link", CAMERA_FRAME
    tf.transform.translation.x, tf.transform.translation.z = 0.2, 1.1
    tf.transform.rotation.x, tf.transform.rotation.y, tf.transform.rotation.z, tf.transform.rotation.w = \
        -0.5, 0.5, -0.5, 0.5  # optical (z forward) -> base_link (x forward), REP 103
    StaticTransformBroadcaster(graph.client).sendTransform(tf)
    seg = SceneSegmenter()
    feed = DepthFeed(graph, seg, target_frame="base_link", tf_timeout=2.0)
    node = feed.node
    results, arrays_2d, arrays_3d = _collect_results_and_detections(graph)
    commands = graph.publisher(Command, "command_stamped")
    wait_until(lambda: node.camera().outputs.detections_3d.get_subscription_count() > 0, 10, "the subscriber")

    scene, sd, targets, _truths = synthetic_scene(1)
    seg.targets = targets
    feed.send_scene(now_ns(node), scene, sd)
    commands.publish(Command(request_id="base-1", text="every object and its parts"))
    result = wait_until(lambda: results and results[0], 60, "the result")
    array_2d = wait_until(lambda: arrays_2d and arrays_2d[0], 10, "detections_2d")
    array_3d = wait_until(lambda: arrays_3d and arrays_3d[0], 10, "detections_3d")
    assert result.success and result.geometry_frame_id == "base_link", result.transform_error
    assert array_3d.header.frame_id == "base_link" and array_3d.header.stamp == result.header.stamp
    assert array_2d.header.frame_id == CAMERA_FRAME
    assert len(array_3d.detections) == len(targets) > 0
    # base_link's x is the optical z: every box is in front of the robot, 1.1 m up minus the optical y.
    assert all(d.bbox.center.position.x > 0.2 for d in array_3d.detections)
    _assert_detections_match(result, array_2d, array_3d)


def test_tracked_frames_publish_their_detections_with_their_stamps(graph):
    feed = DepthFeed(graph, TrackingBoxes())
    results, arrays_2d, arrays_3d = _collect_results_and_detections(graph)
    goal, _stamps = track_through_depths(feed, "follow-d", (1.0, 1.4, 0.7))
    # The answer and every tracked frame: one result each, and one array of each kind beside it.
    tracked = [f.result for f in goal.feedback]
    assert len(tracked) == 3
    wait_until(lambda: len(arrays_2d) >= len(results) and len(arrays_3d) >= len(results), 10, "every detection")

    def by_stamp(arrays):
        return {(a.header.stamp.sec, a.header.stamp.nanosec): a for a in arrays}

    in_2d, in_3d = by_stamp(arrays_2d), by_stamp(arrays_3d)
    for result, metres in zip(tracked, (1.0, 1.4, 0.7)):
        key = (result.header.stamp.sec, result.header.stamp.nanosec)
        assert result.request_id == "follow-d" and result.targets[0].has_pose
        _assert_detections_match(result, in_2d[key], in_3d[key])
        assert [d.id for d in in_3d[key].detections] == ["follow-d/0"]
        assert in_3d[key].detections[0].bbox.center.position.z == pytest.approx(metres)


def _published_topics(node) -> set[str]:
    return {name for name, _types in node.get_publisher_names_and_types_by_node(node.get_name(),
                                                                                node.get_namespace())}


def test_the_topics_are_under_each_cameras_namespace_and_off_with_the_parameter(module_context):
    from fake_models import BoxSegmenter

    harness = DirectNode(module_context, BoxSegmenter(), namespace="/robot", cameras=["head", "wrist"])
    try:
        wanted = {f"/robot/{name}/detections_{kind}" for name in ("head", "wrist") for kind in ("2d", "3d")}
        for name in ("head", "wrist"):
            camera = harness.node.camera(name)
            assert camera.outputs.detections_2d.topic_name == f"/robot/{name}/detections_2d"
            assert camera.outputs.detections_3d.topic_name == f"/robot/{name}/detections_3d"
        wait_until(lambda: wanted <= _published_topics(harness.node), 30, "the detection topics in the graph")
    finally:
        harness.close()
    harness = DirectNode(module_context, BoxSegmenter(), publish_detections=False)
    try:
        outputs = harness.node.camera().outputs
        assert outputs.detections_2d is None and outputs.detections_3d is None
        # The publishers the node created (rclpy's own list, which the graph mirrors only
        # after discovery): the result's and the cloud's, and no detections'.
        names = {publisher.topic_name for publisher in harness.node.publishers}
        assert {"/result", "/target_points"} <= names, names
        assert not {"/detections_2d", "/detections_3d"} & names, names
    finally:
        harness.close()


# The node in a process of its own, so what it imports is its own: ``absent`` hides
# vision_msgs behind an import hook (a robot without the package); then a command is answered.
_NODE_SCRIPT = textwrap.dedent("""
    import importlib.abc, sys

    mode = sys.argv[1]
    if mode == "absent":
        class NoVisionMsgs(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name == "vision_msgs" or name.startswith("vision_msgs."):
                    raise ModuleNotFoundError(f"No module named {name!r}", name=name)
                return None

        sys.meta_path.insert(0, NoVisionMsgs())

    import rclpy
    from fake_models import BoxSegmenter
    from node_harness import DirectNode, good_image

    context = rclpy.Context()
    rclpy.init(context=context)
    params = {"publish_detections": False} if mode == "off" else {}
    harness = DirectNode(context, BoxSegmenter(), **params)
    harness.node._on_image(good_image(3))
    answers = [harness.command("the mug") for _ in range(2)]
    camera = harness.node.camera()
    print("answered", [a.success and len(a.targets) for a in answers], flush=True)
    print("publishers", camera.outputs.detections_2d is not None, camera.outputs.detections_3d is not None, flush=True)
    print("imported", "vision_msgs" in sys.modules, flush=True)
    harness.close()
    context.try_shutdown()
""")


def _run_node(mode: str) -> tuple[str, str]:
    out = subprocess.run([sys.executable, "-c", _NODE_SCRIPT, mode], capture_output=True, text=True, timeout=180,
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT / "tests")})
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout, out.stderr


def test_without_vision_msgs_one_warning_and_the_node_still_answers():
    stdout, stderr = _run_node("absent")
    assert "answered [1, 1]" in stdout, stdout + stderr
    assert "publishers False False" in stdout and "imported False" in stdout, stdout
    warnings = [line for line in (stdout + stderr).splitlines() if "vision_msgs is not installed" in line]
    assert len(warnings) == 1, stdout + stderr
    assert "WARN" in warnings[0] and "publish_detections:=false" in warnings[0], warnings[0]


def test_publish_detections_off_never_imports_vision_msgs():
    stdout, stderr = _run_node("off")
    assert "answered [1, 1]" in stdout, stdout + stderr
    assert "publishers False False" in stdout and "imported False" in stdout, stdout
    assert "vision_msgs" not in stderr, stderr
