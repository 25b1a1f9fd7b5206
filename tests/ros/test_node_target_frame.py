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
``target_frame`` through the node over DDS, with the real tf2_ros broadcasting from another node.

A node fed a synthetic scene's RGB, registered depth and camera_info answers the same
command on the same frame twice: with ``target_frame`` empty (the optical-frame values,
as v3 gives them) and with it set. The second result's centroids, poses, points,
markers and merged cloud must equal a numpy transform of the first's (float32
tolerance), with every stamp the image's, for:

* a static transform (StaticTransformBroadcaster), found once /tf_static is discovered;
* a moving transform at 50 Hz (TransformBroadcaster), the image stamped between two
  samples: the transform is the interpolation of the two (scipy's Slerp of the rotations,
  the lerp of the translations), not the latest sample;
* a missing transform: the result goes out in the optical frame, says why, one warning
  for all results, /diagnostics counts them;
* a late one: the sample after the image's stamp comes while the node waits, within
  ``tf_timeout``, and the result then uses it.

Tracked frames (the ``track`` action) are moved the same way. Frame names carry a
per-test suffix, so a transform another test broadcasts in the same DDS domain never
takes part.
"""

from __future__ import annotations

from typing import Any
import uuid

from fake_models import SceneSegmenter, TrackingBoxes
from m2sa_ros.tf.frame_transform import transform_msg
from node_harness import DepthFeed, Graph, now_ns, track_through_depths, wait_until
import numpy as np
import pytest
from scenes import synthetic_scene
from scipy.spatial.transform import Rotation, Slerp
from tf_frames import apply_matrix, transform_matrix

pytestmark = [pytest.mark.ros, pytest.mark.integration]

# The usual rotation from a camera's body frame (x forward, z up) to its optical frame
# (z forward, y down), with the camera 1.2 m up and 0.1 m ahead of base_link, pitched 20 deg down.
OPTICAL_IN_BASE = ((0.1, 0.0, 1.2), (Rotation.from_euler("y", 20, degrees=True)
                                     * Rotation.from_euler("ZYX", [-90, 0, -90], degrees=True)).as_quat())


def _names() -> tuple[str, str, str]:
    """(optical, base, odom) frame names of one test."""
    suffix = uuid.uuid4().hex[:8]
    return f"cam_optical_{suffix}", f"base_{suffix}", f"odom_{suffix}"


def _xyz(p) -> np.ndarray:
    return np.array([p.x, p.y, p.z])


def _rotation(o) -> np.ndarray:
    return Rotation.from_quat([o.x, o.y, o.z, o.w]).as_matrix()


def _stamp_ns(stamp) -> int:
    return int(stamp.sec) * 10**9 + int(stamp.nanosec)


class TfNode:
    """Another node broadcasting transforms (static and dynamic) on the graph's executor."""

    def __init__(self, graph: Graph) -> None:
        from rclpy.node import Node
        from tf2_ros import StaticTransformBroadcaster, TransformBroadcaster

        self.node = Node(f"tf_publisher_{uuid.uuid4().hex[:8]}", context=graph.context)
        self.static = StaticTransformBroadcaster(self.node)
        self.dynamic = TransformBroadcaster(self.node)
        graph.executor.add_node(self.node)
        self._graph = graph

    def close(self) -> None:
        self._graph.executor.remove_node(self.node)
        self.node.destroy_node()


@pytest.fixture
def tf_node(graph):
    node = TfNode(graph)
    try:
        yield node
    finally:
        node.close()


class SceneNode:
    """A started node answering with a synthetic scene's targets; its results and views over DDS."""

    def __init__(self, graph: Graph, optical: str, **params: Any) -> None:
        from m2sa_ros.msg import SegmentationResult
        from sensor_msgs.msg import PointCloud2
        from std_msgs.msg import String
        from visualization_msgs.msg import MarkerArray

        self.seg = SceneSegmenter()
        self.feed = DepthFeed(graph, self.seg, optical, **params)
        self.node = self.feed.node
        self.results = graph.collect(SegmentationResult, "result")
        self.markers = graph.collect(MarkerArray, "markers")
        self.clouds = graph.collect(PointCloud2, "target_points")
        self.commands = graph.publisher(String, "command")
        camera = self.node.camera()
        wait_until(lambda: camera.outputs.markers.get_subscription_count() > 0
                   and camera.outputs.points.get_subscription_count() > 0, 10, "the views' subscribers")
        self.scene, self.sd, self.seg.targets, _truths = synthetic_scene(1)

    def set_parameters(self, **params: Any) -> None:
        from rclpy.parameter import Parameter

        results = self.node.set_parameters([Parameter(k, value=v) for k, v in params.items()])
        assert all(r.successful for r in results), [r.reason for r in results]

    def frame(self, stamp_ns: int) -> None:
        """Send the scene's depth, camera_info and image, all stamped ``stamp_ns`` in the optical frame."""
        self.feed.send_scene(stamp_ns, self.scene, self.sd)

    def send(self) -> tuple[int, int, int]:
        """Send the command; the counts of results, markers and clouds before it."""
        from std_msgs.msg import String

        counts = len(self.results), len(self.markers), len(self.clouds)
        self.commands.publish(String(data="every object and its parts"))
        return counts

    def answer(self, counts: tuple[int, int, int], timeout: float = 60.0) -> tuple[Any, Any, Any]:
        """Return (result, markers, merged cloud) of the command sent when the counts were ``counts``."""
        n, m, c = counts
        res = wait_until(lambda: len(self.results) > n and self.results[n], timeout, "a result")
        markers = wait_until(lambda: len(self.markers) > m and self.markers[m], 10, "the markers")
        cloud = wait_until(lambda: len(self.clouds) > c and self.clouds[c], 10, "the merged target points")
        assert res.success, res.error
        return res, markers, cloud

    def command(self, **params: Any) -> tuple[Any, Any, Any]:
        self.set_parameters(**params)
        return self.answer(self.send())


def assert_moved(moved: tuple[Any, Any, Any], optical: tuple[Any, Any, Any], m: np.ndarray, frame: str) -> None:
    """
    Check that ``moved`` (result, markers, cloud) is ``optical`` moved by ``m`` (4x4) into ``frame``.

    Every 3-D value, float32 tolerance; masks, boxes and every stamp unchanged.
    """
    from m2sa_ros.messages.cloud_conversion import cloud_to_points

    res, markers, cloud = moved
    ref, ref_markers, ref_cloud = optical
    stamp = ref.header.stamp
    assert res.geometry_frame_id == frame and res.transform_error == ""
    assert ref.geometry_frame_id == ref.header.frame_id and ref.transform_error == ""
    assert res.header == ref.header  # the image's frame and stamp
    assert len(res.targets) == len(ref.targets) > 0
    with_points = 0
    for a, b in zip(res.targets, ref.targets):
        assert a.mask_crop == b.mask_crop and a.bbox == b.bbox and a.mask_crop.header.frame_id == ref.header.frame_id
        assert (a.has_centroid, a.has_pose, a.size) == (b.has_centroid, b.has_pose, b.size)
        assert a.pose_inlier_fraction == b.pose_inlier_fraction
        if b.has_centroid:
            np.testing.assert_allclose(_xyz(a.centroid), apply_matrix(m, _xyz(b.centroid)), atol=1e-6)
        if b.has_pose:
            np.testing.assert_allclose(_xyz(a.pose.position), apply_matrix(m, _xyz(b.pose.position)), atol=1e-6)
            np.testing.assert_allclose(_rotation(a.pose.orientation), m[:3, :3] @ _rotation(b.pose.orientation),
                                       atol=1e-6)
        assert a.points.header.frame_id == frame and a.points.header.stamp == stamp
        np.testing.assert_allclose(cloud_to_points(a.points), apply_matrix(m, cloud_to_points(b.points)), atol=2e-6)
        with_points += a.points.width > 0
    assert with_points > 0
    # The views: the same markers, moved; the label floats above its sphere (+z here, -y optical).
    assert len(markers.markers) == len(ref_markers.markers)
    for a, b in zip(markers.markers, ref_markers.markers):
        assert a.header.frame_id == frame and a.header.stamp == stamp and (a.ns, a.id, a.type) == (b.ns, b.id, b.type)
        if a.action == a.DELETEALL:
            continue
        if a.ns == "m2sa_labels":
            np.testing.assert_allclose(_xyz(a.pose.position), _xyz(res.targets[a.id].centroid) + [0, 0, 0.05],
                                       atol=1e-9)
        elif a.type == a.ARROW:
            np.testing.assert_allclose([_xyz(p) for p in a.points], apply_matrix(m, [_xyz(p) for p in b.points]),
                                       atol=1e-6)
        else:
            np.testing.assert_allclose(_xyz(a.pose.position), apply_matrix(m, _xyz(b.pose.position)), atol=1e-6)
    assert cloud.header.frame_id == frame and cloud.header.stamp == stamp and cloud.width == ref_cloud.width
    np.testing.assert_allclose(cloud_to_points(cloud), apply_matrix(m, cloud_to_points(ref_cloud)), atol=2e-6)


def test_a_static_transform_moves_every_3d_value(graph, tf_node):
    optical, base, _odom = _names()
    tf_node.static.sendTransform(transform_msg(base, optical, 0, *OPTICAL_IN_BASE))
    scene = SceneNode(graph, optical, tf_timeout=5.0)
    scene.frame(now_ns(scene.node))
    reference = scene.command(target_frame="")
    # The listener starts now; the worker waits (up to tf_timeout) while the executor
    # delivers /tf_static, which reaches the late subscriber (transient local).
    moved = scene.command(target_frame=base)
    assert_moved(moved, reference, transform_matrix(*OPTICAL_IN_BASE), base)
    again = scene.command(target_frame="")  # back: exactly the optical values again
    assert again[0].targets == reference[0].targets and again[0].geometry_frame_id == optical
    assert scene.node.stats.snapshot()["tf_transformed"] == 1


def _odom_base(t: float) -> tuple[np.ndarray, np.ndarray]:
    """Return the robot's pose in odom ``t`` seconds after the start: driving at 0.5 m/s, turning at 1 rad/s."""
    return np.array([0.5 * t, 0.2 * t, 0.0]), Rotation.from_euler("z", 1.0 * t).as_quat()


def test_a_moving_transform_at_50_hz_is_interpolated_at_the_images_stamp(graph, tf_node):
    optical, base, odom = _names()
    tf_node.static.sendTransform(transform_msg(base, optical, 0, *OPTICAL_IN_BASE))
    scene = SceneNode(graph, optical, target_frame=odom, tf_timeout=2.0)
    start = now_ns(scene.node)
    samples: list[int] = []

    def broadcast() -> None:
        stamp = now_ns(scene.node)
        tf_node.dynamic.sendTransform(transform_msg(odom, base, stamp, *_odom_base((stamp - start) / 1e9)))
        samples.append(stamp)

    timer = tf_node.node.create_timer(0.02, broadcast)
    try:
        wait_until(lambda: len(samples) >= 10, 10, "ten transform samples")
        before, after = samples[-4], samples[-3]  # published, and the node has later ones too
        stamp = before + int(0.35 * (after - before))
        scene.frame(stamp)
        reference = scene.command(target_frame="")
        moved = scene.command(target_frame=odom)
    finally:
        tf_node.node.destroy_timer(timer)
    (t0, q0), (t1, q1) = _odom_base((before - start) / 1e9), _odom_base((after - start) / 1e9)
    fraction = (stamp - before) / (after - before)
    rotation = Slerp([0.0, 1.0], Rotation.from_quat([q0, q1]))([fraction])[0]
    interpolated = transform_matrix(t0 + fraction * (t1 - t0), rotation.as_quat())
    m = interpolated @ transform_matrix(*OPTICAL_IN_BASE)
    assert_moved(moved, reference, m, odom)
    # Not the latest sample: at 0.5 m/s and 1 rad/s the latest is centimetres away.
    latest = transform_matrix(*_odom_base((samples[-1] - start) / 1e9)) @ transform_matrix(*OPTICAL_IN_BASE)
    centroid = _xyz(reference[0].targets[0].centroid)
    assert np.linalg.norm(apply_matrix(latest, centroid) - apply_matrix(m, centroid)) > 0.01
    assert _stamp_ns(moved[0].header.stamp) == stamp


def test_a_missing_transform_leaves_the_optical_frame_and_says_why_once(graph, capfd):
    from diagnostic_msgs.msg import DiagnosticArray

    optical, _base, _odom = _names()
    nowhere = f"nowhere_{uuid.uuid4().hex[:8]}"
    diagnostics = graph.collect(DiagnosticArray, "/diagnostics")
    scene = SceneNode(graph, optical, tf_timeout=0.2, diagnostics_period=0.2)
    capfd.readouterr()
    stamps = []
    for i in range(2):
        stamp = now_ns(scene.node)
        stamps.append(stamp)
        scene.frame(stamp)
        reference = scene.command(target_frame="")
        res, markers, cloud = scene.command(target_frame=nowhere)
        assert res.geometry_frame_id == optical and res.header.frame_id == optical
        when = f"{stamp / 1e9:.3f}"
        assert res.transform_error.startswith(f"no transform from {optical} to {nowhere} at {when} s within 0.2 s: ")
        assert res.targets == reference[0].targets  # exactly the optical-frame values
        assert {mk.header.frame_id for mk in markers.markers} == {optical} and cloud.header.frame_id == optical
    err = capfd.readouterr().err
    assert err.count("3-D values stay in") == 1, err  # one warning for both results: one cause
    assert f"no transform from {optical} to {nowhere}" in err

    def counted() -> Any:
        for array in list(diagnostics):
            for status in array.status:
                values = {kv.key: kv.value for kv in status.values}
                if values.get("tf_failed") == "2":
                    return values
        return None

    values = wait_until(counted, 10, "/diagnostics counting the two results left in the optical frame")
    assert values["tf_transformed"] == "0" and values["tf_last_error"].startswith(f"no transform from {optical}")


def test_a_transform_that_comes_late_within_the_timeout_is_waited_for(graph, tf_node, monkeypatch):
    optical, base, odom = _names()
    tf_node.static.sendTransform(transform_msg(base, optical, 0, *OPTICAL_IN_BASE))
    scene = SceneNode(graph, optical, target_frame=odom, tf_timeout=5.0)
    stamp = now_ns(scene.node)
    a = ((1.0, 2.0, 0.0), Rotation.from_euler("z", 30, degrees=True).as_quat())
    b = ((1.2, 2.1, 0.0), Rotation.from_euler("z", 40, degrees=True).as_quat())
    tf_node.dynamic.sendTransform(transform_msg(odom, base, stamp - 10_000_000, *a))  # before the image only
    scene.frame(stamp)
    reference = scene.command(target_frame="")
    scene.set_parameters(target_frame=odom)
    # The worker's lookup found no transform at the image's stamp and waits for one (tf2's
    # wait_for_transform_async): record each wait it starts.
    frames = scene.node._pipeline.frames
    wait, waits = frames._wait, []

    def recording_wait(buffer, target_frame, source_frame, time_, timeout_s):
        waits.append((target_frame, source_frame, time_.nanoseconds))
        return wait(buffer, target_frame, source_frame, time_, timeout_s)

    monkeypatch.setattr(frames, "_wait", recording_wait)
    counts = scene.send()
    wait_until(lambda: waits, 10, "the node to wait for the transform at the image's stamp")
    assert waits == [(odom, optical, stamp)]
    assert len(scene.results) == counts[0], "answered before the transform at the image's stamp existed"
    tf_node.dynamic.sendTransform(transform_msg(odom, base, stamp + 10_000_000, *b))
    moved = scene.answer(counts)
    halfway = Slerp([0.0, 1.0], Rotation.from_quat([a[1], b[1]]))([0.5])[0]
    m = transform_matrix((np.array(a[0]) + np.array(b[0])) / 2, halfway.as_quat()) @ transform_matrix(*OPTICAL_IN_BASE)
    assert_moved(moved, reference, m, odom)


def test_tracked_frames_are_moved_into_the_target_frame(graph, tf_node):
    from m2sa_core.geometry.rigid_transform import RigidTransform
    from m2sa_ros.messages.cloud_conversion import cloud_to_points
    from m2sa_ros.msg import SegmentationResult
    from rclpy.parameter import Parameter

    _optical, base, _odom = _names()
    optical = "camera_optical"  # the frame of scenes.stamped_image's images
    tf_node.static.sendTransform(transform_msg(base, optical, 0, *OPTICAL_IN_BASE))
    feed = DepthFeed(graph, TrackingBoxes(), optical)
    node = feed.node
    results = graph.collect(SegmentationResult, "result")
    wait_until(lambda: node.camera().outputs.result.get_subscription_count() > 0, 10, "the result subscription")
    assert all(r.successful for r in node.set_parameters([Parameter("tf_timeout", value=5.0),
                                                          Parameter("target_frame", value=base)]))
    goal, stamps = track_through_depths(feed, "follow-in-base", (1.0, 1.4))
    back = RigidTransform.from_matrix(np.linalg.inv(transform_matrix(*OPTICAL_IN_BASE)))  # base -> optical
    for feedback, metres, stamp in zip(goal.feedback, (1.0, 1.4), stamps):
        light = feedback.result
        assert light.geometry_frame_id == base and light.transform_error == "", light.transform_error
        # The feedback's pose is the whole result's; the points go once, on the topic (interfaces v5).
        res = wait_until(lambda stamp=stamp: [r for r in results if _stamp_ns(r.header.stamp) == stamp], 10,
                         "the frame's result")[0]
        assert res.geometry_frame_id == base and res.transform_error == "", res.transform_error
        assert _stamp_ns(res.header.stamp) == stamp and res.header.frame_id == optical
        assert light.targets[0].pose == res.targets[0].pose and light.targets[0].points.width == 0
        (target,) = res.targets
        assert target.points.header.frame_id == base and _stamp_ns(target.points.header.stamp) == stamp
        # Back in the optical frame these are the flat depth's values: z = the depth, normal -z.
        assert back.apply(_xyz(target.pose.position))[2] == pytest.approx(metres, abs=1e-6)
        np.testing.assert_allclose(back.apply(cloud_to_points(target.points))[:, 2], metres, atol=2e-6)
        normal = back.rotation @ _rotation(target.pose.orientation)[:, 2]
        np.testing.assert_allclose(normal, [0.0, 0.0, -1.0], atol=1e-6)
