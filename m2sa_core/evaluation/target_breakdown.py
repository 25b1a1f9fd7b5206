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
gIoU broken down by what each ground-truth target is and by how large it is.

A split's gIoU says how good the masks are, not where they fail. A grasp planner acts on
the remote's button, not on the remote, and a coarse mask grid loses small parts first,
so ``m2sa-eval`` also reports each target's IoU grouped by what it is (``"mug"``,
``"mug's handle"``) and by its area in COCO's ranges (small < 32², medium < 96², large).

Each ground-truth target gets the IoU of the prediction it is paired with, as the split
scores pair them (by order teacher-forced, by Hungarian matching generative), and 0 when
nothing is paired with it. Predictions paired with no target (extra targets) belong to
no group, so the mean over every entry of a breakdown is the split's gIoU only when no
answer named too many targets.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from m2sa_core.evaluation.metrics import mask_iou, pair_masks
import numpy as np

# COCO's area ranges (pycocotools' COCOeval.Params.areaRng), in pixels of the image as evaluated.
SIZE_RANGES: tuple[tuple[str, float, float], ...] = (
    ("small", 0.0, 32.0**2), ("medium", 32.0**2, 96.0**2), ("large", 96.0**2, float("inf")))


def target_kind(category: str, part: str) -> str:
    """``"mug"`` for an object, ``"mug's handle"`` for one of its parts."""
    return f"{category}'s {part}" if part else category


def size_range(area: float) -> str:
    """Return the COCO area range ``area`` (pixels) falls in."""
    for name, low, high in SIZE_RANGES:
        if low <= area < high:
            return name
    raise ValueError(f"area must be >= 0, got {area}")


def score_targets(preds: Sequence[np.ndarray], gts: Sequence[np.ndarray], kinds: Sequence[str], protocol: str,
                  ignore: np.ndarray | None = None,
                  scores: Sequence[float] | None = None) -> list[dict[str, float | str | int]]:
    """
    One entry a ground-truth target: its kind, area, size range and the IoU it was given.

    ``kinds`` names each ground truth (:func:`target_kind`); the area leaves out ``ignore``
    pixels, as the IoU does. With ``scores`` (the model's predicted IoU of each prediction),
    a target paired with a prediction also gets that prediction's ``score``: whether the
    scores a planner or the tracking lost rule reads follow the IoU they predict.
    """
    if scores is not None and len(scores) != len(preds):
        raise ValueError(f"{len(scores)} scores for {len(preds)} predicted masks")
    if len(kinds) != len(gts):
        raise ValueError(f"{len(kinds)} target kinds for {len(gts)} ground-truth masks")
    if not len(gts):
        return []
    pairs, _, _ = pair_masks(preds, gts, protocol, ignore) if len(preds) else ([], [], [])
    given = {j: mask_iou(np.asarray(preds[i], bool), np.asarray(gts[j], bool), ignore) for i, j in pairs}
    predicted = {j: float(scores[i]) for i, j in pairs} if scores is not None else {}
    keep = None if ignore is None else ~np.asarray(ignore, bool)
    entries = []
    for j, (gt, kind) in enumerate(zip(gts, kinds)):
        gt = np.asarray(gt, bool)
        area = int(np.count_nonzero(gt if keep is None else gt & keep))
        entry = {"target": kind, "area": area, "size": size_range(area), "iou": float(given.get(j, 0.0))}
        if j in predicted:
            entry["score"] = predicted[j]
        entries.append(entry)
    return entries


def score_calibration(entries: Sequence[dict]) -> dict[str, float | int]:
    """
    How well predicted scores follow the IoU they predict, over the targets that have one.

    Spearman's rank correlation says whether a higher score means a better mask (what a
    threshold such as the lost rule's ``min_score`` relies on); the mean absolute error
    says whether the score reads as an IoU. Empty when fewer than two targets have scores.
    """
    from scipy.stats import pearsonr, spearmanr

    pairs = [(float(e["score"]), float(e["iou"])) for e in entries if "score" in e]
    if len(pairs) < 2:
        return {}
    score, iou = np.array(pairs).T
    constant = np.ptp(score) == 0 or np.ptp(iou) == 0  # a correlation is undefined then
    return {"targets": len(pairs),
            "spearman": 0.0 if constant else float(spearmanr(score, iou).statistic),
            "pearson": 0.0 if constant else float(pearsonr(score, iou).statistic),
            "mean_abs_error": float(np.abs(score - iou).mean()),
            "mean_score": float(score.mean()), "mean_iou": float(iou.mean())}


def summarise(entries: Sequence[dict]) -> dict[str, dict]:
    """
    Return the gIoU and count per target kind and per size range, worst kind first.

    With them, how the predicted scores follow the IoU (``score_calibration``) where the
    entries have scores.
    """
    out: dict[str, dict] = {}
    for field, order in (("target", None), ("size", [name for name, _, _ in SIZE_RANGES])):
        groups: dict[str, list[float]] = defaultdict(list)
        for entry in entries:
            groups[str(entry[field])].append(float(entry["iou"]))
        keys = ([k for k in order if k in groups] if order else
                sorted(groups, key=lambda k: (float(np.mean(groups[k])), k)))
        out[f"by_{field}"] = {k: {"giou": float(np.mean(groups[k])), "targets": len(groups[k])} for k in keys}
    calibration = score_calibration(entries)
    if calibration:
        out["score_calibration"] = calibration
    return out


def markdown(summary: dict[str, dict[str, dict[str, float | int]]]) -> str:
    """Two tables, by size and by target kind (worst first); empty when nothing was scored."""
    if not summary.get("by_target"):
        return ""
    lines = ["| target size (COCO area) | gIoU | targets |", "|---|---:|---:|"]
    lines += [f"| {k} | {100 * v['giou']:.1f} | {v['targets']} |" for k, v in summary["by_size"].items()]
    lines += ["", "| target | gIoU | targets |", "|---|---:|---:|"]
    lines += [f"| {k} | {100 * v['giou']:.1f} | {v['targets']} |" for k, v in summary["by_target"].items()]
    calibration = summary.get("score_calibration")
    if calibration:
        lines += ["", "The masks' predicted scores (`Target.score`) against their IoU:", "",
                  "| targets | Spearman | Pearson | mean abs. error | mean score | mean IoU |",
                  "|---:|---:|---:|---:|---:|---:|",
                  f"| {calibration['targets']} | {calibration['spearman']:.2f} | {calibration['pearson']:.2f} | "
                  f"{calibration['mean_abs_error']:.3f} | {calibration['mean_score']:.3f} | "
                  f"{calibration['mean_iou']:.3f} |"]
    return "\n".join(lines)
