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
Reader for mask-annotation sets: every object and part of an image, no text.

What SAM's promptable pretraining reads (the role SA-1B plays for SAM): for each image,
every region with its visible mask and, where known, its complete (amodal) shape. The
project layout (docs/DATASETS.md) is

    {"dataset": "mask_annotations", "version": 1, "split": "train",
     "images": [{"image_id": 7, "file_name": "000007.png", "height": 256, "width": 256,
                 "annotations": [{"category_name": "mug:handle", "label": "mug_1's handle",
                                  "segmentation": {RLE}, "amodal_segmentation": {RLE},
                                  "bbox": [x, y, w, h]}]}]}

One record per image whose targets are all its annotations (question and answer empty):
a promptable sample picks its own subset of regions to prompt.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from m2sa_core.data.image_list_json import layout_images
from m2sa_core.data.mmr import target_from_annotation
from m2sa_core.data.records import ProblemLog, SegDataset
from m2sa_core.labels import parse_label_before

DATASET = "mask_annotations"


class MaskAnnotationDataset(SegDataset):
    """Records of one mask-annotation file (one per image)."""


def read_mask_annotations(json_path: str | Path, image_root: str | Path, strict: bool = False) -> MaskAnnotationDataset:
    """Read a mask-annotation file; a bad image entry or annotation is reported and skipped."""
    json_path = Path(json_path)
    log = ProblemLog(json_path, strict)
    records = []
    for image, regions in layout_images(json_path, image_root, log, DATASET, "annotations"):
        targets = []
        for a_index, ann in enumerate(regions):
            what = f"annotations[{a_index}]"
            try:
                targets.append(_target(ann, image.height, image.width, what))
            except ValueError as exc:
                log.report(image.image_id, a_index, str(exc))
        if not targets:
            log.report(image.image_id, None, "no usable annotation")
            continue
        records.append(image.record(DATASET, 0, question="", answer_template="", targets=targets))
    return MaskAnnotationDataset(records, log.problems, json_path)


def _target(ann: Any, height: int, width: int, what: str):
    """Return an annotation as a target; its ``label`` (``mug_1's handle``) names the instance when given."""
    label = ann.get("label", "") if isinstance(ann, dict) else ""
    if not isinstance(label, str):
        raise ValueError(f"{what}['label'] must be a string")
    if label and parse_label_before(label) is None:
        raise ValueError(f"{what}['label'] {label!r} is not an object_N or object_N's part label")
    return target_from_annotation(ann, label, height, width, what)
