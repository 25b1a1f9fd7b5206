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

"""Prompt, answer length and recipe details of docs/FIDELITY.md that need no golden files."""

from __future__ import annotations

from pathlib import Path
import random

from m2sa_core.data.builder import SampleBuilder
from m2sa_core.data.records import SegRecord, TargetAnnotation
from m2sa_core.inference import DEFAULT_MAX_NEW_TOKENS, Segmenter
from m2sa_core.model import get_preset
from m2sa_core.model.config import AUTHORS_SEG_REQUEST
from m2sa_core.model.generation import greedy_generate, SpecialIds
from m2sa_core.model.losses import dice_per_mask
from m2sa_core.prompt import build_prompt
from m2sa_core.shipped_model import SHIPPED_MODEL
from m2sa_core.types import Granularity
import pytest
import torch
import yaml

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = SHIPPED_MODEL
# Prompt ids of a demo command for the shipped model: what its training built (no
# segmentation request after the question). Re-pinned only when the model is re-exported
# with a new tokenizer (scripts/train_tiny.sh --export), never when the prompt code changes.
SHIPPED_DEMO_IDS = [1, 36, 686, 696, 303, 692, 549, 297, 457, 706, 695, 72, 548, 17, 575, 548, 688, 393, 705, 15, 703,
                    373, 15, 297, 702, 72, 704, 86, 336, 262, 549, 269, 698, 86, 17, 710, 29, 224, -200, 202, 44, 717,
                    336, 798, 366, 262, 487, 17, 914, 759, 331, 458, 34, 711, 29]


@pytest.mark.parametrize("preset", ["7b", "13b"])
def test_real_presets_carry_the_authors_prompt_and_preprocessing(preset):
    config = get_preset(preset)
    assert config.seg_request == AUTHORS_SEG_REQUEST
    assert config.question_templates == "authors"
    assert (config.pad_clip_to_square, config.resize_backend) == (False, "pil")
    assert config.dice_smooth == pytest.approx(1e-3)
    prompt = build_prompt("Where is the remote?", config.use_im_start_end, config.seg_request)
    assert prompt.endswith("Where is the remote? Please output segmentation mask. ASSISTANT:")


def test_the_request_round_trips_through_a_saved_config(tmp_path):
    config = get_preset("7b")
    config.save(tmp_path)
    assert type(config).load(tmp_path).seg_request == AUTHORS_SEG_REQUEST


def test_shipped_tiny_model_prompt_is_unchanged():
    segmenter = Segmenter.from_pretrained(SHIPPED)
    assert segmenter.model.config.seg_request == ""
    assert segmenter.prompt_ids("I want to turn on the TV. What should I press?") == SHIPPED_DEMO_IDS


class _Stepper:
    """Emits a fixed id sequence, one per step."""

    def __init__(self, ids: list[int]) -> None:
        self.ids, self.t = ids, 0

    def step(self, ids: torch.Tensor):
        self.t += 1
        return torch.zeros(1, 4), torch.tensor([self.ids[self.t]])


@pytest.mark.parametrize("limit,finished", [(8, True), (3, False)])
def test_generation_reports_whether_it_reached_eos(limit, finished):
    ids = [5, 7, 9, 9, 2, 5, 5, 5, 5, 5]  # EOS (2) at the fifth step
    special = SpecialIds(eos=2, pad=0, seg=9)
    (gen,), _ = greedy_generate(_Stepper(ids), (torch.zeros(1, 4), torch.tensor([ids[0]])), limit, special,
                                lagged=False)
    assert gen.finished is finished
    assert gen.tokens == ([5, 7, 9, 9] if finished else [5, 7, 9])


def test_segmenter_default_token_limit_and_truncated_flag():
    assert DEFAULT_MAX_NEW_TOKENS >= 256
    import numpy as np

    segmenter = Segmenter.from_pretrained(SHIPPED, max_new_tokens=2)
    image = np.zeros((480, 640, 3), np.uint8)  # a dark camera frame
    assert segmenter.segment(image, "Which objects can hold a drink?").truncated
    segmenter.max_new_tokens = DEFAULT_MAX_NEW_TOKENS
    assert not segmenter.segment(image, "Which objects can hold a drink?").truncated


def _mmr_record(answer: str = "the mug_1 {seg} is there") -> SegRecord:
    target = TargetAnnotation(label="mug_1", category_name="mug", object_name="mug", instance=1, part_name="",
                              granularity=Granularity.OBJECT, mask_rle={"size": [4, 4], "counts": "04"})
    return SegRecord(source="mmr", split="val", image_path=Path("x.jpg"), image_id=1, question_index=0,
                     question="Where can I pour water?", answer_template=answer, targets=[target], height=4, width=4)


def test_authors_question_templates_in_training_and_evaluation():
    from m2sa_core.model.tokenizer import build_tiny_tokenizer

    tok = build_tiny_tokenizer()
    record = _mmr_record()
    train = SampleBuilder(tok, question_templates="authors")
    commands = {train.command_for(record, random.Random(i)) for i in range(40)}
    assert all(c.startswith("Where can I pour water? ") and c != record.question for c in commands)
    assert "Where can I pour water? Please output segmentation mask." in commands and len(commands) > 3
    evaluation = SampleBuilder(tok, question_templates="authors", seg_request=AUTHORS_SEG_REQUEST, evaluation=True)
    assert evaluation.command_for(record, random.Random(0)) == "Where can I pour water? " + AUTHORS_SEG_REQUEST
    assert evaluation.answer_for(record, random.Random(0)) == "the mug_1 [SEG] is there."
    plain = SampleBuilder(tok)
    assert plain.command_for(record, random.Random(0)) == record.question
    assert plain.answer_for(record, random.Random(0)) == "the mug_1 [SEG] is there"


def test_dice_smoothing_equals_the_authors_scaled_dice():
    torch.manual_seed(0)
    logits, gt = torch.randn(3, 16, 16), (torch.rand(3, 16, 16) > 0.7).float()
    p = logits.sigmoid().flatten(1)
    t = gt.flatten(1)
    scale, eps = 1000.0, 1e-6  # the authors' (LISA's) dice_loss
    theirs = 1 - (2 * (p / scale * t).sum(-1) + eps) / ((p / scale).sum(-1) + (t / scale).sum(-1) + eps)
    torch.testing.assert_close(dice_per_mask(logits, gt, smooth=1e-3), theirs, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["m2sa_7b.yaml", "m2sa_13b.yaml"])
def test_real_training_configs_use_the_authors_budget_and_image_root(name):
    config = yaml.safe_load((ROOT / "training" / name).read_text())
    assert config["optim"]["max_steps"] == 5000
    assert (config["optim"]["batch_size"], config["optim"]["grad_accum"]) == (2, 10)
    mmr = [d for d in config["data"] + config["eval_data"] if d["kind"] == "mmr"]
    assert mmr and all(d["image_root"] == "data/coco" for d in mmr)
    assert config["questions_per_image"] == 3
