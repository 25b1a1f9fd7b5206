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

"""Training behaviour: the loss falls on one sample; the trainable/frozen split and LoRA."""

from __future__ import annotations

from m2sa_core.model import get_preset, ImageProcessor, M2SAModel
from m2sa_core.model.batch import make_batch, toy_example
from m2sa_core.model.tokenizer import build_tiny_tokenizer
from m2sa_core.model.trainable import (
    apply_trainable_policy,
    has_lora,
    merge_lora,
    split_summary,
    trainable_parameter_groups,
)
from m2sa_core.prompt import SEG_TOKEN
import pytest
import torch
from toy_batches import fit_batch


@pytest.fixture(scope="module")
def tokenizer():
    return build_tiny_tokenizer()


def _model(tokenizer, seed=0):
    cfg = get_preset("tiny")
    cfg.text_config["vocab_size"] = len(tokenizer)
    cfg.seg_token_id = tokenizer.convert_tokens_to_ids(SEG_TOKEN)
    torch.manual_seed(seed)
    return M2SAModel.build(cfg)


def _batch(model, tokenizer):
    return make_batch([toy_example(0)], tokenizer, ImageProcessor(model.config), model.config)


def test_fifty_steps_on_one_sample_drive_the_loss_down(tokenizer):
    model = apply_trainable_policy(_model(tokenizer), "from_scratch")
    history = fit_batch(model, _batch(model, tokenizer), steps=50, lr=2e-3)
    assert history[-1] < history[0] / 5, history
    with torch.no_grad():
        out = model(_batch(model, tokenizer))
    assert out.ce_loss < 0.5 and out.dice_loss < 0.6


def test_paper_policy_trains_exactly_the_designed_parts(tokenizer):
    model = apply_trainable_policy(_model(tokenizer), "paper")
    groups = trainable_parameter_groups(model)
    assert set(groups) == {"lora", "embed_tokens", "lm_head", "sam.mask_decoder", "fusion", "seg_projector",
                           "mask_type_head"}
    assert all(".self_attn.q_proj." in n or ".self_attn.v_proj." in n for n in groups["lora"])
    assert all(n.startswith("llm.") for n in groups["lora"])
    assert len(groups["lora"]) == 2 * 2 * model.config.text_config["num_hidden_layers"]
    lora = model.llm.model.layers[0].self_attn.q_proj
    assert (lora.r["default"], lora.lora_alpha["default"], lora.lora_dropout["default"].p) == (8, 16, 0.05)
    frozen = ("vision_tower.", "mm_projector.", "sam.image_encoder.", "sam.prompt_encoder.")
    for name, p in model.named_parameters():
        if name.startswith(frozen) or (name.startswith("llm.model.layers.") and "lora_" not in name):
            assert not p.requires_grad, name
    # Gradients reach only the trainable parameters (SAM's IoU head has no loss, as in the authors' code).
    model.train()
    batch = _batch(model, tokenizer)
    batch["mask_types"] = ["modal"] * len(batch["sample_ids"])  # so the mask-type head takes part
    model(batch).loss.backward()
    for name, p in model.named_parameters():
        if "iou_prediction_head" not in name:
            assert (p.grad is not None) == p.requires_grad, name


def test_from_scratch_trains_everything_without_lora(tokenizer):
    model = apply_trainable_policy(_model(tokenizer), "from_scratch")
    assert not has_lora(model)
    assert all(p.requires_grad for p in model.parameters())
    with pytest.raises(ValueError, match="unknown trainable policy"):
        apply_trainable_policy(model, "everything")


def test_the_split_summary_names_what_is_held_still_with_its_size(tokenizer):
    model = apply_trainable_policy(_model(tokenizer), "from_scratch")
    total = sum(p.numel() for p in model.parameters())
    assert split_summary(model) == f"{total / 1e6:.2f} M of {total / 1e6:.2f} M parameters train"
    for p in model.sam.image_encoder.parameters():
        p.requires_grad_(False)
    encoder = sum(p.numel() for p in model.sam.image_encoder.parameters())
    assert split_summary(model) == (f"{(total - encoder) / 1e6:.2f} M of {total / 1e6:.2f} M parameters train; "
                                    f"frozen: sam.image_encoder {encoder / 1e6:.2f} M")
    # A prefix that catches part of a component says so.
    for p in model.sam.image_encoder.parameters():
        p.requires_grad_(True)
    block = sum(p.numel() for p in model.sam.image_encoder.blocks[0].parameters())
    model.sam.image_encoder.blocks[0].requires_grad_(False)
    assert split_summary(model).endswith(f"frozen: sam.image_encoder (partly) {block / 1e6:.2f} M")
    # Under the paper's policy the language model's base weights are still, its LoRA adapters are not.
    paper = split_summary(apply_trainable_policy(_model(tokenizer), "paper"))
    assert "llm " in paper and "vision_tower " in paper and "lora" not in paper.split("frozen:")[1]


def test_merge_lora_keeps_the_function_and_removes_adapters(tokenizer):
    model = apply_trainable_policy(_model(tokenizer), "paper")
    for name, p in model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=0.05)
    batch = _batch(model, tokenizer)
    model.eval()
    with torch.no_grad():
        before = model(batch).logits
        merge_lora(model)
        after = model(batch).logits
    assert not has_lora(model) and model.config.lora is None
    assert not any("lora_" in k for k in model.state_dict())
    torch.testing.assert_close(after, before, atol=1e-4, rtol=1e-4)


def test_gradient_checkpointing_gives_the_same_loss_and_grads(tokenizer):
    model = apply_trainable_policy(_model(tokenizer), "from_scratch")
    batch = _batch(model, tokenizer)
    model.train()
    loss = model(batch).loss
    loss.backward()
    grad = model.llm.model.layers[0].self_attn.q_proj.weight.grad.clone()
    model.zero_grad()
    model.set_gradient_checkpointing(True)
    loss_ckpt = model(batch).loss
    loss_ckpt.backward()
    torch.testing.assert_close(loss_ckpt, loss)
    torch.testing.assert_close(model.llm.model.layers[0].self_attn.q_proj.weight.grad, grad, atol=1e-5, rtol=1e-4)
