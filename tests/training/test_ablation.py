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
The ablation's variants trained apart (side by side on one GPU) make the same table as one run over all four.

Each keeps its scores, and the assembling run reuses them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from training.ablation import main, TAGS, trained, variant_config
from training.config import config_to_dict, load_config

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_a_variant_run_alone_is_reused_by_the_table(tmp_path, config_on_small_world):
    config, world = config_on_small_world("training/tiny_synth.yaml", 12)
    out = tmp_path / "ablation"
    common = ["--config", str(config), "--steps", "1", "--out", str(out), "--data-dir", str(world),
              "--max-items", "1"]
    overrides = ["optim.batch_size=2", "optim.warmup_steps=1", "num_workers=0", "checkpoint_every=1"]

    assert main([*common, "--variant", "single_nofusion", *overrides]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["single_nofusion"]  # one variant, no table
    alone = json.loads((out / "single_nofusion" / "scores.json").read_text())
    assert alone["scores"]["per_target"]["all"]["samples"] == 3  # one question of each test split

    assert main([*common, *overrides]) == 0
    table = json.loads((out / "ablation.json").read_text())
    assert [r["seg_mode"] + ("_fusion" if r["early_fusion"] else "_nofusion") for r in table] == list(TAGS)
    reused = next(r for r in table if r["seg_mode"] == "single" and not r["early_fusion"])
    assert reused["scores"] == alone["scores"] and reused["train_s"] == alone["train_s"]
    rows = [line for line in (out / "ablation.md").read_text().splitlines() if line.startswith("| ")]
    assert len(rows) == 5  # the header and the four variants

    # Naming some variants assembles a table of those alone, from their kept scores.
    assert main([*common, "--variant", "single_nofusion", "--variant", "multi_fusion", *overrides]) == 0
    some = json.loads((out / "ablation.json").read_text())
    assert [(r["seg_mode"], r["early_fusion"]) for r in some] == [("multi", True), ("single", False)]
    assert some[1]["scores"] == alone["scores"]
    rows = [line for line in (out / "ablation.md").read_text().splitlines() if line.startswith("| ")]
    assert len(rows) == 3 and rows[2].startswith("| single [SEG], no early fusion")

    # Scored again without merging instances named twice (the rows of an earlier table were):
    # kept apart from the model's own setting, and the notes say which is which.
    assert main([*common, "--variant", "single_nofusion", "--variant", "multi_fusion", "--duplicate-iou", "0",
                 *overrides]) == 0
    assert (out / "single_nofusion" / "scores_duplicate_iou_0.json").exists()
    assert json.loads((out / "single_nofusion" / "scores.json").read_text()) == alone  # untouched
    notes = (out / "ablation_duplicate_iou_0.md").read_text()
    assert notes.count("no instances merged") == 2 and "merged at IoU" not in notes


@pytest.mark.slow
def test_a_resumed_variant_says_which_steps_its_time_covers(tmp_path, config_on_small_world):
    """
    Variants take hours and outlive sessions.

    One stopped and resumed must not report the last invocation's minutes as the whole
    run's, and a model trained before is not timed.
    """
    from training.train import train

    config, world = config_on_small_world("training/tiny_synth.yaml", 12)
    out = tmp_path / "ablation"
    overrides = ["optim.batch_size=2", "optim.warmup_steps=1", "num_workers=0", "checkpoint_every=1"]
    common = ["--config", str(config), "--steps", "2", "--out", str(out), "--data-dir", str(world),
              "--max-items", "1", "--variant", "multi_nofusion"]

    stopped = variant_config(str(config), overrides, out / "multi_nofusion", "multi", False, 2)
    train(stopped, resume=True, stop_after=1)  # the session ends after one of two steps
    assert main([*common, *overrides]) == 0
    result = json.loads((out / "multi_nofusion" / "scores.json").read_text())
    assert result["resumed_from"] == 1 and result["trained_here"]
    assert trained({**result, "steps": 2}).startswith("trained 2 steps, resumed at step 1: the last 1 in ")

    (out / "multi_nofusion" / "scores.json").unlink()  # scored again from the finished model
    assert main([*common, *overrides]) == 0
    again = json.loads((out / "multi_nofusion" / "scores.json").read_text())
    assert not again["trained_here"] and again["resumed_from"] == 0
    assert trained({**again, "steps": 2}) == "2 steps, its model trained before this run (scored here, not timed)"


def _flat(tree: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


@pytest.mark.parametrize("seg_mode,fusion", [("single", True), ("multi", False)])
def test_a_variant_differs_from_the_shipped_stage_only_where_the_paper_does(tmp_path, seg_mode, fusion):
    """
    Table 6 varies [SEG] and fusion alone.

    Every other setting of stage 3, its model overrides (the IoU head's loss weight) and
    its schedule included, is the shipped one's; the in-loop validation is left out, as
    every variant is scored afterwards.
    """
    stage = REPO / "training" / "tiny" / "3_m2sa.yaml"
    shipped = _flat(config_to_dict(load_config(stage)))
    variant = _flat(config_to_dict(variant_config(str(stage), [], tmp_path / "v", seg_mode, fusion, None)))
    differ = {key for key in shipped.keys() | variant.keys() if shipped.get(key) != variant.get(key)}
    assert differ == {"out_dir", "eval_data", "seg_mode", "model.overrides.use_early_fusion"} - (
        {"seg_mode"} if seg_mode == "multi" else set())
    assert variant["model.overrides.use_early_fusion"] is fusion
    assert variant["model.overrides.iou_head_loss_weight"] == shipped["model.overrides.iou_head_loss_weight"]
    assert variant["optim.max_steps"] == shipped["optim.max_steps"]
