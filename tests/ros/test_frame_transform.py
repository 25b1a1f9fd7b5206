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
m2sa_ros.tf.frame_transform with the real tf2_ros Buffer.

The lookup at the image's stamp, its bounded wait, the reasons it gives, and a result's 3-D
values moved as numpy moves them.

No DDS here (the Buffer is filled by hand, as the TransformListener fills it); the node
over DDS with broadcasters in another node is tests/ros/test_node_target_frame.py.
"""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

from m2sa_ros.tf.frame_transform import transform_msg
import numpy as np
import pytest
from scipy.spatial.transform import Rotation, Slerp
from tf_frames import apply_matrix, transform_matrix

pytestmark = pytest.mark.ros

OPTICAL = "camera_color_optical_frame"


def _stamp(stamp_ns: int):
    from builtin_interfaces.msg import Time

    sec, nanosec = divmod(int(stamp_ns), 10**9)
    return Time(sec=sec, nanosec=nanosec)


def _result(stamp_ns: int = 12_345_000_000):
    """
    Return a SegmentationResult as result_to_msg builds it.

    Every target's mask, cloud and the result sharing the image's header object; target
    0 with centroid, pose and points, target 1 with a centroid only (no pose: an empty
    cloud).
    """
    from m2sa_ros.messages.cloud_conversion import points_to_cloud
    from m2sa_ros.msg import SegmentationResult, Target
    from std_msgs.msg import Header

    header = Header(stamp=_stamp(stamp_ns), frame_id=OPTICAL)
    msg = SegmentationResult(success=True, height=4, width=4)
    msg.header, msg.geometry_frame_id = header, OPTICAL
    rng = np.random.default_rng(0)
    pose_target = Target(label="mug_1", has_centroid=True, has_pose=True)
    pose_target.centroid.x, pose_target.centroid.y, pose_target.centroid.z = 0.1, -0.05, 1.2
    pose_target.pose.position.x, pose_target.pose.position.y, pose_target.pose.position.z = 0.11, -0.04, 1.19
    q = Rotation.from_euler("xyz", [170, 10, 30], degrees=True).as_quat()
    o = pose_target.pose.orientation
    o.x, o.y, o.z, o.w = q
    pose_target.size.x, pose_target.size.y, pose_target.size.z = 0.08, 0.05, 0.01
    pose_target.points = points_to_cloud(rng.uniform([-0.1, -0.1, 1.1], [0.1, 0.1, 1.3], (40, 3)), header)
    pose_target.mask.header = pose_target.mask_crop.header = header
    centroid_only = Target(label="cup_1", has_centroid=True)
    centroid_only.centroid.x, centroid_only.centroid.y, centroid_only.centroid.z = -0.3, 0.2, 2.5
    centroid_only.points = points_to_cloud(np.empty((0, 3)), header)
    centroid_only.mask.header = centroid_only.mask_crop.header = header
    msg.targets = [pose_target, centroid_only]
    return msg


def _xyz(p) -> np.ndarray:
    return np.array([p.x, p.y, p.z])


def _rotation(o) -> np.ndarray:
    return Rotation.from_quat([o.x, o.y, o.z, o.w]).as_matrix()


# --- the message side -------------------------------------------------------------------
def test_move_result_moves_the_3d_values_as_numpy_does_and_keeps_the_image_side():
    import copy

    from m2sa_core.geometry.rigid_transform import RigidTransform
    from m2sa_ros.messages.cloud_conversion import cloud_to_points
    from m2sa_ros.tf.frame_transform import move_result

    translation, quaternion = (0.3, -0.1, 0.9), Rotation.from_euler("zyx", [-90, 0, -90], degrees=True).as_quat()
    m = transform_matrix(translation, quaternion)
    msg = _result()
    before = copy.deepcopy(msg)
    move_result(msg, RigidTransform.from_quaternion(translation, quaternion), "base_link")

    assert msg.geometry_frame_id == "base_link" and msg.transform_error == ""
    assert msg.header == before.header and msg.header.frame_id == OPTICAL  # the image's, though shared
    for moved, optical in zip(msg.targets, before.targets):
        assert moved.mask == optical.mask and moved.mask.header.frame_id == OPTICAL  # image space
        assert moved.mask_crop == optical.mask_crop and moved.mask_crop.header.frame_id == OPTICAL
        assert moved.bbox == optical.bbox and moved.size == optical.size
        np.testing.assert_allclose(_xyz(moved.centroid), apply_matrix(m, _xyz(optical.centroid)), atol=1e-12)
        assert moved.points.header.frame_id == "base_link" and moved.points.header.stamp == before.header.stamp
        np.testing.assert_allclose(cloud_to_points(moved.points), apply_matrix(m, cloud_to_points(optical.points)),
                                   atol=2e-6)  # float32 coordinates, a few metres: a few ulps
        assert [f.name for f in moved.points.fields] == ["x", "y", "z"]
    pose, optical = msg.targets[0].pose, before.targets[0].pose
    np.testing.assert_allclose(_xyz(pose.position), apply_matrix(m, _xyz(optical.position)), atol=1e-12)
    np.testing.assert_allclose(_rotation(pose.orientation), m[:3, :3] @ _rotation(optical.orientation), atol=1e-9)
    assert not msg.targets[1].has_pose and msg.targets[1].pose == before.targets[1].pose  # identity stays
    assert msg.targets[1].points.width == 0


def test_markers_and_the_merged_cloud_are_in_the_results_3d_frame_with_the_images_stamp():
    from m2sa_core.geometry.rigid_transform import RigidTransform
    from m2sa_ros.messages.cloud_conversion import cloud_to_points
    from m2sa_ros.tf.frame_transform import move_result
    from m2sa_ros.messages.geometry_conversion import merged_cloud
    from m2sa_ros.messages.markers import LABEL_NS, SPHERE_DIAMETER_M, target_markers

    optical = _result()
    optical_markers = target_markers(optical)
    assert {mk.header.frame_id for mk in optical_markers.markers} == {OPTICAL}
    label = next(mk for mk in optical_markers.markers if mk.ns == LABEL_NS)
    np.testing.assert_allclose(_xyz(label.pose.position), _xyz(optical.targets[0].centroid)
                               + [0.0, -SPHERE_DIAMETER_M, 0.0])  # above in an optical frame: -y

    translation, quaternion = (1.0, 2.0, 0.5), Rotation.from_euler("z", 40, degrees=True).as_quat()
    m = transform_matrix(translation, quaternion)
    msg = _result()
    move_result(msg, RigidTransform.from_quaternion(translation, quaternion), "odom")
    array = target_markers(msg)
    assert {mk.header.frame_id for mk in array.markers} == {"odom"}
    assert {(mk.header.stamp.sec, mk.header.stamp.nanosec) for mk in array.markers} == {(12, 345_000_000)}
    assert msg.header.frame_id == OPTICAL  # the markers' header is their own
    for moved, before in zip(array.markers, optical_markers.markers):
        assert (moved.ns, moved.id, moved.type) == (before.ns, before.id, before.type)
        if moved.action == moved.DELETEALL:
            continue
        if moved.ns == LABEL_NS:  # above in a REP 103 body frame: +z
            np.testing.assert_allclose(_xyz(moved.pose.position), _xyz(msg.targets[moved.id].centroid)
                                       + [0.0, 0.0, SPHERE_DIAMETER_M], atol=1e-12)
        elif moved.type == moved.ARROW:  # its two points, in the frame (the marker's pose is the identity)
            np.testing.assert_allclose([_xyz(p) for p in moved.points],
                                       apply_matrix(m, [_xyz(p) for p in before.points]), atol=1e-9)
        else:  # the sphere at the centroid, the box at the pose (a sphere's orientation means nothing)
            np.testing.assert_allclose(_xyz(moved.pose.position), apply_matrix(m, _xyz(before.pose.position)),
                                       atol=1e-9)
            if moved.type == moved.CUBE:
                np.testing.assert_allclose(_rotation(moved.pose.orientation),
                                           m[:3, :3] @ _rotation(before.pose.orientation), atol=1e-9)
                assert moved.scale == before.scale
    cloud = merged_cloud(msg)
    assert cloud.header.frame_id == "odom" and cloud.header.stamp == msg.header.stamp
    np.testing.assert_allclose(cloud_to_points(cloud), apply_matrix(m, cloud_to_points(merged_cloud(optical))),
                               atol=2e-6)


def test_pose_inlier_fraction_is_the_fits_support_and_zero_without_a_pose():
    from m2sa_ros.messages.geometry_conversion import fill_geometry
    from m2sa_ros.msg import Target

    def geometry(has_pose: bool, **extra):
        return SimpleNamespace(has_pose=has_pose, centre=np.zeros(3), quaternion=np.array([0, 0, 0, 1.0]),
                               extents=np.ones(3), points=np.zeros((3, 3), np.float32), **extra)

    for geom, expected in ((geometry(True, inlier_fraction=0.875), 0.875), (geometry(False, inlier_fraction=0.3), 0.0),
                           (None, 0.0)):
        msg = Target()
        fill_geometry(msg, geom, None, True)
        assert msg.pose_inlier_fraction == pytest.approx(expected)
    msg = Target()
    fill_geometry(msg, geometry(True), None, True)  # a fit that does not measure it
    assert np.isnan(msg.pose_inlier_fraction)


# --- lookups with the real tf2 Buffer ----------------------------------------------------
@pytest.fixture
def frames():
    """(ResultFrames over a hand-filled tf2_ros Buffer, the warnings it asked to log)."""
    from m2sa_ros.tf.frame_transform import ResultFrames
    from tf2_ros.buffer import Buffer

    warned: list[tuple[str, str]] = []
    return ResultFrames(lambda key, text: warned.append((key, text)), buffer=Buffer()), warned


def test_the_lookup_is_at_the_images_stamp_interpolated_never_the_latest(frames):
    rf, _ = frames
    a = ((0.0, 0.0, 0.0), Rotation.from_euler("z", 0, degrees=True).as_quat())
    b = ((1.0, 0.0, 0.0), Rotation.from_euler("z", 20, degrees=True).as_quat())
    rf.buffer.set_transform(transform_msg("odom", OPTICAL, 10 * 10**9, *a), "test")
    rf.buffer.set_transform(transform_msg("odom", OPTICAL, 11 * 10**9, *b), "test")
    found = rf.lookup("odom", OPTICAL, _stamp(10_250_000_000), 0.1)
    assert found.error == ""
    np.testing.assert_allclose(found.transform.translation, [0.25, 0.0, 0.0], atol=1e-9)
    expected = Slerp([0.0, 1.0], Rotation.from_quat([a[1], b[1]]))([0.25])[0].as_matrix()
    np.testing.assert_allclose(found.transform.rotation, expected, atol=1e-9)


def test_a_late_sample_is_waited_for_and_a_missing_one_no_longer_than_the_timeout(frames):
    rf, _ = frames
    rf.buffer.set_transform(transform_msg("odom", OPTICAL, 10 * 10**9, (0, 0, 0), (0, 0, 0, 1)), "test")
    late = threading.Timer(0.2, lambda: rf.buffer.set_transform(
        transform_msg("odom", OPTICAL, 12 * 10**9, (2.0, 0, 0), (0, 0, 0, 1)), "test"))
    late.start()
    started = time.monotonic()
    found = rf.lookup("odom", OPTICAL, _stamp(11 * 10**9), 5.0)  # after the last sample: wait for the next
    waited = time.monotonic() - started
    late.join()
    assert found.error == "" and found.transform.translation[0] == pytest.approx(1.0)
    assert waited < 4.0, f"woke {waited:.2f} s after a lookup whose sample came at 0.2 s"  # on arrival, not at 5 s

    started = time.monotonic()
    found = rf.lookup("odom", OPTICAL, _stamp(13 * 10**9), 0.3)
    waited = time.monotonic() - started
    assert found.transform is None and found.cause == "ExtrapolationException:future"
    # Bounded: it gave up about when told to (generous for a loaded CI core).
    assert 0.3 <= waited < 1.3, waited


def test_failures_say_why_and_are_warned_once_per_cause_not_per_result(frames):
    from m2sa_ros.tf.frame_transform import ResultFrames

    rf, warned = frames
    keys: set[str] = set()
    said: list[str] = []

    def warn_once(key: str, text: str) -> None:  # the node's rule: one line per key
        if key not in keys:
            keys.add(key)
            said.append(text)

    rf = ResultFrames(warn_once, buffer=rf.buffer)
    for sec in (9, 10):
        rf.buffer.set_transform(transform_msg("base_link", OPTICAL, sec * 10**9, (0, 0, 1), (0, 0, 0, 1)), "test")
    outcomes = []
    for stamp in (12_345_000_000, 12_400_000_000):  # two results, one cause: later than the transforms
        msg = _result(stamp)
        outcomes.append((rf.apply(msg, "base_link", 0.05, where="head"), msg))
    for found, msg in outcomes:
        assert found.transform is None and msg.geometry_frame_id == OPTICAL
        assert msg.transform_error.startswith(f"no transform from {OPTICAL} to base_link at 12.")
        assert " s within 0.05 s: Lookup would require extrapolation into the future" in msg.transform_error
        assert msg.targets[0].centroid.z == pytest.approx(1.2)  # left in the optical frame
    msg = _result()
    assert rf.apply(msg, "map", 0.05, where="head").cause == "LookupException"  # another cause: said too
    assert '"map" passed to lookupTransform argument target_frame does not exist' in msg.transform_error
    assert len(said) == 2, said
    assert said[0].startswith(f"camera head: 3-D values stay in {OPTICAL}: no transform from {OPTICAL} to base_link")


def test_an_unstamped_image_is_never_given_the_latest_transform(frames):
    rf, _ = frames
    rf.buffer.set_transform_static(transform_msg("base_link", OPTICAL, 0, (0, 0, 1), (0, 0, 0, 1)), "test")
    msg = _result(0)
    found = rf.apply(msg, "base_link", 0.05)
    assert found.transform is None and found.cause == "unstamped"
    assert "the image has no stamp" in msg.transform_error and msg.geometry_frame_id == OPTICAL


def test_without_target_frame_or_for_an_error_result_nothing_is_looked_up(frames):
    rf, _ = frames
    msg = _result()
    assert rf.apply(msg, "", 0.1) is None
    assert (msg.geometry_frame_id, msg.transform_error, msg.targets[0].centroid.z) == (OPTICAL, "", 1.2)
    msg.success = False
    assert rf.apply(msg, "base_link", 0.1) is None and msg.transform_error == ""


def test_without_a_listener_the_result_says_so():
    from m2sa_ros.tf.frame_transform import ResultFrames

    msg = _result()
    found = ResultFrames(lambda k, t: None).apply(msg, "base_link", 0.1)
    assert found.transform is None and "no tf listener" in msg.transform_error


def test_target_frame_parameter_refuses_what_tf2_refuses():
    from m2sa_ros.params.node_params import check_value, SPECS

    assert check_value(SPECS["target_frame"], "base_link") == ("base_link", None)
    assert check_value(SPECS["target_frame"], "") == ("", None)
    assert "must not start with '/'" in check_value(SPECS["target_frame"], "/base_link")[1]
    assert "whitespace" in check_value(SPECS["target_frame"], "base link")[1]
    assert check_value(SPECS["tf_timeout"], 11.0)[1] == "tf_timeout=11.0: must be <= 10.0"
