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
m2sa_ros/SegmentationResult -> vision_msgs Detection2DArray / Detection3DArray.

Standard tools (vision_msgs' RViz plugins, trackers, Foxglove, Isaac ROS graphs) read
vision_msgs, not our messages; each target's ROI and oriented box map one to one onto
BoundingBox2D / BoundingBox3D, so the node publishes them beside every result. Kept apart
from the node, like the other ``*_conversion.py`` helpers, so the mapping of every field
is in one small place that tests read against the real vision_msgs (4.x: BoundingBox2D's
centre is a vision_msgs/Pose2D with ``position`` and ``theta``).

vision_msgs is imported inside the functions only: the node imports this module always
and vision_msgs only when ``publish_detections`` is on (:func:`detection_types`), so a
robot without the package runs the node unchanged.

The mapping (docs/ROS_INTERFACE.md, "vision_msgs detections"):

* one detection per target, in the result's order; ``id`` is ``"<request_id>/<index>"``,
  the index into ``SegmentationResult.targets``, so a detection leads back to its result
  and target (:func:`detection_id`); every header carries the result's stamp unchanged;
* one hypothesis per detection: ``class_id`` the target's label, ``score`` its score
  (as float32 rounds it, so it equals the result's ``Target.score`` as a subscriber reads it);
* 2-D: the box is the visible mask's ROI (``Target.bbox``) in pixels, its centre the
  ROI's centre in pixel-edge coordinates (``x_offset + width / 2``: the left edge of
  pixel 0 is 0), its size the ROI's width and height, ``theta`` 0; every target is there,
  an empty mask with a zero-sized box at (0, 0); the hypothesis' pose is left unset
  (a 2-D detector knows no 3-D pose: read ``detections_3d``);
* 3-D: the box is ``Target.pose`` (centre and axes) and ``Target.size``, in the result's
  3-D frame (:func:`geometry_frame`); the hypothesis' pose is the box's pose (covariance
  zero: none is estimated). Targets without a pose (``has_pose`` false: no registered
  depth, too few valid points) are left out, so an index in an id may be missing.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def detection_types() -> tuple[type, type]:
    """
    (Detection2DArray, Detection3DArray) of the installed vision_msgs.

    Raises ImportError when vision_msgs is not installed: the node catches it, logs one
    warning and runs without the detection topics.
    """
    from vision_msgs.msg import Detection2DArray, Detection3DArray

    return Detection2DArray, Detection3DArray


def detection_id(request_id: str, index: int) -> str:
    """Return the id of target ``index`` of the result answering ``request_id``: ``"<request_id>/<index>"``."""
    return f"{request_id}/{int(index)}"


def geometry_frame(result: Any) -> str:
    """
    Return the frame of the result's 3-D values (centroids, poses, points).

    ``SegmentationResult.geometry_frame_id`` (interfaces v4: ``target_frame`` when the
    values were transformed, else the optical frame) when it is set, else the image's
    frame: a result made without the node's frame step (a bag written by a v3 node, a
    hand-made one) leaves it empty, and its 3-D values are in the optical frame.
    """
    return result.geometry_frame_id or result.header.frame_id


def _header(result: Any, frame_id: str) -> Any:
    """Return the result's stamp in ``frame_id``; copied, so a later change to the result changes no detection."""
    from builtin_interfaces.msg import Time
    from std_msgs.msg import Header

    stamp = result.header.stamp
    return Header(stamp=Time(sec=stamp.sec, nanosec=stamp.nanosec), frame_id=frame_id)


def _copy_pose(source: Any, into: Any) -> None:
    """
    geometry_msgs/Pose ``source`` copied field by field into ``into`` (a message's own, default-made pose).

    Copy.deepcopy of a message is several times slower.
    """
    p, o = source.position, source.orientation
    into.position.x, into.position.y, into.position.z = p.x, p.y, p.z
    into.orientation.x, into.orientation.y, into.orientation.z, into.orientation.w = o.x, o.y, o.z, o.w


def _hypothesis(target: Any) -> Any:
    from vision_msgs.msg import ObjectHypothesis, ObjectHypothesisWithPose

    # Rounded as Target.score (float32) travels, so a subscriber reads the same score in both.
    score = float(np.float32(target.score))
    return ObjectHypothesisWithPose(hypothesis=ObjectHypothesis(class_id=target.label, score=score))


def to_detection2d_array(result: Any) -> Any:
    """Return a SegmentationResult's targets as a vision_msgs/Detection2DArray (one per target)."""
    from vision_msgs.msg import BoundingBox2D, Detection2D, Detection2DArray

    array = Detection2DArray(header=_header(result, result.header.frame_id))
    for index, target in enumerate(result.targets):
        roi = target.bbox
        box = BoundingBox2D(size_x=float(roi.width), size_y=float(roi.height))
        box.center.position.x = roi.x_offset + roi.width / 2.0
        box.center.position.y = roi.y_offset + roi.height / 2.0
        array.detections.append(Detection2D(header=_header(result, result.header.frame_id),
                                            results=[_hypothesis(target)], bbox=box,
                                            id=detection_id(result.request_id, index)))
    return array


def to_detection3d_array(result: Any) -> Any:
    """Return a SegmentationResult's targets with a pose as a vision_msgs/Detection3DArray, in its 3-D frame."""
    from vision_msgs.msg import BoundingBox3D, Detection3D, Detection3DArray

    frame = geometry_frame(result)
    array = Detection3DArray(header=_header(result, frame))
    for index, target in enumerate(result.targets):
        if not target.has_pose:
            continue
        hypothesis = _hypothesis(target)
        _copy_pose(target.pose, hypothesis.pose.pose)
        box = BoundingBox3D()
        _copy_pose(target.pose, box.center)
        box.size.x, box.size.y, box.size.z = target.size.x, target.size.y, target.size.z
        array.detections.append(Detection3D(header=_header(result, frame), results=[hypothesis], bbox=box,
                                            id=detection_id(result.request_id, index)))
    return array
