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
Reader for AmodalReasonSeg (text answer plus visible and amodal masks per target).

The release layout could not be checked here, so the project defines one from the
paper's description (docs/DATASETS.md says how to convert): a JSON object

    {"dataset": "amodal_reasonseg", "version": 1, "split": "test",
     "images": [{"image_id": 7, "file_name": "scene_7.png", "height": 256, "width": 256,
                 "questions": [{"question": "What could I drink from?",
                                "answer": "You could use the mug_1 {seg}.",
                                "targets": [{"category_name": "mug",
                                             "visible_segmentation": {RLE},
                                             "amodal_segmentation": {RLE},
                                             "bbox": [x, y, w, h]}]}]}]}

``answer`` holds one ``{seg}`` per target, in target order, named by the project's
answer-text convention. Each question becomes a record whose targets carry the visible
mask as ``mask_rle`` and the complete mask as ``amodal_rle``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from m2sa_core.data.image_list_json import LayoutImage, read_layout_records
from m2sa_core.data.mmr import SEG_PLACEHOLDER, target_from_annotation
from m2sa_core.data.records import check_rle_field, require, SegDataset, SegRecord
from m2sa_core.labels import label_segments


class AmodalReasonSegDataset(SegDataset):
    """Records of one AmodalReasonSeg JSON file (one per question)."""


def read_amodal_reasonseg(json_path: str | Path, image_root: str | Path,
                          strict: bool = False) -> AmodalReasonSegDataset:
    """Read an AmodalReasonSeg file in the project layout (see the module docstring)."""
    json_path = Path(json_path)
    records, problems = read_layout_records(json_path, image_root, strict, "amodal_reasonseg", "questions",
                                            _parse_question)
    return AmodalReasonSegDataset(records, problems, json_path)


def _parse_question(item: Any, q_index: int, image: LayoutImage) -> SegRecord:
    what = f"questions[{q_index}]"
    question = require(item, "question", str, what).strip()
    answer = require(item, "answer", str, what).strip()
    targets_in = require(item, "targets", list, what)
    if not question:
        raise ValueError(f"{what}['question'] is empty")
    if not targets_in:
        raise ValueError(f"{what}['targets'] is empty")
    if answer.count(SEG_PLACEHOLDER) != len(targets_in):
        raise ValueError(
            f"{what}['answer'] has {answer.count(SEG_PLACEHOLDER)} {SEG_PLACEHOLDER} placeholders "
            f"but {len(targets_in)} targets"
        )
    before = label_segments(answer, SEG_PLACEHOLDER)
    targets = []
    for i, t in enumerate(targets_in):
        t_what = f"{what}['targets'][{i}]"
        visible = require(t, "visible_segmentation", dict, t_what)
        amodal = require(t, "amodal_segmentation", dict, t_what)
        check_rle_field(amodal, image.height, image.width, f"{t_what}['amodal_segmentation']")
        ann = {"category_name": t.get("category_name"), "segmentation": visible,
               "amodal_segmentation": amodal, "bbox": t.get("bbox", [])}
        targets.append(target_from_annotation(ann, before[i], image.height, image.width, t_what))
    return image.record("amodal_reasonseg", q_index, question=question, answer_template=answer, targets=targets,
                        meta={})
