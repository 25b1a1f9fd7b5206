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
SegmentationResult to vision_msgs Detection2DArray / Detection3DArray (m2sa_ros.messages.detection_conversion).

Field by field against the real vision_msgs 4.1.1 (built
from ros-src/*.repos by `make setup`, or the distribution's): one 2-D detection per
target from its ROI, one 3-D detection per target with a pose from its pose and size, in
the result's 3-D frame, ids "<request_id>/<index>", the result's stamp everywhere. What the
topics carry over DDS: tests/ros/test_node_detections.py.
"""

from __future__ import annotations

from pathlib import Path
import xml.etree.ElementTree as ET

import numpy as np
import pytest

pytestmark = pytest.mark.ros

OPTICAL = "camera_color_optical_frame"


def _result(request_id: str = "pick-7"):
    """Return a result of three targets: a posed box, one without a pose, and an empty mask."""
    from m2sa_ros.msg import SegmentationResult, Target

    msg = SegmentationResult(request_id=request_id, command="the mug and its handle", height=48, width=64,
                             success=True)
    msg.header.frame_id = OPTICAL
    msg.header.stamp.sec, msg.header.stamp.nanosec = 1_700_000_123, 456_789_000
    mug = Target(label="mug_1", object_name="mug", instance=1, score=0.8125)
    mug.bbox.x_offset, mug.bbox.y_offset, mug.bbox.width, mug.bbox.height = 8, 6, 11, 7
    mug.pose.position.x, mug.pose.position.y, mug.pose.position.z = 0.1, -0.05, 0.9
    mug.pose.orientation.x, mug.pose.orientation.y, mug.pose.orientation.z, mug.pose.orientation.w = \
        0.0, 0.0, np.sin(0.2), np.cos(0.2)
    mug.size.x, mug.size.y, mug.size.z = 0.12, 0.08, 0.004
    mug.has_pose = mug.has_centroid = True
    handle = Target(label="mug_1's handle", object_name="mug", instance=1, part_name="handle",
                    granularity=Target.GRANULARITY_PART, score=0.3)  # no valid depth under it: no pose
    handle.bbox.x_offset, handle.bbox.y_offset, handle.bbox.width, handle.bbox.height = 19, 8, 3, 4
    empty = Target(label="cup_2", object_name="cup", instance=2, score=0.0)  # an empty mask: bbox zeros
    msg.targets = [mug, handle, empty]
    return msg


def test_the_vision_msgs_in_use_is_the_real_4_1_1():
    """
    The conversion is tested against the upstream package, not a look-alike.

    Its package.xml beside the imported module says 4.1.1, and BoundingBox2D's centre is
    the 4.x vision_msgs/Pose2D (position x, y and theta), which 3.x spelled x, y, theta.
    """
    import vision_msgs
    from vision_msgs.msg import BoundingBox2D, Pose2D

    prefix = Path(vision_msgs.__file__).resolve().parents[4]  # <prefix>/lib/pythonX.Y/site-packages/vision_msgs
    version = ET.parse(prefix / "share" / "vision_msgs" / "package.xml").getroot().findtext("version")
    assert version == "4.1.1", prefix
    center = BoundingBox2D().center
    assert isinstance(center, Pose2D) and hasattr(center.position, "x") and hasattr(center, "theta")


def test_2d_detections_one_per_target_from_its_roi():
    from m2sa_ros.messages.detection_conversion import to_detection2d_array
    from vision_msgs.msg import Detection2DArray

    result = _result()
    array = to_detection2d_array(result)
    assert isinstance(array, Detection2DArray)
    assert array.header == result.header
    assert [d.id for d in array.detections] == ["pick-7/0", "pick-7/1", "pick-7/2"]
    boxes = [(8 + 11 / 2, 6 + 7 / 2, 11.0, 7.0), (19 + 3 / 2, 8 + 4 / 2, 3.0, 4.0), (0.0, 0.0, 0.0, 0.0)]
    for detection, target, (cx, cy, w, h) in zip(array.detections, result.targets, boxes):
        assert detection.header == result.header
        box = detection.bbox
        assert (box.center.position.x, box.center.position.y, box.center.theta) == (cx, cy, 0.0)
        assert (box.size_x, box.size_y) == (w, h)
        (hypothesis,) = detection.results
        assert hypothesis.hypothesis.class_id == target.label
        assert hypothesis.hypothesis.score == float(np.float32(target.score))
        assert hypothesis.pose.pose.position.z == 0.0 and hypothesis.pose.pose.orientation.w == 1.0  # unset
    assert array.detections[0].results[0].hypothesis.score == float(np.float32(0.8125))


def test_3d_detections_only_targets_with_a_pose_their_box_in_the_results_3d_frame():
    from m2sa_ros.messages.detection_conversion import to_detection3d_array
    from vision_msgs.msg import Detection3DArray

    result = _result()
    array = to_detection3d_array(result)
    assert isinstance(array, Detection3DArray)
    assert array.header.stamp == result.header.stamp and array.header.frame_id == OPTICAL
    (detection,) = array.detections  # the handle has no pose, the empty cup neither
    mug = result.targets[0]
    assert detection.id == "pick-7/0"
    assert detection.header == array.header
    assert detection.bbox.center == mug.pose and detection.bbox.size == mug.size
    (hypothesis,) = detection.results
    assert (hypothesis.hypothesis.class_id, hypothesis.hypothesis.score) == ("mug_1", float(mug.score))
    assert hypothesis.pose.pose == mug.pose
    assert list(hypothesis.pose.covariance) == [0.0] * 36
    # Copies: changing the result afterwards changes no detection already made.
    mug.pose.position.x = 5.0
    result.header.stamp.sec = 1
    assert detection.bbox.center.position.x == 0.1 and hypothesis.pose.pose.position.x == 0.1
    assert array.header.stamp.sec == detection.header.stamp.sec == 1_700_000_123


def test_3d_detections_in_the_geometry_frame_when_the_result_names_one():
    """
    Interfaces v4: a result whose 3-D values were transformed to ``target_frame`` says so in ``geometry_frame_id``.

    The boxes are in that frame, the 2-D ones stay the image's.
    """
    from m2sa_ros.messages.detection_conversion import geometry_frame, to_detection2d_array, to_detection3d_array

    result = _result()
    assert result.geometry_frame_id == "" and geometry_frame(result) == OPTICAL  # empty: the image's frame
    result.geometry_frame_id = OPTICAL  # what the node sets without target_frame
    assert to_detection3d_array(result).header.frame_id == OPTICAL
    result.geometry_frame_id = "base_link"
    array = to_detection3d_array(result)
    assert array.header.frame_id == "base_link" and array.detections[0].header.frame_id == "base_link"
    assert array.header.stamp == result.header.stamp
    assert to_detection2d_array(result).header.frame_id == OPTICAL


def test_a_result_without_targets_gives_empty_arrays_with_its_header():
    from m2sa_ros.messages.detection_conversion import to_detection2d_array, to_detection3d_array

    result = _result()
    result.targets = []
    for array in (to_detection2d_array(result), to_detection3d_array(result)):
        assert array.header == result.header and len(array.detections) == 0


def test_the_arrays_serialise_and_read_back_unchanged():
    """CDR through rclpy's serializer (what rosbag2 writes), every field back as it was."""
    from m2sa_ros.messages.detection_conversion import to_detection2d_array, to_detection3d_array
    from rclpy.serialization import deserialize_message, serialize_message
    from vision_msgs.msg import Detection2DArray, Detection3DArray

    result = _result()
    for array, kind in ((to_detection2d_array(result), Detection2DArray),
                        (to_detection3d_array(result), Detection3DArray)):
        assert deserialize_message(serialize_message(array), kind) == array


def test_detection_ids_name_the_request_and_the_target_index():
    from m2sa_ros.messages.detection_conversion import detection_id

    assert detection_id("pick-7", 0) == "pick-7/0"
    assert detection_id("a1b2c3d4-12", 11) == "a1b2c3d4-12/11"
    assert detection_id("", 3) == "/3"


def test_conversion_of_a_node_result_matches_its_targets():
    """
    The result the node makes converts to boxes that are exactly its masks' tight boxes.

    The node makes it with result_conversion.result_to_msg (masks -> bbox).
    """
    from m2sa_core.types import Granularity, Result, Target
    from m2sa_ros.messages.detection_conversion import to_detection2d_array
    from m2sa_ros.messages.result_conversion import result_to_msg, ResultOrigin
    from std_msgs.msg import Header

    mask = np.zeros((48, 64), bool)
    mask[10:20, 30:35] = True
    other = np.zeros((48, 64), bool)
    other[0, 0] = True
    result = Result(answer="", targets=[Target("mug_1", "mug", 1, "", Granularity.OBJECT, mask, score=0.7),
                                        Target("cup_1", "cup", 1, "", Granularity.OBJECT, other, score=0.6)])
    msg = result_to_msg(result, ResultOrigin("r", "c", Header(frame_id=OPTICAL), 48, 64), 1.0)
    boxes = [(d.bbox.center.position.x, d.bbox.center.position.y, d.bbox.size_x, d.bbox.size_y)
             for d in to_detection2d_array(msg).detections]
    assert boxes == [(32.5, 15.0, 5.0, 10.0), (0.5, 0.5, 1.0, 1.0)]
