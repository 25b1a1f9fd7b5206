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

"""ReasonSeg, R2SM and AmodalReasonSeg readers on fixture files the tests write."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
from m2sa_core.data.amodal_reasonseg import read_amodal_reasonseg
from m2sa_core.data.r2sm import read_r2sm
from m2sa_core.data.readers import read_dataset
from m2sa_core.data.reasonseg import read_reasonseg
from m2sa_core.data.records import DataError
from m2sa_core.data.rle import encode_mask
from m2sa_core.types import Granularity
import numpy as np
import pytest

H, W = 20, 30


def square(x0, y0, x1, y1):
    return [[x0, y0], [x1, y0], [x1, y1], [x0, y1]]


def write_image(path: Path) -> None:
    cv2.imwrite(str(path), np.full((H, W, 3), 90, np.uint8))


# --- ReasonSeg ---------------------------------------------------------------------


@pytest.fixture
def reasonseg_dir(tmp_path: Path) -> Path:
    d = tmp_path / "ReasonSeg" / "val"
    d.mkdir(parents=True)
    write_image(d / "kitchen.jpg")
    (d / "kitchen.json").write_text(json.dumps({
        "text": ["the thing used to cut bread", "what would you slice a tomato with?"],
        "is_sentence": True,
        "shapes": [
            {"label": "target", "points": square(2, 2, 17, 12), "shape_type": "polygon"},
            {"label": "ignore", "points": square(5, 5, 8, 8), "shape_type": "polygon"},
            {"label": "flag", "points": square(0, 0, 29, 19), "shape_type": "polygon"},
            {"label": "target", "points": square(22, 14, 26, 18), "shape_type": "polygon"},
        ],
    }))
    write_image(d / "broken.jpg")
    (d / "broken.json").write_text(json.dumps({"text": ["x"], "is_sentence": "yes", "shapes": []}))
    (d / "lonely.json").write_text(json.dumps({"text": ["x"], "is_sentence": False, "shapes": []}))
    return d


def test_reasonseg_target_and_ignore_regions(reasonseg_dir):
    ds = read_reasonseg(reasonseg_dir)
    assert len(ds) == 2
    assert [r.question for r in ds] == ["the thing used to cut bread", "what would you slice a tomato with?"]
    rec = ds[0]
    assert (rec.source, rec.split, rec.image_id, rec.height, rec.width) == ("reasonseg", "val", "kitchen", H, W)
    assert rec.answer_template == "" and rec.meta["is_sentence"] is True
    target = rec.targets[0].mask(H, W)
    ignore = rec.ignore_mask()
    # Polygons include their border (cv2 fill + outline); the small ignore square is
    # painted over the larger target, the deprecated 'flag' shape is skipped.
    assert target[2, 2] and target[12, 17] and target[16, 24]
    assert ignore[6, 6] and not target[6, 6]
    assert not target[0, 0] and not ignore[0, 0]
    assert target.sum() == 16 * 11 - 16 + 25 and ignore.sum() == 16
    assert rec.targets[0].granularity == Granularity.OBJECT
    problems = {p.image_id: p.reason for p in ds.problems}
    assert "'is_sentence'] must be bool" in problems["broken"]
    assert "no image next to lonely.json" in problems["lonely"]
    with pytest.raises(DataError, match="broken.json"):
        read_reasonseg(reasonseg_dir, strict=True)


def test_reasonseg_small_target_inside_large_ignore_keeps_its_label(tmp_path):
    d = tmp_path / "test"
    d.mkdir()
    write_image(d / "a.png")
    (d / "a.json").write_text(json.dumps({"text": ["x"], "is_sentence": False, "shapes": [
        {"label": "target", "points": square(10, 5, 13, 8)},
        {"label": "ignore", "points": square(0, 0, 29, 19)}]}))
    (rec,) = read_reasonseg(d)
    assert rec.targets[0].mask().sum() == 16
    assert rec.ignore_mask().sum() == H * W - 16
    assert rec.meta["is_sentence"] is False


# --- R2SM --------------------------------------------------------------------------


def box(x0, y0, x1, y1):
    m = np.zeros((H, W), bool)
    m[y0:y1, x0:x1] = True
    return m


@pytest.fixture
def layout_root(tmp_path: Path) -> Path:
    root = tmp_path / "images"
    root.mkdir()
    write_image(root / "s.png")
    return root


def test_r2sm_modal_and_amodal_queries(tmp_path, layout_root):
    visible, amodal = box(0, 0, 5, 5), box(0, 0, 9, 5)
    data = {"dataset": "r2sm", "version": 1, "split": "test", "images": [
        {"image_id": 3, "file_name": "s.png", "height": H, "width": W, "queries": [
            {"text": "Segment the whole mug, hidden part included.", "mask_type": "amodal", "category_name": "mug",
             "label": "mug_1", "segmentation": encode_mask(amodal)},
            {"text": "Only the visible mug.", "mask_type": "modal", "category_name": "mug",
             "segmentation": encode_mask(visible)},
            {"text": "Which?", "mask_type": "partial", "segmentation": encode_mask(visible)},
        ]},
        {"image_id": 4, "file_name": "../s.png", "height": H, "width": W, "queries": []},
    ]}
    path = tmp_path / "r2sm_test.json"
    path.write_text(json.dumps(data))
    ds = read_r2sm(path, layout_root)
    assert len(ds) == 2
    a, m = ds
    assert (a.mask_type, a.split, a.source) == ("amodal", "test", "r2sm")
    assert np.array_equal(a.targets[0].mask(H, W), amodal) and np.array_equal(a.targets[0].amodal_mask(), amodal)
    assert (a.targets[0].label, a.targets[0].instance) == ("mug_1", 1)
    assert m.mask_type == "modal" and m.targets[0].amodal_rle is None
    assert np.array_equal(m.targets[0].mask(H, W), visible)
    reasons = [(p.image_id, p.question_index, p.reason) for p in ds.problems]
    assert reasons[0][:2] == (3, 2) and "mask_type" in reasons[0][2]
    assert reasons[1][:2] == (4, None) and "leaves the image root" in reasons[1][2]
    assert read_dataset(path, layout_root)[0].mask_type == "amodal"


def test_layout_files_need_their_header(tmp_path, layout_root):
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"dataset": "amodal_reasonseg", "images": []}))
    with pytest.raises(DataError, match="not a r2sm file"):
        read_r2sm(path, layout_root)
    assert len(read_amodal_reasonseg(path, layout_root)) == 0


# --- AmodalReasonSeg ---------------------------------------------------------------


def test_amodal_reasonseg_visible_and_amodal_per_target(tmp_path, layout_root):
    vis1, am1 = box(0, 0, 4, 4), box(0, 0, 8, 4)
    vis2 = box(10, 10, 14, 14)
    data = {"dataset": "amodal_reasonseg", "version": 1, "split": "val", "images": [
        {"image_id": "img-1", "file_name": "s.png", "height": H, "width": W, "questions": [
            {"question": "What could I drink from?", "answer": "The mug_1 {seg} and the bottle_1's cap {seg}.",
             "targets": [
                 {"category_name": "mug", "visible_segmentation": encode_mask(vis1),
                  "amodal_segmentation": encode_mask(am1)},
                 {"category_name": "bottle:cap", "visible_segmentation": encode_mask(vis2),
                  "amodal_segmentation": encode_mask(vis2)}]},
            {"question": "Too few?", "answer": "The mug_1 {seg}.", "targets": []},
            {"question": "Missing amodal", "answer": "The mug_1 {seg}.",
             "targets": [{"category_name": "mug", "visible_segmentation": encode_mask(vis1)}]},
        ]}]}
    path = tmp_path / "amodal_reasonseg_val.json"
    path.write_text(json.dumps(data))
    ds = read_amodal_reasonseg(path, layout_root)
    assert len(ds) == 1
    rec = ds[0]
    assert (rec.source, rec.split, rec.image_id) == ("amodal_reasonseg", "val", "img-1")
    assert rec.answer_template == "The mug_1 {seg} and the bottle_1's cap {seg}."
    assert [t.label for t in rec.targets] == ["mug_1", "bottle_1's cap"]
    assert np.array_equal(rec.targets[0].mask(H, W), vis1) and np.array_equal(rec.targets[0].amodal_mask(H, W), am1)
    assert rec.targets[1].granularity == Granularity.PART
    assert [(p.question_index, "targets'] is empty" in p.reason or "amodal_segmentation" in p.reason)
            for p in ds.problems] == [(1, True), (2, True)]
