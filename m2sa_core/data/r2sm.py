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
Reader for R2SM (modal or amodal mask, decided by the text) in the project's layout.

The R2SM release layout could not be checked here, so the project defines one from the
paper's description (docs/DATASETS.md says how to convert): a JSON object

    {"dataset": "r2sm", "version": 1, "split": "test",
     "images": [{"image_id": 7, "file_name": "scene_7.png", "height": 256, "width": 256,
                 "queries": [{"text": "Segment the whole mug, including the hidden part.",
                              "mask_type": "amodal",           # or "modal"
                              "category_name": "mug",          # PACO style, optional label
                              "label": "mug_1",                # optional
                              "segmentation": {RLE},           # the mask the text asks for
                              "bbox": [x, y, w, h]}]}]}

Each query becomes a record with one target whose ``mask_rle`` is the requested mask
and ``mask_type`` says which one it is (``amodal_rle`` repeats it for amodal queries).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from m2sa_core.data.image_list_json import LayoutImage, read_layout_records
from m2sa_core.data.records import check_rle_field, require, SegDataset, SegRecord, TargetAnnotation
from m2sa_core.data.rle import rle_bbox
from m2sa_core.labels import make_label, parse_label_before, split_category
from m2sa_core.types import MASK_TYPES, MaskType


class R2SMDataset(SegDataset):
    """Records of one R2SM JSON file (one per query)."""


def read_r2sm(json_path: str | Path, image_root: str | Path, strict: bool = False) -> R2SMDataset:
    """Read an R2SM file in the project layout (see the module docstring)."""
    json_path = Path(json_path)
    records, problems = read_layout_records(json_path, image_root, strict, "r2sm", "queries", _parse_query)
    return R2SMDataset(records, problems, json_path)


def _parse_query(query: Any, q_index: int, image: LayoutImage) -> SegRecord:
    what = f"queries[{q_index}]"
    text = require(query, "text", str, what).strip()
    if not text:
        raise ValueError(f"{what}['text'] is empty")
    mask_type = require(query, "mask_type", str, what)
    if mask_type not in MASK_TYPES:
        raise ValueError(f"{what}['mask_type'] must be one of {MASK_TYPES}, got {mask_type!r}")
    rle = check_rle_field(require(query, "segmentation", dict, what), image.height, image.width,
                          f"{what}['segmentation']")
    category = query.get("category_name", "object")
    if not isinstance(category, str) or not category:
        raise ValueError(f"{what}['category_name'] must be a non-empty string")
    obj, part = split_category(category)
    label = query.get("label")
    parsed = parse_label_before(label) if isinstance(label, str) else None
    instance = parsed.instance if parsed is not None and parsed.object_name == obj else 0
    bbox = query.get("bbox") or rle_bbox(rle)
    target = TargetAnnotation.named(label if isinstance(label, str) and label else make_label(obj, instance, part),
                                    category, obj, instance, part, rle,
                                    amodal_rle=rle if mask_type == MaskType.AMODAL else None, bbox=bbox)
    return image.record("r2sm", q_index, question=text, answer_template="", targets=[target], mask_type=mask_type,
                        meta={"is_sentence": True})
