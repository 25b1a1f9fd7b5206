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
m2sa_core Result -> m2sa_ros/SegmentationResult, and the error result.

Kept apart from the node so the mapping of every field (granularity and mask-type
constants, bbox, the masks (mask_encoding.py: cropped PNGs, v5, and the full-frame mono8
ones with ``full_frame_masks``), label values, centroid flags, truncation) is in one small
place that tests read directly. ``Target.mask`` is always the visible mask, so the bbox and
the 3-D centroid come from pixels of the object itself, never from whatever occludes
it; the complete shape travels in ``amodal_mask`` with ``mask_type`` saying which of
the two the command asked for. The v3 geometry (pose, size, has_pose, points) comes from
the same visible mask, so an amodal target's box is its visible surface's, never a
guess at the hidden part; geometry_conversion.py fills those fields. :func:`feedback_result`
is a result without its masks and points: what a track's feedback carries (interfaces v5),
the whole result going once, on the result topic.

Every result says its ``outcome`` (interfaces v6), so a planner never has to infer from an
empty target list whether the node failed or found nothing: ``error_result`` is
OUTCOME_FAILED, and :func:`result_to_msg` OUTCOME_TARGETS when the result has targets, else
OUTCOME_ABSENT with the words the answer says are missing (``Result.absence``,
m2sa_core/inference/absence.py). A success with no targets is never TARGETS: whatever the
answer said, there is nothing to act on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from m2sa_core.types import mask_bbox, Result, Target
from m2sa_ros.messages.geometry_conversion import fill_geometry
from m2sa_ros.messages.mask_encoding import fill_target_masks
import numpy as np


@dataclass(frozen=True)
class ResultOrigin:
    """
    What every message about one command on one image carries: the command and the image it was asked of.

    The command's request id and text, the image's header and size.

    Built once where the image is known (the pipeline: from the request and its frame) and
    handed whole to each conversion. A command answered before any image (refused on
    arrival) has no header and a 0 x 0 size.
    """

    request_id: str
    command: str
    header: Any = None
    height: int = 0
    width: int = 0


class TargetMeasures(Protocol):
    """
    How a frame's targets are measured with the depth bound to it (depth_binding.TargetMeasure).

    Each method takes a visible mask: ``centroid`` gives the v2 centroid (None: no valid
    depth under it), ``geometry`` the v3 pose, size and points (a TargetGeometry);
    ``with_points`` is the ``target_points`` parameter.
    """

    with_points: bool

    def centroid(self, mask: np.ndarray) -> tuple[float, float, float] | None: ...

    def geometry(self, mask: np.ndarray) -> Any: ...


def _base(origin: ResultOrigin):
    from m2sa_ros.msg import SegmentationResult

    msg = SegmentationResult(height=int(origin.height), width=int(origin.width), request_id=origin.request_id,
                             command=origin.command)
    if origin.header is not None:
        msg.header = origin.header
        # v4: the 3-D values are in the image's (optical) frame until frame_transform moves them.
        msg.geometry_frame_id = origin.header.frame_id
    return msg


def error_result(error: str, origin: ResultOrigin, inference_ms: float = 0.0):
    """``success=false`` with a reason; ``origin``'s header and size are there when the frame is known."""
    from m2sa_ros.msg import SegmentationResult

    msg = _base(origin)
    msg.success = False
    msg.outcome = SegmentationResult.OUTCOME_FAILED
    msg.error = error
    msg.inference_ms = float(inference_ms)
    return msg


def mask_type_constant(mask_type: str) -> int:
    """m2sa_core's ``Target.mask_type`` ("modal" / "amodal") -> Target.MASK_VISIBLE / MASK_AMODAL."""
    from m2sa_ros.msg import Target as TargetMsg

    return TargetMsg.MASK_AMODAL if mask_type == "amodal" else TargetMsg.MASK_VISIBLE


def target_to_msg(target: Target, header: Any, index: int, measure: TargetMeasures | None = None, *,
                  full_frame_masks: bool = False):
    """
    Convert one target, the ``index``-th of its result, measured with ``measure`` (None: no depth, no 3-D).

    The centroid and geometry come from ``target.mask`` (the visible pixels);
    ``full_frame_masks`` is the parameter of that name.
    """
    from m2sa_ros.msg import Target as TargetMsg

    msg = TargetMsg(label=target.label, object_name=target.object_name,
                    instance=int(target.instance), part_name=target.part_name,
                    granularity=int(target.granularity), mask_type=mask_type_constant(target.mask_type),
                    score=float(np.clip(target.score, 0.0, 1.0)),
                    amodal_score=float(np.clip(target.amodal_score, 0.0, 1.0))
                    if target.amodal_mask is not None else 0.0,
                    label_value=index + 1)
    visible = np.asarray(target.mask, dtype=bool)
    x, y, w, h = mask_bbox(visible)
    msg.bbox.x_offset, msg.bbox.y_offset, msg.bbox.width, msg.bbox.height = x, y, w, h
    # m2sa_core fills amodal_mask exactly when the command asked for the complete shape
    # or the Segmenter's amodal output is on, so its presence is the rule.
    fill_target_masks(msg, visible, None if target.amodal_mask is None else np.asarray(target.amodal_mask, dtype=bool),
                      header, full_frame=full_frame_masks)
    centroid = measure.centroid(visible) if measure is not None else None
    if centroid is not None:
        msg.centroid.x, msg.centroid.y, msg.centroid.z = (float(c) for c in centroid)
        msg.has_centroid = True
    fill_geometry(msg, measure.geometry(visible) if measure is not None else None, header,
                  measure is not None and measure.with_points)
    return msg


def result_to_msg(result: Result, origin: ResultOrigin, inference_ms: float, measure: TargetMeasures | None = None,
                  *, full_frame_masks: bool = False):
    """
    Return a successful SegmentationResult; masks must have ``origin``'s image size.

    ``measure`` measures each visible mask with the depth bound to the frame (None: no
    depth, nothing measured, has_centroid / has_pose false); ``full_frame_masks`` adds the
    v4 full-frame masks to the cropped ones.
    """
    height, width = int(origin.height), int(origin.width)
    msg = _base(origin)
    for i, target in enumerate(result.targets):
        for name, mask in (("mask", target.mask), ("amodal_mask", target.amodal_mask)):
            if mask is not None and mask.shape != (height, width):
                raise ValueError(f"target {i} ('{target.label}') has a {mask.shape[1]}x{mask.shape[0]} "
                                 f"{name} for a {width}x{height} image")
        msg.targets.append(target_to_msg(target, origin.header, i, measure, full_frame_masks=full_frame_masks))
    msg.answer = result.answer
    msg.truncated = bool(getattr(result, "truncated", False))
    msg.success = True
    msg.outcome, msg.missing = outcome_of(result)
    msg.inference_ms = float(inference_ms)
    return msg


def outcome_of(result: Result) -> tuple[int, str]:
    """
    Return a successful result's (``outcome``, ``missing``): TARGETS with targets, else ABSENT.

    ``missing`` is the absence's words ("" when the answer names none, or when a result
    without ``absence`` has no targets: e.g. a model double, or an older m2sa_core).
    """
    from m2sa_ros.msg import SegmentationResult

    if result.targets:
        return SegmentationResult.OUTCOME_TARGETS, ""
    absence = getattr(result, "absence", None)
    return SegmentationResult.OUTCOME_ABSENT, absence.missing if absence is not None else ""


# A Target's per-pixel and per-point payloads: what feedback_result leaves out.
HEAVY_TARGET_FIELDS = ("mask", "amodal_mask", "mask_crop", "amodal_mask_crop", "points")


def feedback_result(msg: Any) -> Any:
    """
    Return ``msg`` without its masks and points: what a track's feedback carries (interfaces v5).

    Every tracked frame goes out on the result topic whole; the feedback sent with it keeps
    what a follower needs - the request id, header, labels, label values, boxes, scores,
    centroids, poses and sizes - and leaves ``HEAVY_TARGET_FIELDS`` empty, so a frame's masks
    and points travel once. ``msg`` is not changed; the copy shares its smaller sub-messages.
    """
    from m2sa_ros.msg import SegmentationResult, Target as TargetMsg

    light = SegmentationResult()
    for name in SegmentationResult.get_fields_and_field_types():
        if name != "targets":
            setattr(light, name, getattr(msg, name))
    for target in msg.targets:
        copy = TargetMsg()
        for name in TargetMsg.get_fields_and_field_types():
            if name not in HEAVY_TARGET_FIELDS:
                setattr(copy, name, getattr(target, name))
        light.targets.append(copy)
    return light
