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
Interfaces v5's masks: cropped to their box, a 1-bit PNG each, decoded back exactly.

Any mask round-trips (empty, one pixel, touching the edges, the whole frame); the crop is
a PNG that OpenCV's ``imdecode`` reads as image_transport's compressed subscriber and
cv_bridge read it (mono8 0 / 255, the box's size); a malformed one is refused with the
field named. A track's feedback is its result without masks and points, every other
field the same.
"""

from __future__ import annotations

import copy
from types import SimpleNamespace

import cv2
from hypothesis import given, settings
from hypothesis import strategies as st
from m2sa_ros.messages.mask_encoding import (
    amodal_target_mask,
    decode_crop,
    encode_crop,
    has_amodal_mask,
    MaskEncodingError,
    PNG_FORMAT,
    requested_mask,
    target_mask,
)
import numpy as np
import pytest


def _roi(box: tuple[int, int, int, int]) -> SimpleNamespace:
    return SimpleNamespace(x_offset=box[0], y_offset=box[1], width=box[2], height=box[3])


def _target(mask: np.ndarray, amodal: np.ndarray | None = None, mask_type: int = 0) -> SimpleNamespace:
    """Return a Target-shaped message as the node fills it by default (crops only)."""
    box, data = encode_crop(mask)
    none = SimpleNamespace(height=0)
    target = SimpleNamespace(mask=none, amodal_mask=none, bbox=_roi(box), mask_type=mask_type,
                             mask_crop=SimpleNamespace(format=PNG_FORMAT, data=data),
                             amodal_bbox=_roi((0, 0, 0, 0)), amodal_mask_crop=SimpleNamespace(format="", data=b""))
    if amodal is not None:
        box, data = encode_crop(amodal)
        target.amodal_bbox, target.amodal_mask_crop = _roi(box), SimpleNamespace(format=PNG_FORMAT, data=data)
    return target


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40), st.integers(1, 40), st.integers(0, 2**32 - 1), st.floats(0.0, 1.0))
def test_any_mask_round_trips_through_its_crop(height, width, seed, density):
    mask = np.random.default_rng(seed).random((height, width)) < density
    box, data = encode_crop(mask)
    ys, xs = np.nonzero(mask)
    if mask.any():
        assert box == (xs.min(), ys.min(), xs.max() - xs.min() + 1, ys.max() - ys.min() + 1)
    else:
        assert box == (0, 0, 0, 0) and data == b""
    np.testing.assert_array_equal(decode_crop(data, box, height, width), mask)
    np.testing.assert_array_equal(target_mask(_target(mask), height, width), mask)


def test_the_crop_is_a_png_image_transport_and_cv_bridge_decode_to_mono8():
    mask = np.zeros((720, 1280), bool)
    cv2.ellipse(mask.view(np.uint8), (700, 400), (240, 285), 10, 0, 360, 1, -1)
    box, data = encode_crop(mask)
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    # What compressed_image_transport's subscriber and cv_bridge do: imdecode, unchanged.
    crop = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED)
    assert crop.dtype == np.uint8 and crop.shape == (box[3], box[2]) and set(np.unique(crop)) == {0, 255}
    assert PNG_FORMAT.split(";")[0] == "mono8" and "png" in PNG_FORMAT  # the encoding they read before ';'
    assert len(data) * 100 < mask.size  # a 480x570 px ellipse in well under 1 % of a full-frame mono8 mask


def test_the_amodal_mask_and_the_requested_shape():
    visible = np.zeros((12, 16), bool)
    visible[4:8, 5:9] = True
    complete = visible.copy()
    complete[2:8, 3:12] = True
    target = _target(visible, complete, mask_type=1)
    np.testing.assert_array_equal(amodal_target_mask(target, 12, 16), complete)
    np.testing.assert_array_equal(requested_mask(target, 12, 16), complete)
    assert amodal_target_mask(_target(visible), 12, 16) is None
    assert has_amodal_mask(target) and not has_amodal_mask(_target(visible))
    np.testing.assert_array_equal(requested_mask(_target(visible, mask_type=1), 12, 16), visible)
    # An amodal mask that came empty is there, and empty.
    assert not amodal_target_mask(_target(visible, np.zeros_like(visible)), 12, 16).any()


def test_a_full_frame_mask_is_read_when_the_node_sent_one():
    pytest.importorskip("sensor_msgs.msg")
    from m2sa_ros.messages.image_conversion import mask_to_msg

    mask = np.zeros((6, 9), bool)
    mask[1:4, 2:7] = True
    target = _target(np.zeros_like(mask))  # a crop that says otherwise: the full-frame mask wins
    target.mask = mask_to_msg(mask)
    np.testing.assert_array_equal(target_mask(target, 6, 9), mask)
    with pytest.raises(MaskEncodingError, match="mask: 9x6, the image is 10x6"):
        target_mask(target, 6, 10)


@pytest.mark.parametrize("change, message", [
    ({"data": b"not a png"}, r"mask_crop: 9 bytes are not a PNG OpenCV can decode"),
    ({"data": b""}, r"mask_crop: no data for a 5x3 box"),
    ({"format": "rgb8; jpeg compressed bgr8"}, r"mask_crop: format 'rgb8; jpeg compressed bgr8'"),
    ({"box": (2, 1, 5, 4)}, r"mask_crop: the PNG is 5x3, its box 5x4"),
    ({"box": (6, 1, 5, 3)}, r"mask_crop: box 5x3 at \(6, 1\) is outside the 9x6 image"),
    ({"box": (0, 0, 0, 0)}, r"mask_crop: \d+ bytes for an empty box"),
])
def test_a_malformed_crop_is_refused_naming_the_field(change, message):
    mask = np.zeros((6, 9), bool)
    mask[1:4, 2:7] = True
    target = _target(mask)
    if "box" in change:
        target.bbox = _roi(change["box"])
    for name in ("data", "format"):
        if name in change:
            setattr(target.mask_crop, name, change[name])
    with pytest.raises(MaskEncodingError, match=message):
        target_mask(target, 6, 9)


@pytest.mark.ros
def test_feedback_result_leaves_out_masks_and_points_and_keeps_the_rest():
    from m2sa_core.types import Granularity, Result, Target
    from m2sa_ros.messages.cloud_conversion import points_to_cloud
    from m2sa_ros.msg import SegmentationResult, Target as TargetMsg
    from m2sa_ros.messages.result_conversion import feedback_result, HEAVY_TARGET_FIELDS, result_to_msg, ResultOrigin
    from rclpy.serialization import serialize_message
    from std_msgs.msg import Header

    mask = np.zeros((48, 64), bool)
    mask[10:30, 5:40] = True
    result = Result(answer="the mug_1.", targets=[Target("mug_1", "mug", 1, "", Granularity.OBJECT, mask,
                                                         score=0.8, amodal_mask=mask, mask_type="amodal")])
    header = Header(frame_id="cam")
    header.stamp.sec = 5
    msg = result_to_msg(result, ResultOrigin("r", "c", header, 48, 64), 3.0, full_frame_masks=True)
    msg.targets[0].points = points_to_cloud(np.ones((50, 3), np.float32), header)
    msg.targets[0].has_pose, msg.targets[0].size.x = True, 0.2
    # Compared as messages, not as bytes: CDR's alignment padding is not zeroed by the
    # serializer, so two serializations of one message can differ in it.
    before = copy.deepcopy(msg)
    light = feedback_result(msg)
    assert msg == before  # the whole result is left as it was
    assert len(serialize_message(light)) < len(serialize_message(msg)) // 5
    empty = TargetMsg()
    for name in TargetMsg.get_fields_and_field_types():
        want = getattr(empty, name) if name in HEAVY_TARGET_FIELDS else getattr(msg.targets[0], name)
        assert getattr(light.targets[0], name) == want, name
    for name in SegmentationResult.get_fields_and_field_types():
        if name != "targets":
            assert getattr(light, name) == getattr(msg, name), name
