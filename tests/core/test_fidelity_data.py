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

"""Data items of docs/FIDELITY.md: the MMR image root, empty sources, ReasonSeg's first query."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
from m2sa_core.data.rle import encode_mask
import numpy as np
import pytest
from training.config import DataSourceConfig
from training.evaluate import select_queries
from training.mixture import Mixture, Source
from training.sources import EmptySourceError, open_source

H, W = 12, 16


def _coco_like(tmp_path: Path) -> Path:
    """data/coco/train2017/000000000001.jpg and an MMR file whose file_name carries the split folder."""
    folder = tmp_path / "coco" / "train2017"
    folder.mkdir(parents=True)
    cv2.imwrite(str(folder / "000000000001.jpg"), np.zeros((H, W, 3), np.uint8))
    mask = np.zeros((H, W), bool)
    mask[2:6, 3:9] = True
    entry = {"file_name": "train2017/000000000001.jpg", "height": H, "width": W, "image_id": 1,
             "questions": ["Where can I pour water?"], "text_answers": ["the mug_1 {seg}"],
             "answers": [[{"bbox": [3, 2, 6, 4], "segmentation": encode_mask(mask), "category_name": "mug",
                           "category_id": 1, "image_id": 1}]]}
    path = tmp_path / "MMR_train.json"
    path.write_text(json.dumps([entry]))
    return path


def test_mmr_image_root_is_the_folder_above_the_coco_split(tmp_path):
    path = _coco_like(tmp_path)
    source = open_source(DataSourceConfig(kind="mmr", path=str(path), image_root=str(tmp_path / "coco")))
    assert len(source.items) == 1


def test_a_configured_source_that_ends_up_empty_stops_with_a_clear_error(tmp_path):
    path = _coco_like(tmp_path)
    wrong = DataSourceConfig(kind="mmr", name="mmr", path=str(path), image_root=str(tmp_path / "coco" / "train2017"))
    with pytest.raises(EmptySourceError, match=r"data source mmr: no usable samples .*\(1 entries skipped.*image_root"):
        open_source(wrong)


def test_the_mixture_never_drops_an_empty_source_silently():
    with pytest.raises(ValueError, match="without any sample: vqa"):
        Mixture([Source("mmr", [1, 2], 6.0), Source("vqa", [], 2.0)], seed=0)


class _Rec:

    def __init__(self, source: str, image: int, q: int) -> None:
        self.source, self.image_id, self.question_index = source, image, q


def test_reasonseg_evaluation_takes_the_first_query_per_image_by_default():
    records = [_Rec("reasonseg", 1, 0), _Rec("reasonseg", 1, 1), _Rec("reasonseg", 2, 0), _Rec("mmr", 3, 1)]
    assert [(r.image_id, r.question_index) for r in select_queries(records)] == [(1, 0), (2, 0), (3, 1)]
    assert len(select_queries(records, "all")) == 4


class _Record:

    def __init__(self, image: str, question: int) -> None:
        self.image_path, self.question = image, question


def _grouping_mixture() -> Mixture:
    items = [_Record(f"img{q % 4}.jpg", q) for q in range(20)]  # 4 images, 5 questions each
    return Mixture([Source("mmr", items, 1.0)], seed=3)


def test_a_slot_holds_up_to_three_questions_of_one_image_as_the_authors_sample():
    mixture = _grouping_mixture()
    make = lambda record, draw: (record.image_path, record.question)  # noqa: E731
    for slot in range(8):
        group = mixture.build_group(step=5, slot=slot, make=make, size=3)
        assert len(group) == 3  # every image has 5 questions
        assert len({image for image, _ in group}) == 1, group  # one image
        assert len({q for _, q in group}) == 3  # three different questions
        drawn = mixture.sources[0].items[mixture.draw(5, slot).index]
        assert group[0] == (drawn.image_path, drawn.question)  # the slot's own draw comes first
        assert mixture.build_group(step=5, slot=slot, make=make, size=3) == group  # reproducible
        assert mixture.build_group(step=5, slot=slot, make=make, size=1) == [group[0]]


def test_a_group_is_smaller_when_the_image_has_fewer_questions():
    items = [_Record("a.jpg", 0), _Record("b.jpg", 1), _Record("b.jpg", 2)]
    mixture = Mixture([Source("mmr", items, 1.0)], seed=0)
    make = lambda record, draw: record.question  # noqa: E731
    sizes = {len(mixture.build_group(0, slot, make, size=3)) for slot in range(20)}
    assert sizes == {1, 2}
