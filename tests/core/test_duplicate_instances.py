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

"""An instance the answer names twice goes: from the targets, the answer text and the track prompts."""

from __future__ import annotations

import json

from m2sa_core.inference.answer import parse_targets
from m2sa_core.inference.duplicates import duplicate_targets, remove_from_answer
from m2sa_core.shipped_model import SHIPPED_MODEL
from m2sa_core.types import Granularity, Target
import numpy as np
import pytest


def box(x: int, y: int, w: int = 10, h: int = 10, size: int = 64) -> np.ndarray:
    mask = np.zeros((size, size), dtype=bool)
    mask[y:y + h, x:x + w] = True
    return mask


def target(label: str, mask: np.ndarray) -> Target:
    parsed = parse_targets(label + " [SEG]")[0]
    level = Granularity.PART if parsed.part_name else Granularity.OBJECT
    return Target(parsed.label, parsed.object_name, parsed.instance, parsed.part_name, level, mask)


def test_a_second_instance_on_the_first_ones_pixels_is_a_duplicate():
    targets = [target("bottle_1", box(5, 5)), target("bottle_2", box(6, 5)), target("bottle_3", box(40, 40))]
    assert duplicate_targets(targets, 0.7) == [1]  # IoU 9/11 = 0.82; bottle_3 lies elsewhere
    assert duplicate_targets(targets, 0.9) == []
    assert duplicate_targets(targets, 0.0) == []  # off


def test_only_the_same_category_and_part_of_another_instance_merge():
    same = box(5, 5)
    targets = [target("mug_1", same), target("bottle_1", same), target("mug_1's handle", same),
               target("mug_2's body", same), target("mug_1", same)]
    # other category, the object and its own part, other parts, and the same label twice all stay
    assert duplicate_targets(targets, 0.5) == []


def test_a_repeated_object_takes_its_parts_with_it():
    targets = [target("remote_control_1", box(5, 5)), target("remote_control_1's button", box(6, 6, 3, 3)),
               target("remote_control_2", box(5, 6)), target("remote_control_2's button", box(30, 30, 3, 3))]
    assert duplicate_targets(targets, 0.7) == [2, 3]


def test_a_target_is_compared_with_the_kept_ones_only():
    # bottle_2 repeats bottle_1; bottle_3 overlaps bottle_2 only, so it is a bottle of its own
    targets = [target("bottle_1", box(0, 0)), target("bottle_2", box(2, 0)), target("bottle_3", box(5, 0))]
    assert duplicate_targets(targets, 0.6) == [1]


@pytest.mark.parametrize("raw, drop, expected", [
    ("That is the pan_1 [SEG], the pan_2 [SEG] and the pan_3 [SEG].", [2],
     "That is the pan_1 [SEG] and the pan_2 [SEG]."),
    ("That is the pan_1 [SEG], the pan_2 [SEG] and the pan_3 [SEG].", [1],
     "That is the pan_1 [SEG] and the pan_3 [SEG]."),
    ("You can use the bottle_1 [SEG] and the bottle_2 [SEG].", [1], "You can use the bottle_1 [SEG]."),
    ("Press the television_set_1's button [SEG] and the television_set_2's button [SEG] to turn it on.", [1],
     "Press the television_set_1's button [SEG] to turn it on."),
    ("Here is the remote_control_1 [SEG], the remote_control_1's button [SEG], the remote_control_2 [SEG] and "
     "the remote_control_2's button [SEG].", [2, 3],
     "Here is the remote_control_1 [SEG] and the remote_control_1's button [SEG]."),
    ("The mouse_1 [SEG] and its body [SEG], the mouse_2 [SEG] and its body [SEG].", [2, 3],
     "The mouse_1 [SEG] and its body [SEG]."),
    ("These use power: the laptop_1 [SEG], the laptop_2 [SEG], the lamp_1 [SEG] and the lamp_2 [SEG].", [1, 3],
     "These use power: the laptop_1 [SEG] and the lamp_1 [SEG]."),
    ("Take mug_1 [SEG] or mug_2 [SEG].", [1], "Take mug_1 [SEG]."),
    ("It is the mug_1 [SEG].", [], "It is the mug_1 [SEG]."),
])
def test_the_answer_loses_the_names_it_repeated_and_stays_a_sentence(raw, drop, expected):
    assert remove_from_answer(raw, drop) == expected
    kept = [t.label for i, t in enumerate(parse_targets(raw)) if i not in drop]
    assert [t.label for t in parse_targets(expected)] == kept


def test_words_that_are_not_list_joints_stay():
    raw = "Use the pan_1 [SEG] to cook, then wash the pan_2 [SEG]."
    assert remove_from_answer(raw, [1]) == "Use the pan_1 [SEG] to cook, then wash."


@pytest.fixture(scope="module")
def held_out_knife():
    """Held-out image 948 (world seed 7, 320 px): one knife, which the shipped model names twice."""
    from m2sa_core.data.synthetic.world import generate_image

    return generate_image(7, 948, 1000, 320).scene.image


def test_the_shipped_model_names_one_knife_once(held_out_knife):
    """
    The tiny model's language side says "knife_1 and knife_2" for a scene with one knife; both masks lie on it.

    What a planner receives is one knife, in the answer and in the targets; the raw
    answer keeps what was generated.
    """
    from m2sa_core.inference import Segmenter

    assert json.loads((SHIPPED_MODEL / "config.json").read_text())["duplicate_instance_iou"] == 0.7
    question = "Which tool would I need to chop onions?"
    segmenter = Segmenter.from_pretrained(SHIPPED_MODEL, decoder="dynamic")
    result = segmenter.segment(held_out_knife, question, keep_prompts=True)
    assert [t.label for t in result.targets] == ["knife_1"]
    assert result.merged == ["knife_2"] and "knife_2" not in result.answer
    assert "knife_2 [SEG]" in result.raw_answer and result.seg_indices == [0]
    assert result.prompts.embeddings.shape[0] == 1  # tracking follows the one knife

    segmenter.duplicate_iou = 0.0  # off, as the authors' weights run
    both = segmenter.segment(held_out_knife, question)
    assert [t.label for t in both.targets] == ["knife_1", "knife_2"] and both.merged == []
    assert both.targets[0].mask.sum() > 0 and np.array_equal(both.targets[0].mask, result.targets[0].mask)


def test_m2sa_eval_scores_the_merged_answers_and_says_what_went(tmp_path):
    """
    The generative protocol scores what the node answers.

    The merged knife is not an extra target (count right), the answer log names it, the
    report names the threshold; `--duplicate-iou 0` scores the raw answer (one target
    too many).
    """
    from m2sa_core.data.synthetic.world import image_entries
    from training.evaluate import main

    (tmp_path / "images").mkdir()
    entries = image_entries(tmp_path, 7, 1000, 320, 948)  # the held-out world's image of the test above
    data = tmp_path / "MMR_test_obj_only.json"
    data.write_text(json.dumps([entries.mmr["test_obj_only"]]))
    common = ["--model", str(SHIPPED_MODEL), "--data", str(data), "--image-root", str(tmp_path / "images"),
              "--kind", "synthetic", "--protocol", "generative"]
    assert main([*common, "--out", str(tmp_path / "merged.json")]) == 0
    assert main([*common, "--duplicate-iou", "0", "--out", str(tmp_path / "raw.json")]) == 0
    merged, raw = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("merged", "raw"))
    assert merged["duplicate_iou"] == 0.7 and raw["duplicate_iou"] == 0.0
    split = "test_obj_only"
    assert merged["splits"][split]["count_accuracy"] > raw["splits"][split]["count_accuracy"]
    assert merged["splits"][split]["giou"] > raw["splits"][split]["giou"]  # the extra mask scored IoU 0
    logs = {n: {a["question"]: a for a in map(json.loads, (tmp_path / f"{n}.answers.jsonl").read_text().splitlines())}
            for n in ("merged", "raw")}
    question = "Which tool would I need to chop onions?"
    assert logs["merged"][question]["merged"] == ["knife_2"] and logs["merged"][question]["kind"] == "exact"
    assert logs["raw"][question]["kind"] == "too many instances" and "merged" not in logs["raw"][question]


def test_m2sa_eval_refuses_a_threshold_outside_zero_to_one(tmp_path, capsys):
    from training.evaluate import main

    with pytest.raises(SystemExit) as exit_info:
        main(["--model", str(SHIPPED_MODEL), "--data", "x.json", "--out", str(tmp_path / "r.json"),
              "--duplicate-iou", "1.5"])
    assert exit_info.value.code == 2
    assert "--duplicate-iou must be in [0, 1]" in capsys.readouterr().err
