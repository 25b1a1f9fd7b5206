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
Reader for LISA's ReasonSeg release (``ReasonSeg/{train,val,test}/``).

Each sample is an image ``NAME.jpg`` and a labelme-style ``NAME.json`` with ``text``
(list of queries about the same target), ``is_sentence`` (long reasoning sentence vs
short phrase) and polygon ``shapes`` whose ``label`` says ``target`` or ``ignore``
(``flag`` shapes are deprecated annotations and are skipped). Polygons are painted
largest first, so a small polygon inside a large one keeps its own label, and the
target polygons form one mask; ignore regions are kept separately and left out of
the metric. Each query becomes one record with a single target and no text answer
(the sample builder supplies LISA-style answers).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from m2sa_core.data.records import (
    load_json,
    ProblemLog,
    require,
    SegDataset,
    SegRecord,
    TargetAnnotation,
)
from m2sa_core.data.rle import encode_mask, rle_bbox
import numpy as np

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")
TARGET_LABEL = "target"


class ReasonSegDataset(SegDataset):
    """Records of one ReasonSeg split directory (one per query)."""


def rasterize_shapes(shapes: list[Any], height: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """(target, ignore) boolean masks from labelme polygons, painted largest first."""
    import cv2

    painted: list[tuple[int, np.ndarray, bool]] = []
    for i, shape in enumerate(shapes):
        what = f"shapes[{i}]"
        label = require(shape, "label", str, what).lower()
        if label == "flag":
            continue
        points = require(shape, "points", list, what)
        try:
            poly = np.asarray(points, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{what}['points'] must be a list of [x, y] numbers") from exc
        if poly.ndim != 2 or poly.shape[1] != 2 or len(poly) < 3 or not np.isfinite(poly).all():
            raise ValueError(f"{what}['points'] must hold at least 3 finite [x, y] points")
        poly = np.round(poly).astype(np.int32)[None]
        region = np.zeros((height, width), np.uint8)
        cv2.polylines(region, poly, True, 1, 1)
        cv2.fillPoly(region, poly, 1)
        painted.append((int(region.sum()), poly, TARGET_LABEL in label))
    canvas = np.zeros((height, width), np.uint8)  # 0 background, 1 target, 2 ignore
    for _, poly, is_target in sorted(painted, key=lambda p: -p[0]):
        value = 1 if is_target else 2
        cv2.polylines(canvas, poly, True, value, 1)
        cv2.fillPoly(canvas, poly, value)
    return canvas == 1, canvas == 2


def _image_size(entry: dict, image_path: Path) -> tuple[int, int]:
    h, w = entry.get("imageHeight"), entry.get("imageWidth")
    if isinstance(h, int) and isinstance(w, int) and h > 0 and w > 0:
        return h, w
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(image_path) as im:  # reads the header only
            w, h = im.size
    except (OSError, UnidentifiedImageError) as exc:
        raise ValueError(f"cannot read the size of image {image_path}: {exc}") from exc
    return h, w


def read_reasonseg(split_dir: str | Path, strict: bool = False, split: str | None = None) -> ReasonSegDataset:
    """Read one ReasonSeg split directory (image + JSON pairs)."""
    split_dir = Path(split_dir)
    if not split_dir.is_dir():
        raise FileNotFoundError(f"ReasonSeg split directory {split_dir} does not exist")
    split = split or split_dir.name
    problems = []
    records: list[SegRecord] = []
    for json_path in sorted(split_dir.glob("*.json")):
        log = ProblemLog(json_path, strict)
        image_id = json_path.stem
        try:
            records.extend(_read_sample(json_path, split))
        except ValueError as exc:
            log.report(image_id, None, str(exc))
        problems.extend(log.problems)
    return ReasonSegDataset(records, problems, split_dir)


def _read_sample(json_path: Path, split: str) -> list[SegRecord]:
    entry = load_json(json_path)
    what = json_path.name
    texts = require(entry, "text", list, what)
    is_sentence = require(entry, "is_sentence", bool, what)
    shapes = require(entry, "shapes", list, what)
    image_path = next((json_path.with_suffix(s) for s in IMAGE_SUFFIXES if json_path.with_suffix(s).is_file()), None)
    if image_path is None:
        raise ValueError(f"no image next to {json_path.name} (tried {', '.join(IMAGE_SUFFIXES)})")
    height, width = _image_size(entry, image_path)
    target, ignore = rasterize_shapes(shapes, height, width)
    if not target.any():
        raise ValueError("no 'target' polygon")
    rle = encode_mask(target)
    ignore_rle = encode_mask(ignore) if ignore.any() else None
    records = []
    for q_index, text in enumerate(texts):
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"text[{q_index}] must be a non-empty string")
        records.append(
            SegRecord(
                source="reasonseg",
                split=split,
                image_path=image_path,
                image_id=json_path.stem,
                question_index=q_index,
                question=text.strip(),
                answer_template="",
                targets=[
                    TargetAnnotation.named(TARGET_LABEL, TARGET_LABEL, TARGET_LABEL, 0, "", rle,
                                           bbox=rle_bbox(rle))
                ],
                height=height,
                width=width,
                ignore_mask_rle=ignore_rle,
                meta={"is_sentence": is_sentence},
            )
        )
    return records
