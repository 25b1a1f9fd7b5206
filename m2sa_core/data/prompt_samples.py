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
Promptable-segmentation samples, as SAM is trained.

Regions of an image with the point and box prompts that ask for them.

SAM learns to segment whatever a prompt points at; the tiny model's SAM must learn the
synthetic world's objects and parts that way before [SEG] embeddings prompt it. Each
sample takes up to ``max_regions`` regions of one image (objects and parts alike) and
one prompt kind for all of them, chosen per sample:

* a box around the visible region, jittered by up to 10 % of its side (SAM's noise);
* 1-3 positive points inside the visible region and a negative one just outside it;
* the box and one positive point together.

Coordinates are (x, y) pixels of the original image; :func:`m2sa_core.model.batch.collate_prompted`
maps them into SAM's input frame. The visible mask supervises SAM's first mask token,
the complete shape its second (``m2sa_core.model.promptable``).
"""

from __future__ import annotations

from dataclasses import dataclass
import random

from m2sa_core.data.records import DataError, SegRecord
from m2sa_core.types import mask_bbox
import numpy as np

PROMPT_KINDS = ("box", "points", "box+point")
MAX_POSITIVE_POINTS = 3


@dataclass
class PromptSample:
    """Regions of one image and the prompts that ask for them (all of one kind)."""

    sample_id: str
    image: np.ndarray  # uint8 RGB [H, W, 3]
    kind: str  # one of PROMPT_KINDS
    masks: np.ndarray  # bool [n, H, W] visible regions
    amodal_masks: np.ndarray  # bool [n, H, W] complete shapes (the visible mask where unknown)
    boxes: np.ndarray | None  # float [n, 4] x0, y0, x1, y1 (pixel edges) or None
    points: np.ndarray | None  # float [n, k, 2] x, y (pixel centres) or None
    point_labels: np.ndarray | None  # int [n, k]: 1 positive, 0 negative


def _box(mask: np.ndarray, rng: random.Random, jitter: float) -> list[float]:
    x, y, w, h = (float(v) for v in mask_bbox(mask))
    x0, y0, x1, y1 = x, y, x + w, y + h
    noise = [rng.uniform(-jitter, jitter) for _ in range(4)]
    height, width = mask.shape
    return [min(max(x0 + noise[0] * w, 0.0), width), min(max(y0 + noise[1] * h, 0.0), height),
            min(max(x1 + noise[2] * w, 0.0), width), min(max(y1 + noise[3] * h, 0.0), height)]


def _points_inside(mask: np.ndarray, count: int, rng: random.Random) -> list[list[float]]:
    ys, xs = np.nonzero(mask)
    picks = [rng.randrange(len(xs)) for _ in range(count)]
    return [[float(xs[i]), float(ys[i])] for i in picks]


def _point_outside(mask: np.ndarray, rng: random.Random) -> list[float]:
    """Return a pixel near the region but not in it (within its box grown by half), else anywhere outside."""
    ys, xs = np.nonzero(mask)
    height, width = mask.shape
    gy, gx = (ys.max() - ys.min() + 1) // 2 + 2, (xs.max() - xs.min() + 1) // 2 + 2
    y0, y1 = max(0, ys.min() - gy), min(height, ys.max() + gy + 1)
    x0, x1 = max(0, xs.min() - gx), min(width, xs.max() + gx + 1)
    near = ~mask[y0:y1, x0:x1]
    oy, ox = np.nonzero(near)
    if len(ox):
        i = rng.randrange(len(ox))
        return [float(ox[i] + x0), float(oy[i] + y0)]
    oy, ox = np.nonzero(~mask)
    i = rng.randrange(len(ox)) if len(ox) else 0
    return [float(ox[i]), float(oy[i])] if len(ox) else [0.0, 0.0]


class PromptSampleBuilder:
    """Turns a record with many regions (a ``mask_annotations`` record) into a prompt sample."""

    def __init__(self, max_regions: int = 8, box_jitter: float = 0.1, seed: int = 0) -> None:
        if max_regions < 1:
            raise ValueError(f"max_regions must be at least 1, got {max_regions}")
        self.max_regions = max_regions
        self.box_jitter = box_jitter
        self._rng = random.Random(seed)

    def build(self, record: SegRecord, rng: random.Random | None = None) -> PromptSample:
        rng = rng if rng is not None else self._rng
        h, w = record.height, record.width
        try:
            visible = [t.mask(h, w) for t in record.targets]
            complete = [t.amodal_mask(h, w) for t in record.targets]
        except ValueError as exc:
            raise DataError(f"{record.record_id}: {exc}") from exc
        usable = [i for i, m in enumerate(visible) if m.any()]
        if not usable:
            raise DataError(f"{record.record_id}: no region with a visible pixel to prompt")
        chosen = rng.sample(usable, min(self.max_regions, len(usable)))
        masks = np.stack([visible[i] for i in chosen])
        amodal = np.stack([visible[i] if complete[i] is None else complete[i] | visible[i] for i in chosen])
        kind = rng.choice(PROMPT_KINDS)
        boxes = points = labels = None
        if kind in ("box", "box+point"):
            boxes = np.array([_box(m, rng, self.box_jitter) for m in masks], np.float32)
        if kind == "points":
            k = rng.randint(1, MAX_POSITIVE_POINTS)
            points = np.array([_points_inside(m, k, rng) + [_point_outside(m, rng)] for m in masks], np.float32)
            labels = np.array([[1] * k + [0]] * len(masks), np.int64)
        elif kind == "box+point":
            points = np.array([_points_inside(m, 1, rng) for m in masks], np.float32)
            labels = np.ones((len(masks), 1), np.int64)
        return PromptSample(record.record_id, record.load_image(), kind, masks, amodal, boxes, points, labels)
