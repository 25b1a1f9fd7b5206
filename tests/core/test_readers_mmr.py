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

"""MMR reader on small fixture files written by the tests (the release is not available here)."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
from m2sa_core.data.mmr import read_mmr
from m2sa_core.data.records import DataError
from m2sa_core.data.rle import encode_mask
from m2sa_core.types import Granularity
import numpy as np
import pytest

H, W = 6, 8


def box(x0: int, y0: int, x1: int, y1: int) -> np.ndarray:
    m = np.zeros((H, W), bool)
    m[y0:y1, x0:x1] = True
    return m


def ann(mask: np.ndarray, category: str, image_id: int = 1, **extra) -> dict:
    return {"bbox": [0.0, 0.0, 1.0, 1.0], "segmentation": encode_mask(mask), "category_name": category,
            "category_id": 3, "image_id": image_id, "sorted_category_id": 2, **extra}


def image_entry(image_id: int, file_name: str, questions, answers, text_answers, **extra) -> dict:
    return {"file_name": file_name, "height": H, "width": W, "image_id": image_id, "questions": questions,
            "answers": answers, "text_answers": text_answers,
            "raw_answers": [t.replace(" {seg}", "") for t in text_answers],
            "coco_url": "http://example/x.jpg", "neg_category_ids": [5], "not_exhaustive_category_ids": [], **extra}


def write(tmp_path: Path, entries, name: str = "MMR_val.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(entries))
    return path


@pytest.fixture
def image_root(tmp_path: Path) -> Path:
    root = tmp_path / "images"
    root.mkdir()
    red = np.zeros((H, W, 3), np.uint8)
    red[..., 2] = 255  # BGR on disk: pure red
    for name in ("a.png", "b.png"):
        cv2.imwrite(str(root / name), red)
    return root


def test_each_question_gets_its_own_answer_and_masks(tmp_path, image_root):
    """The authors' loader pairs sampled questions with the first answers; we must not."""
    masks = [box(0, 0, 2, 2), box(2, 2, 5, 4), box(5, 0, 8, 6)]
    entry = image_entry(
        1, "a.png",
        ["What would you press to switch the TV on?", "What holds the coffee?", "Where do I cut?"],
        [[ann(masks[0], "television_set:button")], [ann(masks[1], "mug")], [ann(masks[2], "knife:blade")]],
        ["Press the television_set_1's button {seg}.", "The mug_1 {seg}.", "Use the knife_2's blade {seg}."],
    )
    ds = read_mmr(write(tmp_path, [entry]), image_root)
    assert len(ds) == 3 and not ds.problems
    for i, rec in enumerate(ds):
        assert rec.question_index == i
        assert rec.question == entry["questions"][i]
        assert rec.answer_template == entry["text_answers"][i]
        assert np.array_equal(rec.targets[0].mask(H, W), masks[i])
    assert [r.targets[0].label for r in ds] == ["television_set_1's button", "mug_1", "knife_2's blade"]
    assert ds[0].split == "val" and ds[0].source == "mmr"
    assert ds[0].meta["coco_url"] == "http://example/x.jpg"
    assert ds[0].meta["raw_answer"] == "Press the television_set_1's button."


def test_granularity_from_category_then_from_text(tmp_path, image_root):
    m = box(0, 0, 3, 3)
    entry = image_entry(
        7, "a.png", ["q"],
        [[ann(m, "television_set:button"), ann(m, "mug"), ann(m, "knife"), ann(m, "knife:blade"),
          ann(m, "mouse_(computer_equipment):left_button")]],
        ["the television_set_1's button {seg}, mug_2 {seg}, knife_1's handle {seg}, the blade {seg} and "
         "mouse_(computer_equipment)_3's left_button {seg}"],
    )
    (rec,) = read_mmr(write(tmp_path, [entry]), image_root, strict=True)
    t = rec.targets
    assert (t[0].object_name, t[0].instance, t[0].part_name, t[0].granularity) == (
        "television_set", 1, "button", Granularity.PART)
    assert (t[1].label, t[1].instance, t[1].granularity) == ("mug_2", 2, Granularity.OBJECT)
    # Bare object category, but the answer names a part: part level from the text.
    assert (t[2].label, t[2].part_name, t[2].granularity) == ("knife_1's handle", "handle", Granularity.PART)
    # The text does not follow the convention: label from the category, no instance.
    assert (t[3].label, t[3].instance, t[3].granularity) == ("knife's blade", 0, Granularity.PART)
    assert (t[4].object_name, t[4].instance, t[4].part_name) == ("mouse_(computer_equipment)", 3, "left_button")


def test_uncompressed_counts_and_amodal_key(tmp_path, image_root):
    visible = box(1, 1, 4, 3)
    amodal = box(1, 1, 6, 5)
    # Column-major run lengths, as COCO writes uncompressed RLE.
    flat = visible.flatten(order="F").astype(int)
    runs, current, n = [], 0, 0
    for v in flat:
        if v != current:
            runs.append(n)
            current, n = v, 0
        n += 1
    runs.append(n)
    a = ann(visible, "mug", amodal_segmentation=encode_mask(amodal))
    a["segmentation"] = {"size": [H, W], "counts": runs}
    (rec,) = read_mmr(write(tmp_path, [image_entry(1, "a.png", ["q"], [[a]], ["mug_1 {seg}"])]), image_root,
                      strict=True)
    assert np.array_equal(rec.targets[0].mask(H, W), visible)
    assert np.array_equal(rec.targets[0].amodal_mask(H, W), amodal)
    assert rec.targets[0].mask().dtype == np.bool_


def _bad_file(tmp_path, image_root):
    good = image_entry(1, "a.png", ["ok?", "two targets?", "bad mask?"],
                       [[ann(box(0, 0, 2, 2), "mug")], [ann(box(0, 0, 2, 2), "mug")],
                        [ann(box(0, 0, 2, 2), "mug") | {"segmentation": {"size": [H, W], "counts": "zz"}}]],
                       ["mug_1 {seg}", "mug_1 {seg} and mug_2 {seg}", "mug_1 {seg}"])
    missing = image_entry(2, "missing.png", ["q"], [[ann(box(0, 0, 2, 2), "mug", 2)]], ["mug_1 {seg}"])
    wrong_size = image_entry(3, "b.png", ["q"], [[ann(np.ones((3, 3), bool), "mug", 3)]], ["mug_1 {seg}"])
    return write(tmp_path, [good, missing, wrong_size])


def test_lenient_mode_skips_and_reports_file_image_and_question(tmp_path, image_root, caplog):
    path = _bad_file(tmp_path, image_root)
    ds = read_mmr(path, image_root)
    assert "4 skipped entries" in caplog.text
    assert [(r.image_id, r.question_index) for r in ds] == [(1, 0)]
    assert len(ds.problems) == 4
    by_where = {(p.image_id, p.question_index): p for p in ds.problems}
    assert "2 {seg} placeholders but 1 annotations" in by_where[(1, 1)].reason
    assert "RLE" in by_where[(1, 2)].reason
    assert "does not exist" in by_where[(2, None)].reason
    assert "does not match the image size" in by_where[(3, 0)].reason
    assert all(p.file == str(path) for p in ds.problems)
    assert "4 skipped" in ds.summary()


def test_strict_mode_raises_naming_file_image_and_question(tmp_path, image_root):
    path = _bad_file(tmp_path, image_root)
    with pytest.raises(DataError) as err:
        read_mmr(path, image_root, strict=True)
    msg = str(err.value)
    assert str(path) in msg and "image 1" in msg and "question 1" in msg


@pytest.mark.parametrize("file_name", ["../../etc/passwd", "/etc/passwd", "sub/../../b.png", "..\\b.png", "", "."])
def test_paths_escaping_the_image_root_are_rejected(tmp_path, image_root, file_name):
    entry = image_entry(9, file_name, ["q"], [[ann(box(0, 0, 2, 2), "mug", 9)]], ["mug_1 {seg}"])
    path = write(tmp_path, [entry])
    ds = read_mmr(path, image_root)
    assert len(ds) == 0 and len(ds.problems) == 1
    assert "entry 0['file_name']" in str(ds.problems[0]) and str(path) in str(ds.problems[0])
    with pytest.raises(DataError, match="file_name"):
        read_mmr(path, image_root, strict=True)


@pytest.mark.parametrize(
    "change, expected",
    [
        ({"questions": "q"}, "'questions'] must be list"),
        ({"height": "6"}, "'height'] must be int"),
        ({"height": True}, "'height'] must be int"),
        ({"questions": [3]}, "questions[0] must be a non-empty string"),
        ({"text_answers": [["mug_1 {seg}"]]}, "text_answers[0] must be a string"),
        ({"answers": [[{"segmentation": 1, "category_name": "mug"}]]}, "must be dict"),
        ({"answers": [[]]}, "non-empty list of annotations"),
        ({"mask_types": ["sideways"]}, "mask_types[0]"),
        ({"text_answers": ["mug_1 {seg}", "x"]}, "must match one to one"),
    ],
)
def test_wrong_types_are_reported(tmp_path, image_root, change, expected):
    entry = image_entry(4, "a.png", ["q"], [[ann(box(0, 0, 2, 2), "mug", 4)]], ["mug_1 {seg}"])
    entry.update(change)
    ds = read_mmr(write(tmp_path, [entry, "not a dict"]), image_root)
    assert len(ds) == 0
    assert expected in str(ds.problems[0])
    assert "must be a JSON object" in str(ds.problems[1])


def test_top_level_must_be_a_list(tmp_path, image_root):
    with pytest.raises(DataError, match="top level must be a list"):
        read_mmr(write(tmp_path, {"images": []}), image_root)
    bad = tmp_path / "broken.json"
    bad.write_text("[{")
    with pytest.raises(DataError, match="not valid JSON"):
        read_mmr(bad, image_root)


def test_images_load_lazily_as_rgb_with_clear_errors(tmp_path, image_root):
    entry = image_entry(5, "a.png", ["q"], [[ann(box(0, 0, 2, 2), "mug", 5)]], ["mug_1 {seg}"], mask_types=["amodal"])
    (rec,) = read_mmr(write(tmp_path, [entry]), image_root)
    assert rec.mask_type == "amodal"
    img = rec.load_image()
    assert img.shape == (H, W, 3) and img.dtype == np.uint8
    assert (img[..., 0] == 255).all() and (img[..., 2] == 0).all()  # RGB, not BGR
    (image_root / "a.png").write_bytes(b"not a png")
    with pytest.raises(DataError, match=r"a\.png.*image id 5"):
        rec.load_image()


def test_symlinked_folders_inside_the_root_are_followed(tmp_path, image_root):
    """Datasets are often laid out with links (images/train2017 -> /mnt/coco/train2017)."""
    elsewhere = tmp_path / "mnt" / "coco"
    elsewhere.mkdir(parents=True)
    (elsewhere / "a.png").write_bytes((image_root / "a.png").read_bytes())
    (image_root / "train2017").symlink_to(elsewhere, target_is_directory=True)
    entry = image_entry(8, "train2017/a.png", ["q"], [[ann(box(0, 0, 2, 2), "mug", 8)]], ["mug_1 {seg}"])
    (rec,) = read_mmr(write(tmp_path, [entry]), image_root, strict=True)
    assert rec.load_image().shape == (H, W, 3)


def test_image_size_differing_from_the_annotation_is_an_error(tmp_path, image_root):
    cv2.imwrite(str(image_root / "small.png"), np.zeros((3, 3, 3), np.uint8))
    entry = image_entry(6, "small.png", ["q"], [[ann(box(0, 0, 2, 2), "mug", 6)]], ["mug_1 {seg}"])
    (rec,) = read_mmr(write(tmp_path, [entry]), image_root)
    with pytest.raises(DataError, match=r"small\.png \(image id 6\) is 3x3, the annotation says 6x8"):
        rec.load_image()


# -- absent questions: no annotations, ``missing`` says what is not there --------------------------

def _with_absent(**change) -> dict:
    """One present question, then one about a microwave the image does not hold."""
    entry = image_entry(7, "a.png", ["Where is the mug?", "Where is the microwave?"],
                        [[ann(box(0, 0, 2, 2), "mug", 7)], []],
                        ["It is the mug_1 {seg}.", "There is no microwave here."],
                        question_families=["object", "absent"], mask_types=["modal", "modal"],
                        missing=[None, {"kind": "category", "words": "microwave"}])
    entry.update(change)
    return entry


def test_absent_question_reads_with_no_targets_and_what_is_missing(tmp_path, image_root):
    present, absent = read_mmr(write(tmp_path, [_with_absent()]), image_root, strict=True)
    assert absent.targets == [] and absent.answer_template == "There is no microwave here."
    assert absent.meta["missing"] == {"kind": "category", "words": "microwave"} and absent.meta["family"] == "absent"
    assert [t.label for t in present.targets] == ["mug_1"] and "missing" not in present.meta
    # Without the list (the MMR release), an entry reads as before: its present question alike.
    release = image_entry(7, "a.png", ["Where is the mug?"], [[ann(box(0, 0, 2, 2), "mug", 7)]],
                          ["It is the mug_1 {seg}."])
    (alone,) = read_mmr(write(tmp_path, [release]), image_root, strict=True)
    assert "missing" not in alone.meta and alone.targets == present.targets


@pytest.mark.parametrize(
    "change, expected",
    [
        ({"missing": {"kind": "category"}}, "entry 0['missing'] must be a list with one entry per question"),
        ({"missing": [None]}, "entry 0['missing'] must be a list with one entry per question"),
        ({"missing": [None, "microwave"]}, "missing[1] must be null or an object with exactly the keys"),
        ({"missing": [None, {"kind": "category"}]}, "missing[1] must be null or an object with exactly the keys"),
        ({"missing": [None, {"kind": "colour", "words": "red mug"}]}, "missing[1]['kind'] must be one of"),
        ({"missing": [None, {"kind": "category", "words": " "}]}, "missing[1]['words'] must be a non-empty string"),
        ({"answers": [[ann(box(0, 0, 2, 2), "mug", 7)], [ann(box(0, 0, 2, 2), "mug", 7)]]},
         "answers[1] must be an empty list: missing[1] says"),
        ({"text_answers": ["It is the mug_1 {seg}.", "There is no microwave {seg}."]},
         "text_answers[1] has 1 {seg} placeholders but 0 annotations"),
        ({"text_answers": ["It is the mug_1 {seg}.", ""]}, "text_answers[1] must name what is missing"),
        ({"missing": [{"kind": "category", "words": "mug"}, None]}, "answers[0] must be an empty list"),
        ({"missing": [None, None]}, "answers[1] must be a non-empty list of annotations"),
    ],
)
def test_bad_missing_entries_are_one_line_errors_naming_where(tmp_path, image_root, change, expected):
    path = write(tmp_path, [_with_absent(**change)])
    ds = read_mmr(path, image_root)
    assert len(ds.problems) >= 1 and expected in str(ds.problems[0]), ds.problems
    assert "\n" not in str(ds.problems[0])
    with pytest.raises(DataError) as err:
        read_mmr(path, image_root, strict=True)
    assert expected in str(err.value) and str(path) in str(err.value) and "image 7" in str(err.value)
