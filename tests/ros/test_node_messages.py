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

"""Result -> SegmentationResult mapping and the diagnostics the node publishes."""

from __future__ import annotations

import dataclasses

from m2sa_core.types import Granularity, Result, Target
from m2sa_ros.diagnostics.node_status import ERROR, NodeStats, OK, status_level, WARN
import numpy as np
import pytest

pytestmark = pytest.mark.ros


class _Centroids:
    """Measures that give a centroid from ``centroid(mask)`` and no geometry (no depth fit)."""

    with_points = False

    def __init__(self, centroid):
        self.centroid = centroid

    def geometry(self, mask):
        return None


def _result(h: int = 6, w: int = 8) -> Result:
    """Return a part asked for as a complete shape (hidden behind something) and a visible object."""
    part = np.zeros((h, w), bool)
    part[1:3, 2:5] = True
    whole = np.zeros((h, w), bool)
    whole[0:4, 1:6] = True
    return Result(answer="Press the television_set_1's button or the mug_2.", truncated=True, targets=[
        Target("television_set_1's button", "television_set", 1, "button", Granularity.PART, part, score=1.7,
               amodal_mask=whole, mask_type="amodal", amodal_score=0.6),
        Target("mug_2", "mug", 2, "", Granularity.OBJECT, whole, score=0.25),
    ])


def test_every_field_is_mapped():
    from m2sa_ros.messages.mask_encoding import amodal_target_mask, PNG_FORMAT, target_mask
    from m2sa_ros.msg import Target as TargetMsg
    from m2sa_ros.messages.result_conversion import result_to_msg, ResultOrigin
    from std_msgs.msg import Header

    header = Header(frame_id="cam")
    header.stamp.sec = 9
    result = _result()
    seen = []

    def centroid(mask):
        seen.append(mask)
        return (0.1, 0.2, 1.5) if mask[0, 1] else None

    msg = result_to_msg(result, ResultOrigin("r1", "turn on the TV", header, 6, 8), 12.5, _Centroids(centroid))
    assert (msg.success, msg.error, msg.height, msg.width, msg.request_id) == (True, "", 6, 8, "r1")
    assert msg.answer == result.answer and msg.inference_ms == pytest.approx(12.5) and msg.truncated
    assert msg.header.frame_id == "cam" and msg.header.stamp.sec == 9
    button, mug = msg.targets
    assert (button.granularity, mug.granularity) == (TargetMsg.GRANULARITY_PART, TargetMsg.GRANULARITY_OBJECT)
    assert (button.part_name, mug.part_name, mug.instance) == ("button", "", 2)
    assert (button.mask_type, mug.mask_type) == (TargetMsg.MASK_AMODAL, TargetMsg.MASK_VISIBLE)
    assert (TargetMsg.MASK_VISIBLE, TargetMsg.MASK_AMODAL) == (0, 1)
    assert button.score == 1.0  # clipped to the documented 0..1
    assert button.amodal_score == pytest.approx(0.6) and mug.amodal_score == 0.0
    # mask is the visible mask even though the command asked for the complete shape, and
    # the box and the centroid come from it, not from the occluder's pixels. v5: both travel
    # cropped to their boxes as PNGs, with the image's header; no full-frame masks by default.
    np.testing.assert_array_equal(target_mask(button, 6, 8), result.targets[0].mask)
    np.testing.assert_array_equal(amodal_target_mask(button, 6, 8), result.targets[0].amodal_mask)
    assert (button.bbox.x_offset, button.bbox.y_offset, button.bbox.width, button.bbox.height) == (2, 1, 3, 2)
    assert (button.amodal_bbox.x_offset, button.amodal_bbox.y_offset, button.amodal_bbox.width,
            button.amodal_bbox.height) == (1, 0, 5, 4)
    assert button.mask_crop.format == button.amodal_mask_crop.format == PNG_FORMAT
    assert button.mask_crop.header.frame_id == button.amodal_mask_crop.header.frame_id == "cam"
    assert button.mask.height == button.amodal_mask.height == 0
    assert (button.label_value, mug.label_value) == (1, 2)  # their values in the labels image
    assert np.array_equal(seen[0], result.targets[0].mask)
    # The model gave the mug no complete shape: neither asked for nor amodal output on.
    assert amodal_target_mask(mug, 6, 8) is None and not mug.amodal_mask_crop.format
    assert not button.has_centroid  # the centroid function found no depth for it
    assert mug.has_centroid and (mug.centroid.x, mug.centroid.y, mug.centroid.z) == (0.1, 0.2, 1.5)


def test_visible_request_without_amodal_output_leaves_amodal_masks_empty():
    from m2sa_ros.messages.result_conversion import result_to_msg, ResultOrigin

    result = _result()
    result.targets[0].amodal_mask, result.targets[0].mask_type = None, "modal"
    result.truncated = False
    msg = result_to_msg(result, ResultOrigin("r", "c", None, 6, 8), 1.0)
    assert all(t.amodal_mask.height == 0 and not t.amodal_mask_crop.format and not t.has_centroid
               and t.mask_type == 0 for t in msg.targets)
    assert not msg.truncated


def test_full_frame_masks_adds_the_v4_masks_beside_the_crops():
    from m2sa_ros.messages.image_conversion import msg_to_mask
    from m2sa_ros.messages.mask_encoding import target_mask
    from m2sa_ros.messages.result_conversion import result_to_msg, ResultOrigin

    result = _result()
    msg = result_to_msg(result, ResultOrigin("r", "c", None, 6, 8), 1.0, full_frame_masks=True)
    button, mug = msg.targets
    assert (button.mask.encoding, button.mask.height, button.mask.width) == ("mono8", 6, 8)
    np.testing.assert_array_equal(msg_to_mask(button.mask), result.targets[0].mask)
    np.testing.assert_array_equal(msg_to_mask(button.amodal_mask), result.targets[0].amodal_mask)
    assert mug.amodal_mask.height == 0
    # The crops are there too, and say the same.
    button.mask = type(button.mask)()
    np.testing.assert_array_equal(target_mask(button, 6, 8), result.targets[0].mask)


def test_mask_of_the_wrong_size_is_refused():
    from m2sa_ros.messages.result_conversion import result_to_msg, ResultOrigin

    with pytest.raises(ValueError, match=r"target 0 \('television_set_1's button'\) has a 8x6 mask for a 16x12 image"):
        result_to_msg(_result(), ResultOrigin("r", "c", None, 12, 16), 1.0)


def test_centroid_markers_for_rviz():
    from m2sa_ros.messages.markers import centroid_markers, CENTROID_NS, LABEL_NS
    from m2sa_ros.messages.result_conversion import result_to_msg, ResultOrigin
    from std_msgs.msg import Header
    from visualization_msgs.msg import Marker

    header = Header(frame_id="camera_color_optical_frame")
    header.stamp.sec = 4
    msg = result_to_msg(_result(), ResultOrigin("r", "c", header, 6, 8), 1.0,
                        _Centroids(lambda m: (0.1, -0.2, 1.5) if m[0, 1] else None))
    markers = centroid_markers(msg).markers
    assert markers[0].action == Marker.DELETEALL  # the previous command's markers vanish
    shown = markers[1:]
    assert [(m.ns, m.id, m.type) for m in shown] == [(CENTROID_NS, 1, Marker.SPHERE),
                                                     (LABEL_NS, 1, Marker.TEXT_VIEW_FACING)]
    sphere, label = shown
    assert (sphere.pose.position.x, sphere.pose.position.y, sphere.pose.position.z) == (0.1, -0.2, 1.5)
    assert all(m.header.frame_id == "camera_color_optical_frame" and m.header.stamp.sec == 4 for m in markers)
    assert label.text.startswith("mug_2") and sphere.color.a > 0


def test_error_result():
    from m2sa_ros.messages.result_conversion import error_result, ResultOrigin

    from m2sa_ros.msg import SegmentationResult

    msg = error_result("queue full: 4 commands already waiting (max_queue)", ResultOrigin("r9", "c", None, 48, 64))
    assert (msg.success, msg.error, msg.request_id, msg.height, msg.width, list(msg.targets)) == (
        False, "queue full: 4 commands already waiting (max_queue)", "r9", 48, 64, [])
    assert (msg.outcome, msg.missing) == (SegmentationResult.OUTCOME_FAILED, "")  # v6


def test_outcome_says_targets_absent_or_failed_and_what_is_missing():
    """Interfaces v6: targets, an answer naming none (with or without the missing words), a failure."""
    from m2sa_core.inference.absence import absence_of, absent_answer
    from m2sa_ros.msg import SegmentationResult as Msg
    from m2sa_ros.messages.result_conversion import feedback_result, result_to_msg, ResultOrigin

    assert (Msg.OUTCOME_UNSET, Msg.OUTCOME_TARGETS, Msg.OUTCOME_ABSENT, Msg.OUTCOME_FAILED) == (0, 1, 2, 3)
    assert Msg().outcome == Msg.OUTCOME_UNSET  # what a field left alone (a pre-v6 node) reads as

    def convert(result: Result):
        return result_to_msg(result, ResultOrigin("r", "c", None, 6, 8), 1.0)

    found = convert(_result())
    assert (found.success, found.outcome, found.missing) == (True, Msg.OUTCOME_TARGETS, "")
    for sentence, words in ((absent_answer("microwave"), "microwave"),
                            (absent_answer("mug_1's handle", 2), "mug_1's handle"),
                            ("Sorry, I cannot help with that.", "")):  # no [SEG], no known sentence
        absent = convert(Result(answer=sentence, raw_answer=sentence, absence=absence_of(sentence)))
        assert (absent.success, absent.error, list(absent.targets)) == (True, "", [])
        assert (absent.outcome, absent.missing, absent.answer) == (Msg.OUTCOME_ABSENT, words, sentence)
        light = feedback_result(absent)  # what a track's feedback carries says the same
        assert (light.outcome, light.missing) == (Msg.OUTCOME_ABSENT, words)
    # A success with no targets is never TARGETS, even from a model that set no absence.
    bare = convert(Result(answer="It is the mug_1."))
    assert (bare.outcome, bare.missing) == (Msg.OUTCOME_ABSENT, "")


def test_stats_and_levels():
    stats = NodeStats(window=2)
    for ms in (10.0, 20.0, 30.0):
        stats.record(True, ms)
    stats.record(False, 0.0, "queue full: 4 commands already waiting")
    snap = stats.snapshot()
    assert snap["mean_latency_ms"] == pytest.approx(25.0)  # window of the last two
    assert (snap["results"], snap["errors"], snap["queue_full"], snap["last_latency_ms"]) == (4, 1, 1, 30.0)
    # Deliberately unconfigured or loading is not an error; a failed configure is.
    assert status_level("unconfigured", False, 0, 0)[0] == OK
    assert status_level("configuring", False, 0, 0) == (OK, "configuring: loading the model")
    assert status_level("unconfigured", False, 0, 0, "could not load the model")[0] == ERROR
    assert status_level("inactive", False, 0, 4)[0] == WARN
    assert status_level("active", True, 0, 4) == (WARN, "running an UNTRAINED model (random weights)")
    assert status_level("active", False, 4, 4)[0] == WARN
    assert status_level("active", False, 1, 4) == (OK, "ready")


def test_diagnostic_array():
    from m2sa_ros.diagnostics.node_status import build_diagnostics

    array = build_diagnostics("/ns/perception_node: m2sa perception", "cpu", WARN, "inactive",
                              {"queue_depth": 2, "mean_latency_ms": 12.345})
    status = array.status[0]
    assert status.level == bytes([WARN]) and status.hardware_id == "cpu"
    assert {kv.key: kv.value for kv in status.values} == {"queue_depth": "2", "mean_latency_ms": "12.3"}


def test_geometry_fields_from_the_bound_depth_and_their_markers():
    """
    The pose is the box centre and axes (z the normal towards the camera), with size, has_pose and points.

    Without geometry an empty, well-formed cloud; the markers add a box and an arrow.
    """
    from m2sa_core.camera import Intrinsics
    from m2sa_core.geometry.registered_depth import register_depth
    from m2sa_ros.messages.cloud_conversion import cloud_to_points
    from m2sa_ros.depth.depth_binding import TargetMeasure
    from m2sa_ros.messages.geometry_conversion import approach
    from m2sa_ros.messages.markers import BOX_NS, CENTROID_NS, LABEL_NS, MIN_BOX_M, NORMAL_NS, target_markers
    from m2sa_ros.messages.result_conversion import result_to_msg, ResultOrigin
    from std_msgs.msg import Header
    from visualization_msgs.msg import Marker

    k = Intrinsics(fx=10.0, fy=10.0, cx=3.5, cy=2.5, width=8, height=6)
    measure = TargetMeasure(register_depth(np.full((6, 8), 1.5, np.float32), k, (6, 8)), centroid_erosion_px=0)
    header = Header(frame_id="camera_color_optical_frame")
    result = _result()
    msg = result_to_msg(result, ResultOrigin("r", "c", header, 6, 8), 1.0, measure)
    button, mug = msg.targets
    assert not button.has_pose and button.points.width == 0  # 6 visible pixels < 10: no pose, no cloud
    assert [f.name for f in button.points.fields] == ["x", "y", "z"]
    assert button.points.header.frame_id == header.frame_id
    assert mug.has_pose and mug.has_centroid
    g = measure.geometry(result.targets[1].mask)
    p, o = mug.pose.position, mug.pose.orientation
    np.testing.assert_allclose([p.x, p.y, p.z], g.centre)
    np.testing.assert_allclose([o.x, o.y, o.z, o.w], g.quaternion)
    np.testing.assert_allclose([mug.size.x, mug.size.y, mug.size.z], g.extents)
    np.testing.assert_allclose(cloud_to_points(mug.points), g.points)
    point, z = approach(mug)
    np.testing.assert_allclose(z, g.normal, atol=1e-9)  # the quaternion's z axis is the normal
    np.testing.assert_allclose(point, g.centre + g.extents[2] / 2 * g.normal)
    assert approach(button) is None

    no_points = dataclasses.replace(measure, with_points=False)
    off = result_to_msg(result, ResultOrigin("r", "c", header, 6, 8), 1.0, no_points)
    assert off.targets[1].has_pose and off.targets[1].points.width == 0 and off.targets[1].pose == mug.pose

    shown = target_markers(msg).markers[1:]
    assert [(m.ns, m.id, m.type) for m in shown] == [
        (CENTROID_NS, 0, Marker.SPHERE), (LABEL_NS, 0, Marker.TEXT_VIEW_FACING),  # the button: a centroid only
        (CENTROID_NS, 1, Marker.SPHERE), (LABEL_NS, 1, Marker.TEXT_VIEW_FACING),
        (BOX_NS, 1, Marker.CUBE), (NORMAL_NS, 1, Marker.ARROW)]
    box, arrow = shown[4:]
    assert box.pose == mug.pose and box.scale.z == MIN_BOX_M  # a flat face: drawn, not 0 thick
    assert (box.scale.x, box.scale.y) == (pytest.approx(mug.size.x), pytest.approx(mug.size.y))
    assert arrow.points[0] == mug.pose.position and arrow.points[1].z < arrow.points[0].z  # towards the camera
    assert {(m.color.r, m.color.g, m.color.b) for m in shown[2:]} == {(box.color.r, box.color.g, box.color.b)}
    assert box.color.a < arrow.color.a  # one colour per target; the box translucent
