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

"""m2sa-eval's per-target breakdown: which kinds of target and which sizes the masks fail on."""

from __future__ import annotations

from m2sa_core.evaluation.target_breakdown import markdown, score_targets, size_range, summarise, target_kind
import numpy as np
import pytest


def _box(y0: int, x0: int, h: int, w: int, size: int = 128) -> np.ndarray:
    mask = np.zeros((size, size), bool)
    mask[y0:y0 + h, x0:x0 + w] = True
    return mask


BIG, SMALL = _box(0, 0, 100, 100), _box(110, 110, 10, 10)  # 10,000 px (large), 100 px (small)


def test_kinds_and_coco_size_ranges():
    assert target_kind("mug", "") == "mug" and target_kind("mug", "handle") == "mug's handle"
    assert [size_range(a) for a in (0, 1023, 1024, 9215, 9216)] == ["small", "small", "medium", "medium", "large"]
    with pytest.raises(ValueError, match="area"):
        size_range(-1)


def test_teacher_forced_pairs_by_order_and_generative_by_matching():
    half_big = _box(0, 0, 100, 50)
    preds, gts, kinds = [SMALL, half_big], [BIG, SMALL], ["tv", "tv's button"]
    forced = score_targets(preds, gts, kinds, "teacher_forced")
    assert [e["iou"] for e in forced] == [0.0, 0.0]  # the first prediction is the first target's
    free = score_targets(preds, gts, kinds, "generative")
    assert [e["iou"] for e in free] == [0.5, 1.0]
    expected = [("tv", 10000, "large"), ("tv's button", 100, "small")]
    assert [(e["target"], e["area"], e["size"]) for e in free] == expected


def test_a_missed_target_scores_zero_and_an_extra_prediction_is_in_no_row():
    missed = score_targets([BIG], [BIG, SMALL], ["tv", "tv's button"], "generative")
    assert [e["iou"] for e in missed] == [1.0, 0.0]
    assert [e["iou"] for e in score_targets([], [SMALL], ["remote"], "generative")] == [0.0]
    extra = score_targets([BIG, SMALL], [SMALL], ["remote's button"], "generative")
    assert len(extra) == 1 and extra[0]["iou"] == 1.0
    assert score_targets([BIG], [], [], "generative") == []
    with pytest.raises(ValueError, match="kinds"):
        score_targets([BIG], [BIG], [], "generative")


def test_ignored_pixels_leave_the_area_and_the_iou():
    ignore = _box(0, 0, 100, 50)
    (entry,) = score_targets([_box(0, 0, 100, 60)], [BIG], ["tv"], "teacher_forced", ignore)
    assert entry["area"] == 5000 and entry["iou"] == pytest.approx(1000 / 5000)


def test_summary_puts_the_worst_kind_first_and_sizes_in_coco_order():
    entries = [{"target": "mug", "size": "large", "iou": 0.9}, {"target": "mug's handle", "size": "small", "iou": 0.2},
               {"target": "mug's handle", "size": "small", "iou": 0.4}, {"target": "mug", "size": "medium", "iou": 0.7}]
    summary = summarise(entries)
    assert list(summary["by_target"]) == ["mug's handle", "mug"]
    assert summary["by_target"]["mug's handle"] == {"giou": pytest.approx(0.3), "targets": 2}
    assert list(summary["by_size"]) == ["small", "medium", "large"]
    table = markdown(summary)
    assert "| mug's handle | 30.0 | 2 |" in table and "| small | 30.0 | 2 |" in table
    assert markdown(summarise([])) == ""


def test_a_paired_target_carries_its_predictions_score():
    half_big = _box(0, 0, 100, 50)
    free = score_targets([SMALL, half_big], [BIG, SMALL], ["tv", "tv's button"], "generative", scores=[0.9, 0.4])
    assert [e["score"] for e in free] == [0.4, 0.9]  # matched: half_big is the tv's, SMALL the button's
    missed = score_targets([BIG], [BIG, SMALL], ["tv", "tv's button"], "generative", scores=[0.8])
    assert "score" in missed[0] and "score" not in missed[1]  # nothing predicted for the button
    with pytest.raises(ValueError, match="scores"):
        score_targets([BIG], [BIG], ["tv"], "generative", scores=[0.1, 0.2])


def test_calibration_says_whether_scores_follow_the_iou():
    following = [{"target": "mug", "size": "small", "iou": i, "score": i + 0.05} for i in (0.1, 0.4, 0.6, 0.9)]
    calibration = summarise(following)["score_calibration"]
    assert calibration["targets"] == 4 and calibration["spearman"] == pytest.approx(1.0)
    assert calibration["mean_abs_error"] == pytest.approx(0.05)
    flat = [{"target": "mug", "size": "small", "iou": i, "score": 0.0} for i in (0.1, 0.4, 0.6, 0.9)]
    flat_calibration = summarise(flat)["score_calibration"]
    assert flat_calibration["spearman"] == 0.0 and flat_calibration["mean_abs_error"] == pytest.approx(0.5)
    assert "score_calibration" not in summarise([{"target": "mug", "size": "small", "iou": 0.5}])
    assert "Spearman" in markdown(summarise(following)) and "Spearman" not in markdown(summarise(following[:1]))
