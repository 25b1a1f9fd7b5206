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
How well SAM segments from prompts: the check of staged training's first stage.

Every region of a ``mask_annotations`` file is prompted twice, with its exact box and
with one point at the pixel of its visible mask furthest from the border (the most
central one), and scored by IoU against its visible mask (first mask token) and its
complete shape (second token). Reported as mean IoU over regions, for objects and parts
apart: a SAM that cannot outline a mug's handle from a box around it will not outline it
from a [SEG] either. Box-prompt IoU is also given by the region's size in COCO's area
ranges (``box_miou_small``, with ``regions_small`` counting them): the M2SA model's masks
fail first on small targets, and this is where a change to SAM's training shows whether
it reaches them, before M2SA training has run.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Sequence

import cv2
from m2sa_core.evaluation.metrics import mask_iou
from m2sa_core.evaluation.target_breakdown import size_range, SIZE_RANGES
from m2sa_core.model.m2sa import AMODAL_MASK_TOKEN, VISIBLE_MASK_TOKEN
from m2sa_core.model.preprocess import ImageProcessor
from m2sa_core.model.promptable import prompted_mask_logits
from m2sa_core.types import mask_bbox
import numpy as np
import torch
from training.eval_mode import eval_mode


def central_point(mask: np.ndarray) -> list[float]:
    """(x, y) of the mask pixel furthest from the mask's border."""
    distance = cv2.distanceTransform(np.pad(mask, 1).astype(np.uint8), cv2.DIST_L2, 3)[1:-1, 1:-1]
    y, x = np.unravel_index(int(distance.argmax()), distance.shape)
    return [float(x), float(y)]


@torch.no_grad()
def evaluate_promptable(model, records: Sequence, max_items: int = 0) -> dict[str, float]:
    """Mean IoU per prompt kind and granularity over the regions of ``records``."""
    chosen = records[:max_items] if max_items else records
    with eval_mode(model):
        scores = _region_ious(model, chosen)
    report = {key: float(np.mean(values)) for key, values in sorted(scores.items())}
    report["regions"] = len(scores.get("box_miou", []))
    for size, _, _ in SIZE_RANGES:
        report[f"regions_{size}"] = len(scores.get(f"box_miou_{size}", []))
    return report


def _region_ious(model, records: Sequence) -> dict[str, list[float]]:
    """
    Return the IoU of every non-empty region of ``records`` from its box and from its central point.

    Keyed by prompt kind and granularity (``box_miou_part``), and from its box by the size
    of its visible mask in the image's own pixels (``box_miou_small``).
    """
    processor = ImageProcessor(model.config)
    scores: dict[str, list[float]] = defaultdict(list)
    for record in records:
        h, w = record.height, record.width
        image = processor(record.load_image())
        rh, rw = image["resize_size"]
        scale = torch.tensor([rw / w, rh / h], dtype=torch.float32)
        embedding, _ = model.encode_sam(image["sam_image"][None])
        upsampling = model.encode_upsampling_weights(image["sam_image"][None])
        visible = [t.mask(h, w) for t in record.targets]
        complete = [t.amodal_mask(h, w) for t in record.targets]
        keep = [i for i, m in enumerate(visible) if m.any()]
        if not keep:
            continue
        boxes = [mask_bbox(visible[i]) for i in keep]  # x, y, w, h
        box_t = torch.tensor([[x, y, x + bw, y + bh] for x, y, bw, bh in boxes], dtype=torch.float32) * scale.repeat(2)
        points = torch.tensor([[central_point(visible[i])] for i in keep], dtype=torch.float32) * scale
        labels = torch.ones(points.shape[:2], dtype=torch.long)
        for kind, prompt in (("box", {"boxes": box_t, "points": None, "point_labels": None}),
                             ("point", {"boxes": None, "points": points, "point_labels": labels})):
            low_res, _ = prompted_mask_logits(model, embedding, **prompt, upsampling=upsampling)
            both = model.upscale_masks(low_res.flatten(0, 1)[:, None], (rh, rw), (h, w))
            both = (both.unflatten(0, (len(keep), 2)) > 0).cpu().numpy()
            for row, i in enumerate(keep):
                level = "part" if record.targets[i].part_name else "object"
                iou = mask_iou(both[row, VISIBLE_MASK_TOKEN], visible[i])
                scores[f"{kind}_miou"].append(iou)
                scores[f"{kind}_miou_{level}"].append(iou)
                if kind == "box":
                    scores[f"box_miou_{size_range(float(visible[i].sum()))}"].append(iou)
                    if complete[i] is not None:
                        whole = complete[i] | visible[i]
                        scores["box_amodal_miou"].append(mask_iou(both[row, AMODAL_MASK_TOKEN], whole))
    return scores
