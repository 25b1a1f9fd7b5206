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

"""gIoU / cIoU, Hungarian matching and per-split reports (see m2sa_core.evaluation.metrics)."""

from __future__ import annotations

import math

from m2sa_core.data.rle import encode_mask
from m2sa_core.evaluation.metrics import (
    format_report,
    IoUAccumulator,
    mask_iou,
    match_masks,
    SegmentationEvaluator,
)
import numpy as np
from pycocotools import mask as mask_utils
import pytest


def box(x0, y0, x1, y1, h=10, w=10):
    m = np.zeros((h, w), bool)
    m[y0:y1, x0:x1] = True
    return m


def test_hand_computed_giou_and_ciou():
    acc = IoUAccumulator()
    # 4x4 gt, 4x2 prediction inside: inter 8, union 16 -> 0.5
    assert acc.add(box(0, 0, 2, 4), box(0, 0, 4, 4)) == pytest.approx(0.5)
    # disjoint 1-pixel masks: inter 0, union 2 -> 0
    assert acc.add(box(9, 9, 10, 10), box(0, 9, 1, 10)) == 0.0
    # both empty: counts 1.0, adds nothing to the cIoU sums
    assert acc.add(np.zeros((10, 10), bool), np.zeros((10, 10), bool)) == 1.0
    assert acc.count == 3
    assert acc.giou == pytest.approx((0.5 + 0 + 1) / 3)
    assert acc.ciou == pytest.approx(8 / 18)


def test_ignore_region_is_left_out():
    pred, gt = box(0, 0, 4, 4), box(0, 0, 2, 4)
    ignore = box(2, 0, 4, 4)  # exactly where they disagree
    assert mask_iou(pred, gt) == pytest.approx(0.5)
    assert mask_iou(pred, gt, ignore) == 1.0


def test_empty_accumulator_and_all_empty_masks():
    assert math.isnan(IoUAccumulator().giou) and math.isnan(IoUAccumulator().ciou)
    acc = IoUAccumulator()
    acc.add(np.zeros((3, 3), bool), np.zeros((3, 3), bool))
    assert acc.giou == 1.0 and acc.ciou == 1.0


def test_shape_mismatch_is_an_error():
    with pytest.raises(ValueError, match="one size"):
        IoUAccumulator().add(np.zeros((3, 3), bool), np.zeros((3, 4), bool))


def test_agrees_with_pycocotools_iou_on_random_rle_masks():
    rng = np.random.default_rng(0)
    for _ in range(50):
        h, w = rng.integers(1, 40, 2)
        pred = rng.random((h, w)) < rng.random()
        gt = rng.random((h, w)) < rng.random()
        ref = mask_utils.iou([encode_mask(pred) | {"counts": encode_mask(pred)["counts"].encode()}],
                             [encode_mask(gt) | {"counts": encode_mask(gt)["counts"].encode()}], [0])
        expected = float(ref[0][0]) if (pred | gt).any() else 1.0  # pycocotools says 0 for empty/empty
        assert mask_iou(pred, gt) == pytest.approx(expected, abs=1e-9)


def test_merge_and_state_round_trip_equal_a_single_pass():
    rng = np.random.default_rng(1)
    pairs = [(rng.random((8, 8)) < 0.5, rng.random((8, 8)) < 0.5) for _ in range(10)]
    whole, a, b = IoUAccumulator(), IoUAccumulator(), IoUAccumulator()
    for i, (p, g) in enumerate(pairs):
        whole.add(p, g)
        (a if i % 2 else b).add(p, g)
    # As an all-reduce would do: sum the float64 states of two "ranks".
    state = a.state() + b.state()
    assert str(state.dtype) == "torch.float64"
    reduced = IoUAccumulator.from_state(state)
    merged = IoUAccumulator().merge(a).merge(b)
    for acc in (reduced, merged):
        assert acc.count == whole.count
        assert acc.giou == pytest.approx(whole.giou) and acc.ciou == pytest.approx(whole.ciou)
    assert IoUAccumulator().merge(a).all_reduce().count == a.count  # single process: unchanged
    with pytest.raises(ValueError, match="4 values"):
        IoUAccumulator.from_state([1.0, 2.0])


def test_matching_pairs_by_iou_not_by_order():
    gts = [box(0, 0, 3, 3), box(6, 6, 9, 9)]
    preds = [box(6, 6, 9, 9), box(0, 0, 3, 2)]
    m = match_masks(preds, gts)
    assert sorted(m.pairs) == [(0, 1), (1, 0)]
    assert m.unmatched_pred == [] and m.unmatched_gt == []


def test_hungarian_never_scores_below_pairing_by_order():
    rng = np.random.default_rng(7)
    for _ in range(30):
        n_p, n_g = rng.integers(0, 5, 2)
        preds = rng.random((n_p, 6, 6)) < 0.4
        gts = rng.random((n_g, 6, 6)) < 0.4
        m = match_masks(preds, gts)
        assert len(m.pairs) == min(n_p, n_g)
        assert len(m.unmatched_pred) == n_p - len(m.pairs) and len(m.unmatched_gt) == n_g - len(m.pairs)
        best = sum(m.iou[i, j] for i, j in m.pairs)
        by_order = sum(mask_iou(preds[i], gts[i]) for i in range(min(n_p, n_g)))
        assert best >= by_order - 1e-12


def test_generative_extra_and_missing_predictions_count_zero():
    gts = [box(0, 0, 3, 3), box(6, 6, 9, 9)]
    ev = SegmentationEvaluator("generative")
    # extra prediction (4 px) beside two perfect ones
    ious = ev.add([box(6, 6, 9, 9), box(0, 0, 3, 3), box(4, 0, 6, 2)], gts, split="test_obj_only")
    assert sorted(ious) == [0.0, 1.0, 1.0]
    # one prediction missing: the second ground truth counts 0
    ious = ev.add([box(0, 0, 3, 3)], gts, split="test_part_only")
    assert sorted(ious) == [0.0, 1.0]
    # no prediction at all
    assert ev.add([], gts, split="test_part_only") == [0.0, 0.0]
    rep = ev.report()
    obj, part = rep["test_obj_only"], rep["test_part_only"]
    assert (obj.giou, obj.masks, obj.samples, obj.count_accuracy) == (pytest.approx(2 / 3), 3, 1, 0.0)
    assert obj.ciou == pytest.approx(18 / 22)  # the extra mask's 4 pixels enlarge the union
    assert (part.giou, part.masks, part.samples) == (pytest.approx(1 / 4), 4, 2)
    assert part.ciou == pytest.approx(9 / (18 + 18))
    assert rep["all"].samples == 3 and rep["all"].masks == 7
    text = format_report(rep)
    assert "test_obj_only" in text and "generative" in text


def test_teacher_forced_pairs_by_order():
    gts = [box(0, 0, 3, 3), box(6, 6, 9, 9)]
    ev = SegmentationEvaluator("teacher_forced")
    assert ev.add([box(6, 6, 9, 9), box(0, 0, 3, 3)], gts) == [0.0, 0.0]
    assert ev.add(gts, gts) == [1.0, 1.0]
    rep = ev.report()["all"]
    assert rep.giou == 0.5 and rep.count_accuracy == 1.0


def test_evaluator_state_for_sharded_evaluation():
    splits = ["test_obj_only", "test_part_only", "test_mixed"]
    rank0, rank1, single = (SegmentationEvaluator("generative", splits) for _ in range(3))
    samples = [([box(0, 0, 2, 2)], [box(0, 0, 3, 3)], "test_mixed"),
               ([], [box(1, 1, 4, 4)], "test_obj_only"),
               ([box(5, 5, 8, 8), box(0, 0, 1, 1)], [box(5, 5, 8, 9)], "test_part_only")]
    for i, (p, g, s) in enumerate(samples):
        (rank0 if i % 2 else rank1).add(p, g, s)
        single.add(p, g, s)
    rank0.load_state(rank0.state() + rank1.state())
    for split in splits:
        a, b = rank0.report()[split], single.report()[split]
        assert (a.giou, a.ciou, a.masks, a.samples, a.count_accuracy) == (
            pytest.approx(b.giou), pytest.approx(b.ciou), b.masks, b.samples, b.count_accuracy)
    with pytest.raises(KeyError, match="val"):
        rank0.add([], [box(0, 0, 1, 1)], "val")
    with pytest.raises(ValueError, match="protocol"):
        SegmentationEvaluator("free")


def test_torch_masks_give_the_numpy_result():
    import torch

    rng = np.random.default_rng(3)
    pred, gt, ignore = (rng.random((12, 9)) < 0.5 for _ in range(3))
    expected = mask_iou(pred, gt, ignore)
    assert mask_iou(torch.from_numpy(pred), torch.from_numpy(gt), ignore) == pytest.approx(expected)
    acc = IoUAccumulator()
    acc.add(torch.from_numpy(pred).float(), torch.from_numpy(gt), torch.from_numpy(ignore))
    assert acc.giou == pytest.approx(expected)
    ev = SegmentationEvaluator("generative")
    gts = torch.from_numpy(np.stack([box(0, 0, 3, 3), box(6, 6, 9, 9)]))
    assert sorted(ev.add(gts.flip(0), gts)) == [1.0, 1.0]
