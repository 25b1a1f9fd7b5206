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
Scoring the node's answers against a bag's ground truth (generative protocol).

Predictions come from result messages (the node) or from ``Result`` objects (a direct
Segmenter run); both are scored the same way: Hungarian matching on IoU, gIoU, cIoU and
target-count accuracy per split, each target on the shape its ``mask_type`` asks for.
Commands about something not in view (ground truth ``missing``) are left out of the masks'
figures and counted by ``absence_scoring`` instead, from each prediction's ``outcome``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
import math
from typing import Any

from m2sa_ros.bag.ground_truth import BagError, GroundTruth, GroundTruthCommand
import numpy as np

LATENCY_PERCENTILES = (50, 90, 95, 99)


# --------------------------------------------------------------------------- predictions
@dataclass
class Prediction:
    """What the node (or a direct Segmenter run) answered to one command."""

    answer: str
    masks: np.ndarray  # bool [n, H, W]: the visible masks
    labels: list[str]
    scores: list[float]
    success: bool = True
    error: str = ""
    # Per target: the complete shape when the node sent one (else None), and which shape
    # the command asked for ("modal" / "amodal", from Target.mask_type).
    amodal_masks: list[np.ndarray | None] | None = None
    mask_types: list[str] | None = None
    # Per target, its 3-D geometry when the result carried one (m2sa_ros/Target v3:
    # centroid, pose, size), else None; None for a Segmenter run (no depth).
    poses: list["PredictedPose"] | None = None
    # What the result says of the command (interfaces v6): "targets", "absent" or "failed".
    outcome: str = "targets"

    def requested_masks(self) -> np.ndarray:
        """
        Per target, the shape its command asked for.

        The complete one for "amodal" targets that carry it, else the visible one
        (what a planner would use).
        """
        if not len(self.masks):
            return self.masks
        types = self.mask_types or ["modal"] * len(self.masks)
        amodal = self.amodal_masks or [None] * len(self.masks)
        return np.stack([a if t == "amodal" and a is not None else m
                         for m, a, t in zip(self.masks, amodal, types)])


@dataclass(frozen=True)
class PredictedPose:
    """What a Target message says of its 3-D geometry (optical frame, metres)."""

    has_centroid: bool
    centroid: np.ndarray  # (3,); meaningful when has_centroid
    has_pose: bool
    centre: np.ndarray  # (3,) the box centre (pose.position)
    rotation: np.ndarray  # (3, 3) the box axes as columns (pose.orientation); z = the surface normal
    extents: np.ndarray  # (3,) size
    problem: str = ""  # has_pose with an orientation that is no rotation: counted as without a pose

    @classmethod
    def from_target(cls, target: Any) -> "PredictedPose":
        """From an m2sa_ros/Target (v3 fields; a v2 message without them has neither)."""
        from scipy.spatial.transform import Rotation

        c = target.centroid
        has_pose = bool(getattr(target, "has_pose", False))
        rotation = np.eye(3)
        centre = extents = np.full(3, np.nan)
        if has_pose:
            p, o, size = target.pose.position, target.pose.orientation, target.size
            centre = np.array([p.x, p.y, p.z], np.float64)
            quaternion = np.array([o.x, o.y, o.z, o.w], np.float64)
            extents = np.array([size.x, size.y, size.z], np.float64)
            if not np.isfinite(quaternion).all() or np.linalg.norm(quaternion) < 1e-6:
                # The masks are still scored: only this target's 3-D figures are lost, and said.
                return cls(bool(target.has_centroid), np.array([c.x, c.y, c.z], np.float64), False, centre,
                           rotation, extents, f"has_pose but the orientation {quaternion.tolist()} is no rotation")
            rotation = Rotation.from_quat(quaternion).as_matrix()
        return cls(bool(target.has_centroid), np.array([c.x, c.y, c.z], np.float64), has_pose, centre, rotation,
                   extents)


def prediction_from_msg(msg: Any) -> Prediction:
    """
    Return a SegmentationResult message (rclpy) -> Prediction; a failed result has no masks.

    The masks are read as the node sent them (m2sa_ros.messages.mask_encoding: cropped PNGs, or full
    frame with ``full_frame_masks``); a mask that cannot be read raises a ValueError.
    """
    from m2sa_ros.messages.mask_encoding import amodal_target_mask, target_mask
    from m2sa_ros.msg import Target as TargetMsg

    height, width = int(msg.height), int(msg.width)
    masks = [target_mask(t, height, width, what=f"result {msg.request_id}: target {i} mask")
             for i, t in enumerate(msg.targets)]
    stack = np.stack(masks) if masks else np.zeros((0, height, width), dtype=bool)
    amodal = [amodal_target_mask(t, height, width, what=f"result {msg.request_id}: target {i} amodal_mask")
              for i, t in enumerate(msg.targets)]
    types = ["amodal" if t.mask_type == TargetMsg.MASK_AMODAL else "modal" for t in msg.targets]
    poses = [PredictedPose.from_target(t) for t in msg.targets]
    return Prediction(answer=msg.answer, masks=stack, labels=[t.label for t in msg.targets],
                      scores=[float(t.score) for t in msg.targets], success=bool(msg.success), error=msg.error,
                      amodal_masks=amodal, mask_types=types, poses=poses, outcome=outcome_of_msg(msg))


def outcome_of_msg(msg: Any) -> str:
    """
    Return a SegmentationResult's outcome as a word: "targets", "absent" or "failed".

    From ``outcome`` (interfaces v6); a result of an older node (OUTCOME_UNSET) by its
    success and targets, as docs/ROS_INTERFACE.md tells planners to read it.
    """
    from m2sa_ros.msg import SegmentationResult

    outcome = int(getattr(msg, "outcome", SegmentationResult.OUTCOME_UNSET))
    if outcome == SegmentationResult.OUTCOME_FAILED or not msg.success:
        return "failed"
    if outcome == SegmentationResult.OUTCOME_ABSENT:
        return "absent"
    if outcome == SegmentationResult.OUTCOME_TARGETS:
        return "targets"
    return "targets" if len(msg.targets) else "absent"


def prediction_from_result(result: Any, height: int, width: int) -> Prediction:
    """Return an ``m2sa_core.types.Result`` -> Prediction (the direct, ROS-free path)."""
    masks = [np.asarray(t.mask, dtype=bool) for t in result.targets]
    stack = np.stack(masks) if masks else np.zeros((0, height, width), dtype=bool)
    amodal = [None if t.amodal_mask is None else np.asarray(t.amodal_mask, dtype=bool) for t in result.targets]
    return Prediction(answer=result.answer, masks=stack, labels=[t.label for t in result.targets],
                      scores=[float(t.score) for t in result.targets], amodal_masks=amodal,
                      mask_types=[t.mask_type for t in result.targets],
                      outcome="targets" if result.targets else "absent")


# --------------------------------------------------------------------------- scoring
@dataclass
class CommandScore:
    """Per-command outcome of the generative protocol."""

    index: int
    split: str
    target_ious: list[float]  # per predicted target: IoU with its matched ground truth, 0 if unmatched
    matched_gt: list[int | None]  # per predicted target: index of its ground truth
    missed_gt: list[int]  # ground truths no prediction matched
    entry_ious: list[float]  # what entered gIoU (matched pairs, then unmatched entries)


@dataclass
class Scores:
    reports: dict[str, Any]  # split -> m2sa_core.evaluation.metrics.SplitReport
    commands: dict[int, CommandScore]


def score_predictions(truth: GroundTruth, predictions: dict[int, Prediction | None],
                      exclude: Sequence[int] = (),
                      extra_splits: Callable[[GroundTruthCommand], Sequence[str]] | None = None) -> Scores:
    """
    Score the commands of ``truth`` by the generative protocol.

    A command without a prediction (no result) or with a failed result counts as an
    answer with no masks: every ground truth is missed. Each predicted target is scored
    on the shape the node says its command asked for (``Target.mask_type``): the
    complete shape for "amodal" targets that carry one, else the visible mask; the
    ground truth holds the shape the command really asked for, so a node that mistakes
    which one was meant loses IoU there.
    ``exclude`` leaves commands out (e.g. those whose image is not in the bag: a data
    problem, not the node's). ``extra_splits`` names further splits each command also
    counts in (tracking scores a frame under its frame index and under "after_first").
    A command about something not in view (``command.absent``) is not in the masks'
    figures: its predicted targets are each scored IoU 0 in its CommandScore (there is
    nothing they could match), and ``absence_scoring`` counts whether it was rejected.
    """
    from m2sa_core.evaluation.metrics import match_masks, SegmentationEvaluator

    evaluator = SegmentationEvaluator("generative")
    scored: dict[int, CommandScore] = {}
    skip = set(exclude)
    for command in truth.commands:
        if command.index in skip:
            continue
        gt = command.masks()
        pred = predictions.get(command.index)
        if pred is not None:
            masks = pred.requested_masks()
        else:
            masks = np.zeros((0, command.height, command.width), dtype=bool)
        if len(masks) and masks.shape[1:] != gt.shape[1:]:
            raise BagError(f"command {command.index} ('{command.command}'): predicted masks are "
                           f"{masks.shape[2]}x{masks.shape[1]}, the ground truth is {command.width}x{command.height}")
        matching = match_masks(masks, gt)
        target_ious = [0.0] * len(masks)
        matched: list[int | None] = [None] * len(masks)
        for p, g in matching.pairs:
            target_ious[p] = float(matching.iou[p, g])
            matched[p] = g
        entries: Sequence[float] = []
        if not command.absent:
            entries = evaluator.add(masks, gt, split=command.split or "all")
            for split in extra_splits(command) if extra_splits is not None else ():
                evaluator.add(masks, gt, split=split)
        scored[command.index] = CommandScore(command.index, command.split, target_ious, matched,
                                             list(matching.unmatched_gt), [float(v) for v in entries])
    return Scores(evaluator.report(), scored)


def percentiles(values: Sequence[float]) -> dict[str, float]:
    """p50/p90/p95/p99, mean and max of ``values`` (NaN when empty)."""
    if not values:
        return {**{f"p{p}": math.nan for p in LATENCY_PERCENTILES}, "mean": math.nan, "max": math.nan}
    array = np.asarray(values, dtype=np.float64)
    out = {f"p{p}": float(np.percentile(array, p)) for p in LATENCY_PERCENTILES}
    out.update(mean=float(array.mean()), max=float(array.max()))
    return out
