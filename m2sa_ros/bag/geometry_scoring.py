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
The 3-D errors of the node's targets against a bag's geometry ground truth, per split.

Scored like the masks, on the same pairs: a predicted target is compared with the
ground-truth target the mask scoring matched it to (Hungarian matching on IoU,
``m2sa_ros.bag.scoring``), when that pair overlaps (IoU > 0: a pair with no common pixel
is not the same thing, and its 3-D error would measure the matching, not the geometry)
and the ground truth has 3-D truth (something of it is visible). Unmatched and missed
targets already cost gIoU; they are not scored again here.

Per pair (``m2sa_core.evaluation.geometry_errors``, the definitions the geometry's own
tests use):

* **centroid**: ``Target.centroid`` (when ``has_centroid``) against the mean of the true
  visible points, mm;
* **box centre**: ``pose.position`` (when ``has_pose``) against the true box centre, mm;
* **normal**: the angle between the pose's z axis and the true surface normal, degrees;
* **size**: the in-plane box size error, mm: the largest difference between ``size.x``
  / ``size.y`` and the true visible points' extents along the pose's x / y axes;

and per split the share of pairs whose target has a pose. Medians, because a few wrong
masks (a part that spilled onto the table) give errors of decimetres that a mean would
let speak for every target.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
import math
from typing import Any

from m2sa_ros.bag.geometry_truth import GeometryGroundTruth
from m2sa_ros.bag.ground_truth import GroundTruth
from m2sa_ros.bag.scoring import Prediction, Scores
import numpy as np

METRICS = ("centroid_mm", "centre_mm", "normal_deg", "size_mm")


@dataclass(frozen=True)
class PairGeometry:
    """One scored pair: predicted target ``target`` of command ``index`` and its ground truth ``gt``."""

    index: int
    split: str
    target: int
    gt: int
    iou: float
    has_pose: bool
    centroid_mm: float  # NaN without has_centroid
    centre_mm: float  # NaN without has_pose (so are the next two)
    normal_deg: float
    size_mm: float


@dataclass
class GeometryScores:
    """The pairs, and per split (plus ``all`` with several splits) the medians and pose share."""

    pairs: list[PairGeometry] = field(default_factory=list)
    splits: dict[str, dict[str, Any]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)  # one line each: entries left out, and why


def _median(values: Iterable[float]) -> float:
    finite = [v for v in values if not math.isnan(v)]
    return float(np.median(finite)) if finite else math.nan


def summarise(pairs: list[PairGeometry]) -> dict[str, Any]:
    """Pairs, share with a pose, and the median of each error over the pairs that have it."""
    with_pose = sum(p.has_pose for p in pairs)
    return {"pairs": len(pairs), "with_pose": with_pose,
            "pose_share": with_pose / len(pairs) if pairs else math.nan,
            **{f"median_{m}": _median(getattr(p, m) for p in pairs) for m in METRICS}}


def score_geometry(geometry: GeometryGroundTruth, truth: GroundTruth, predictions: dict[int, Prediction | None],
                   scores: Scores, exclude: Iterable[int] = ()) -> GeometryScores:
    """
    Return the 3-D errors of every matched pair (module doc).

    ``exclude``: commands left out (no image in the bag, or their depth could not be
    replayed).
    """
    from m2sa_core.evaluation.geometry_errors import geometry_errors

    out = GeometryScores(problems=list(geometry.problems))
    skip = set(exclude)
    for command in truth.commands:
        score = scores.commands.get(command.index)
        prediction = predictions.get(command.index)
        truths = geometry.commands.get(command.index)
        if command.index in skip or score is None or truths is None or prediction is None:
            continue
        if len(truths) != len(command.targets):
            out.problems.append(f"command {command.index}: the geometry ground truth has {len(truths)} targets, "
                                f"the ground truth {len(command.targets)}; not scored in 3-D")
            continue
        poses = prediction.poses or []
        for p, g in enumerate(score.matched_gt):
            if g is None or score.target_ious[p] <= 0 or truths[g] is None or p >= len(poses):
                continue
            pose, gt = poses[p], truths[g]
            if pose.problem:
                out.problems.append(f"command {command.index} target {p}: {pose.problem}")
            centroid = (float(np.linalg.norm(pose.centroid - gt.centroid) * 1e3) if pose.has_centroid
                        else math.nan)
            nan = math.nan
            centre = normal = size = nan
            if pose.has_pose:
                e = geometry_errors(pose.centroid, pose.rotation, pose.extents, gt.centroid, gt.normal, gt.support,
                                    centre=pose.centre, truth_centre=gt.box_centre)
                centre, normal, size = e.centre_mm, e.normal_deg, e.size_mm
            out.pairs.append(PairGeometry(command.index, command.split or "all", p, g, float(score.target_ious[p]),
                                          pose.has_pose, centroid, centre, normal, size))
    by_split: dict[str, list[PairGeometry]] = {}
    for pair in out.pairs:
        by_split.setdefault(pair.split, []).append(pair)
    out.splits = {split: summarise(pairs) for split, pairs in by_split.items()}
    if len(by_split) > 1:
        out.splits["all"] = summarise(out.pairs)
    return out
