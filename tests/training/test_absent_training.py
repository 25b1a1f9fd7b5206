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
Training on commands about what is not there: the refusal is supervised as words, no mask loss.

A record with no targets (``meta["missing"]`` says what is absent) becomes a sample whose
answer is the absent sentence, with no [SEG]; it trains the language model alone, as the
conversations do. Stage 3b (training/tiny/3b_absent.yaml) adds such questions to stage 3's
mixture, which it keeps as it is, and starts from stage 3's model.
"""

from __future__ import annotations

from dataclasses import replace
import json
from pathlib import Path

import cv2
from m2sa_core.data.builder import SampleBuilder
from m2sa_core.data.records import SegRecord, TargetAnnotation
from m2sa_core.data.rle import encode_mask
from m2sa_core.data.synthetic import main as synth_main
from m2sa_core.inference.absence import absent_answer
from m2sa_core.model import get_preset, ImageProcessor, M2SAModel
from m2sa_core.model.batch import collate
from m2sa_core.model.tokenizer import build_tiny_tokenizer
from m2sa_core.prompt import IGNORE_INDEX, SEG_TOKEN
from m2sa_core.shipped_model import SHIPPED_MODEL
import numpy as np
import pytest
from safetensors.torch import load_file
import torch
from training import sources
from training.config import DataSourceConfig, load_config
from training.sources import _filtered, EmptySourceError
from training.train import train

ROOT = Path(__file__).resolve().parents[2]
STAGES = ROOT / "training" / "tiny"
H = W = 32


@pytest.fixture(scope="module")
def tokenizer():
    return build_tiny_tokenizer()


@pytest.fixture(scope="module")
def model(tokenizer):
    config = get_preset("tiny")
    config.text_config["vocab_size"] = len(tokenizer)
    config.seg_token_id = tokenizer.convert_tokens_to_ids(SEG_TOKEN)
    torch.manual_seed(0)
    return M2SAModel.build(config)


def _present(tmp_path: Path) -> SegRecord:
    image = tmp_path / "scene.png"
    cv2.imwrite(str(image), np.full((H, W, 3), 120, np.uint8))
    mask = np.zeros((H, W), bool)
    mask[4:20, 6:18] = True
    target = TargetAnnotation.named("mug_1", "mug", "mug", 1, "", encode_mask(mask))
    return SegRecord(source="synthetic", split="train", image_path=image, image_id="scene", question_index=0,
                     question="Which thing holds coffee?", answer_template="The {seg} holds it.",
                     targets=[target], height=H, width=W, mask_type="modal", meta={"family": "object"})


def _absent(present: SegRecord, words: str = "microwave", kind: str = "category") -> SegRecord:
    return replace(present, question_index=1, question=f"Press the {words}'s start button.",
                   answer_template=absent_answer(words), targets=[], mask_type="modal",
                   meta={"family": "absent", "missing": {"kind": kind, "words": words}})


def test_an_absent_record_becomes_a_sample_that_supervises_its_sentence_and_no_seg(tmp_path, tokenizer):
    builder = SampleBuilder(tokenizer)
    sample = builder.build(_absent(_present(tmp_path)))
    assert sample.answer == "There is no microwave here."
    assert sample.masks.shape == (0, H, W) and sample.target_labels == []
    supervised = [t for t in sample.labels if t != IGNORE_INDEX]
    assert builder.seg_token_id not in sample.input_ids
    assert tokenizer.decode(supervised, skip_special_tokens=True).strip() == "There is no microwave here."
    assert supervised[-1] == tokenizer.eos_token_id  # the answer ends, so generation stops after it


def _batch(model, tokenizer, samples) -> dict:
    return collate(samples, ImageProcessor(model.config), tokenizer.pad_token_id)


def test_an_absent_sample_trains_the_words_and_no_mask(tmp_path, tokenizer, model):
    builder = SampleBuilder(tokenizer)
    present, absent = _present(tmp_path), _absent(_present(tmp_path))
    model.train()
    alone = model(_batch(model, tokenizer, [builder.build(absent)]))
    assert alone.ce_loss > 0 and alone.num_masks == 0
    assert float(alone.bce_loss) == float(alone.dice_loss) == float(alone.mask_type_loss) == 0.0
    assert float(alone.iou_loss) == 0.0 and alone.pred_masks[0].shape[0] == 0
    model.zero_grad()
    alone.loss.backward()
    assert model.llm.lm_head.weight.grad.abs().sum() > 0  # the refusal's words train
    # SAM is not run for a batch answered in words: no gradient reaches its decoder.
    assert all(p.grad is None or not p.grad.any() for p in model.sam.mask_decoder.parameters())
    # Beside a present command, the masks are the present one's alone.
    mixed = model(_batch(model, tokenizer, [builder.build(present), builder.build(absent)]))
    assert mixed.num_masks == 1 and mixed.bce_loss > 0
    assert [m.shape[0] for m in mixed.pred_masks] == [1, 0]
    model.zero_grad()


def test_training_on_the_refusal_makes_it_the_answer(tmp_path, tokenizer, model):
    """A few steps on one absent sample drive its answer's loss down: every word of it is supervised."""
    builder = SampleBuilder(tokenizer)
    batch = _batch(model, tokenizer, [builder.build(_absent(_present(tmp_path)))])
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=2e-3)
    model.train()
    losses = []
    for _ in range(25):
        optimizer.zero_grad()
        out = model(batch)
        out.loss.backward()
        optimizer.step()
        losses.append(float(out.ce_loss.detach()))
    assert losses[-1] < losses[0] / 4, losses
    assert float(out.loss.detach()) == pytest.approx(float(out.ce_loss.detach()) * model.config.ce_loss_weight)


def test_families_and_exclude_families_split_absent_from_present_questions(tmp_path):
    present = _present(tmp_path)
    records = [present, _absent(present), replace(present, question_index=2, meta={"family": "part"})]
    only = _filtered(records, DataSourceConfig(kind="synthetic", path="x", families=["absent"]), "absent")
    assert [r.question_index for r in only] == [1]
    rest = _filtered(records, DataSourceConfig(kind="synthetic", path="x", exclude_families=["absent"]), "x")
    assert [r.question_index for r in rest] == [0, 2]
    with pytest.raises(EmptySourceError, match="exclude_families"):
        _filtered([_absent(present)], DataSourceConfig(kind="synthetic", path="x", exclude_families=["absent"]), "x")


def test_stage_3b_keeps_stage_3s_mixture_adds_the_absent_questions_and_starts_from_its_model():
    three, absent = load_config(STAGES / "3_m2sa.yaml"), load_config(STAGES / "3b_absent.yaml")
    assert absent.model.init_from == f"{three.out_dir}/final"
    assert (absent.objective, absent.model.trainable_policy, absent.model.freeze, absent.model.loss_weights) == (
        three.objective, three.model.trainable_policy, three.model.freeze, three.model.loss_weights)
    *kept, added, twins = absent.data
    assert kept == three.data  # the present mixture, rates and filters, as stage 3 trains it
    assert added.families == ["absent"] and added.path == three.data[0].path
    # The absent phrasings asked about what is there, so that only the image says "not there".
    assert twins.path.endswith("absent_twins_train.json") and 0 < twins.rate < added.rate
    total = sum(src.rate for src in absent.data)
    assert 0.1 <= added.rate / total <= 0.3  # refusals are learned, present targets still make most of the step
    assert sum(src.rate for src in kept) / total >= 0.7
    assert 600 <= absent.optim.max_steps <= 1000 and absent.optim.lr < three.optim.lr
    # Stage 3 and the tokenizer every stage keeps read the same texts as before absent questions existed.
    assert three.data[0].exclude_families == ["absent"]
    (mmr,) = [s for s in load_config(STAGES / "1_sam.yaml").model.tokenizer_data if s.path.endswith("MMR_train.json")]
    assert mmr.exclude_families == ["absent"]


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("world")
    assert synth_main(["--out", str(out), "--images", "12", "--seed", "5", "--size", "128", "--quiet"]) == 0
    return out


def _with_absent_questions(read):
    """Wrap a reader so that MMR files without absent questions get one per image first (one with them is kept)."""
    def reader(path, image_root, strict):
        records = list(read(path, image_root, strict))
        if not Path(path).name.startswith("MMR_") or any("missing" in r.meta for r in records):
            return records
        firsts = {r.image_path: r for r in reversed(records)}
        return [_absent(r, "microwave") for r in firsts.values()] + records  # first, where max_items reads

    return reader


def test_stage_3b_trains_a_few_steps_from_a_stage_3_model(world, tmp_path, monkeypatch):
    real = sources.resolve_reader
    monkeypatch.setattr(sources, "resolve_reader", lambda kind: _with_absent_questions(real(kind)))
    text = (STAGES / "3b_absent.yaml").read_text()
    text = text.replace("data/synth16k/", f"{world}/").replace("data/synth/", f"{world}/")
    config_path = tmp_path / "3b_absent.yaml"
    config_path.write_text(text)
    config = load_config(config_path, [f"out_dir={tmp_path / 'run'}", f"model.init_from={SHIPPED_MODEL}",
                                       "optim.max_steps=2", "optim.warmup_steps=1", "optim.batch_size=4",
                                       "log_every=1", "checkpoint_every=2", "num_workers=0", "eval_max_items=2",
                                       "eval_every=0"])
    final = Path(train(config))
    before, after = load_file(str(SHIPPED_MODEL / "model.safetensors")), load_file(str(final / "model.safetensors"))
    assert any(not torch.equal(before[k], after[k]) for k in before if k.startswith("llm."))
    assert all(torch.equal(before[k], after[k]) for k in before if k.startswith("vision_tower."))
    evals = sorted((tmp_path / "run").glob("eval_step*.json"))
    val = json.loads(evals[-1].read_text())["val"]
    assert val["absent_commands"] >= 1 and val["present_commands"] >= 1  # both eval sources, one split


def test_the_ablation_scores_the_present_questions_of_a_world_with_absent_ones(world, monkeypatch):
    from training import ablation

    present = ablation.score(SHIPPED_MODEL, world, max_items=2)
    real = sources.resolve_reader
    monkeypatch.setattr(sources, "resolve_reader", lambda kind: _with_absent_questions(real(kind)))
    assert ablation.score(SHIPPED_MODEL, world, max_items=2) == present  # no mask to score, nothing changes
