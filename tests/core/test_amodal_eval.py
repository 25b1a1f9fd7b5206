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

"""m2sa-eval's amodal scores: visible / amodal / occluded gIoU-cIoU and mask-type accuracy."""

from __future__ import annotations

import json
from pathlib import Path

from m2sa_core.evaluation.metrics import AmodalEvaluator, occluded
import numpy as np
import pytest
from training.config import DataSourceConfig
from training.evaluate import amodal_markdown, main, Predictions, score_amodal
from training.sources import open_source


def _box(y0, y1, x0, x1, shape=(6, 8)) -> np.ndarray:
    m = np.zeros(shape, bool)
    m[y0:y1, x0:x1] = True
    return m


# Target 0 is half hidden (visible 2x2, complete 2x4); target 1 is fully visible.
VISIBLE = np.stack([_box(0, 2, 0, 2), _box(4, 6, 4, 6)])
AMODAL = np.stack([_box(0, 2, 0, 4), _box(4, 6, 4, 6)])


def test_occluded_means_amodal_pixels_outside_the_visible_mask():
    assert occluded(VISIBLE, AMODAL).tolist() == [True, False]


def test_teacher_forced_numbers_by_hand():
    ev = AmodalEvaluator("teacher_forced")
    pred_amodal = np.stack([_box(0, 2, 0, 3), AMODAL[1]])  # 6 of 8 pixels, then exact
    ev.add_visible(VISIBLE, VISIBLE)
    ev.add_amodal(pred_amodal, AMODAL, gt_visible=VISIBLE)
    ev.add_mask_types(["amodal", "modal"], "amodal", [(0, 0), (1, 1)], 2)
    r = ev.report()
    assert r["visible"] == {"giou": 1.0, "ciou": 1.0, "masks": 2}
    assert r["amodal"]["giou"] == pytest.approx((0.75 + 1.0) / 2)
    assert r["amodal"]["ciou"] == pytest.approx((6 + 4) / (8 + 4))
    assert r["amodal_occluded"] == {"giou": pytest.approx(0.75), "ciou": pytest.approx(0.75), "masks": 1}
    assert r["mask_type"] == {"accuracy": 0.5, "targets": 2}


def test_generative_extra_prediction_counts_overall_but_not_in_the_occluded_subset():
    ev = AmodalEvaluator("generative")
    extra = _box(2, 4, 5, 8)
    ev.add_amodal(np.stack([AMODAL[1], extra, AMODAL[0]]), AMODAL, gt_visible=VISIBLE)
    r = ev.report()
    assert r["amodal"]["masks"] == 3 and r["amodal"]["giou"] == pytest.approx(2 / 3)
    assert r["amodal_occluded"] == {"giou": 1.0, "ciou": 1.0, "masks": 1}


def test_parts_without_ground_truth_report_none_and_state_round_trips():
    ev = AmodalEvaluator("teacher_forced")
    assert ev.report()["amodal"] == {"giou": None, "ciou": None, "masks": 0}
    assert ev.report()["mask_type"] == {"accuracy": None, "targets": 0}
    ev.add_amodal(AMODAL, AMODAL, gt_visible=VISIBLE)
    ev.add_mask_types(["modal"], "amodal", [(0, 0)], 1)
    copy = AmodalEvaluator("teacher_forced")
    copy.load_state(ev.state())
    assert copy.report() == ev.report()
    with pytest.raises(ValueError, match="14 values"):
        copy.load_state(np.zeros(3))


# -- on the synthetic world's R2SM and AmodalReasonSeg files --------------------------------------
@pytest.fixture(scope="module")
def synth(tmp_path_factory) -> Path:
    from m2sa_core.data.synthetic import main as synth_main

    out = tmp_path_factory.mktemp("synth")
    assert synth_main(["--out", str(out), "--images", "30", "--seed", "3", "--size", "128", "--quiet"]) == 0
    return out


def _records(synth: Path, kind: str, name: str):
    dataset = open_source(DataSourceConfig(kind=kind, path=str(synth / name), image_root=str(synth / "images")))
    return [dataset.items[i] for i in range(len(dataset.items))]


def test_ground_truth_as_predictions_scores_one_on_fixture_data(synth):
    """score_amodal reads the right ground truth per layout: perfect predictions give 1.0 everywhere."""
    ev = AmodalEvaluator("teacher_forced")
    r2sm = _records(synth, "r2sm", "r2sm_test.json")
    amodal_rs = _records(synth, "amodal_reasonseg", "amodal_reasonseg_test.json")
    assert {r.mask_type for r in r2sm} == {"modal", "amodal"}
    n_targets = 0
    for record in r2sm + amodal_rs:
        h, w = record.height, record.width
        requested = [t.mask(h, w) for t in record.targets]
        full = [t.amodal_mask(h, w) if t.amodal_rle is not None else m for t, m in zip(record.targets, requested)]
        visible = requested if record.mask_type != "amodal" else full
        kind = record.mask_type or "modal"
        score_amodal(ev, Predictions(requested, visible, full, [kind] * len(requested)), record, requested)
        n_targets += len(requested)
    r = ev.report()
    for part in ("visible", "amodal", "amodal_occluded"):
        assert r[part]["giou"] == 1.0 and r[part]["ciou"] == 1.0 and r[part]["masks"] > 0, part
    assert r["mask_type"] == {"accuracy": 1.0, "targets": len(r2sm)}
    # R2SM amodal queries have no visible ground truth; R2SM modal ones no amodal one.
    n_amodal_q = sum(r.mask_type == "amodal" for r in r2sm)
    assert r["visible"]["masks"] == n_targets - n_amodal_q
    assert r["amodal"]["masks"] == n_targets - (len(r2sm) - n_amodal_q)


@pytest.mark.parametrize("protocol", ["teacher-forced", "generative"])
def test_m2sa_eval_writes_amodal_scores_beside_the_existing_ones(tmp_path, synth, protocol):
    from m2sa_core.inference import Segmenter
    from m2sa_core.model.checkpoint import save_pretrained

    seg = Segmenter.from_pretrained("tiny", max_new_tokens=4)
    model_dir = save_pretrained(seg.model, seg.tokenizer, tmp_path / "model")
    out = tmp_path / "eval.json"
    code = main(["--model", str(model_dir), "--data", str(synth / "r2sm_test.json"), "--image-root",
                 str(synth / "images"), "--kind", "r2sm", "--max-items", "3", "--max-new-tokens", "4",
                 "--protocol", protocol, "--out", str(out), "--device", "cpu"])
    assert code == 0
    report = json.loads(out.read_text())
    assert set(report) >= {"model", "protocol", "data", "splits", "amodal"}
    assert report["splits"]["test"]["samples"] == 3
    assert report["amodal"]["mask_type"]["targets"] == 3
    assert 0.0 <= report["amodal"]["mask_type"]["accuracy"] <= 1.0
    table = out.with_suffix(".md").read_text()
    assert "test gIoU" in table and "mask-type accuracy" in table


def test_amodal_markdown_is_empty_without_amodal_data():
    assert amodal_markdown(AmodalEvaluator().report()) == ""


@pytest.mark.parametrize("dtype, expected", [("auto", "float32"), ("bfloat16", "bfloat16")])
def test_m2sa_eval_scores_the_dtype_asked_for_and_says_which(tmp_path, synth, dtype, expected):
    """A robot on a GPU runs bfloat16 by default: --dtype scores that precision, and the report names it."""
    from m2sa_core.inference import Segmenter
    from m2sa_core.model.checkpoint import save_pretrained

    seg = Segmenter.from_pretrained("tiny", max_new_tokens=4)
    model_dir = save_pretrained(seg.model, seg.tokenizer, tmp_path / "model")
    out = tmp_path / "eval.json"
    code = main(["--model", str(model_dir), "--data", str(synth / "r2sm_test.json"), "--image-root",
                 str(synth / "images"), "--kind", "r2sm", "--max-items", "2", "--max-new-tokens", "4",
                 "--protocol", "teacher-forced", "--out", str(out), "--device", "cpu", "--dtype", dtype])
    assert code == 0
    report = json.loads(out.read_text())
    assert (report["device"], report["dtype"]) == ("cpu", expected)
    assert report["splits"]["test"]["samples"] == 2
    with pytest.raises(SystemExit):
        main(["--model", str(model_dir), "--data", str(synth / "r2sm_test.json"), "--out", str(out),
              "--dtype", "float64"])
