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

"""SAM's IoU head learns what `Target.score` promises (each mask's IoU) and never moves a mask."""

from __future__ import annotations

import copy

from m2sa_core.model import get_preset, ImageProcessor, M2SAModel
from m2sa_core.model.batch import make_batch, toy_example
from m2sa_core.model.losses import measured_iou
from m2sa_core.model.tokenizer import build_tiny_tokenizer
from m2sa_core.prompt import SEG_TOKEN
import numpy as np
import pytest
import torch


@pytest.fixture(scope="module")
def tokenizer():
    return build_tiny_tokenizer()


def _model(tokenizer, iou_weight: float) -> M2SAModel:
    cfg = get_preset("tiny")
    cfg.text_config["vocab_size"] = len(tokenizer)
    cfg.seg_token_id = tokenizer.convert_tokens_to_ids(SEG_TOKEN)
    cfg.iou_head_loss_weight = iou_weight
    torch.manual_seed(0)
    return M2SAModel.build(cfg).train()


def _batch(model, tokenizer) -> dict:
    ex = toy_example(0)
    batch = make_batch([ex], tokenizer, ImageProcessor(model.config), model.config)
    amodal = ex.masks.copy()
    amodal[0] |= np.roll(ex.masks[0], 4, axis=1)  # a complete shape larger than the visible one
    batch["gt_amodal_masks"] = [torch.from_numpy(amodal.astype(np.float32))]
    return batch


def test_measured_iou_thresholds_logits_and_soft_targets():
    logits = torch.full((3, 4, 4), -5.0)
    logits[0, :2] = 5.0  # 8 pixels predicted
    logits[1, :, :1] = 5.0  # 4 pixels predicted
    targets = torch.zeros(3, 4, 4)
    targets[0, :1] = 1.0  # 4 of the 8
    targets[1, :, :1] = 0.6  # over half covered: counts
    iou = measured_iou(logits, targets)
    assert iou.tolist() == pytest.approx([0.5, 1.0, 1.0])  # the third: both empty, perfect agreement
    assert not iou.requires_grad


def test_iou_term_is_the_squared_error_of_both_masks_scores(tokenizer):
    model = _model(tokenizer, iou_weight=1.0)
    batch = _batch(model, tokenizer)
    out = model(batch)
    visible = (out.pred_ious[0] - measured_iou(out.pred_masks[0], batch["gt_masks"][0])) ** 2
    amodal = (out.pred_amodal_ious[0] - measured_iou(out.pred_amodal_masks[0], batch["gt_amodal_masks"][0])) ** 2
    assert float(out.iou_loss.detach()) == pytest.approx(float(torch.cat([visible, amodal]).mean().detach()), rel=1e-5)
    out.loss.backward()
    head = model.sam.mask_decoder.iou_prediction_head
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in head.parameters())


def test_iou_term_leaves_every_other_gradient_unchanged(tokenizer):
    """The head reads the decoder's output detached: with or without the term, the masks train alike."""
    plain = _model(tokenizer, iou_weight=0.0)
    scored = copy.deepcopy(plain)
    scored.config.iou_head_loss_weight = 1.0
    batch = _batch(plain, tokenizer)
    out_plain, out_scored = plain(batch), scored(batch)
    assert float(out_plain.iou_loss.detach()) == 0.0 and float(out_scored.iou_loss.detach()) > 0
    assert torch.allclose(out_scored.loss - out_plain.loss, out_scored.iou_loss, atol=1e-5)
    out_plain.loss.backward()
    out_scored.loss.backward()
    head = "sam.mask_decoder.iou_prediction_head."
    grads_scored = dict(scored.named_parameters())
    compared = 0
    for name, p in plain.named_parameters():
        q = grads_scored[name]
        if name.startswith(head):
            assert p.grad is None or p.grad.abs().sum() == 0  # no term reaches the head without the weight
            continue
        if p.grad is None:
            assert q.grad is None, name
            continue
        assert torch.allclose(p.grad, q.grad, atol=1e-6), name
        compared += 1
    assert compared > 50


def test_few_steps_bring_the_scores_toward_the_masks_iou(tokenizer):
    """Only the head trains: its loss falls, so Target.score follows the measured IoU."""
    model = _model(tokenizer, iou_weight=1.0)
    batch = _batch(model, tokenizer)
    params = list(model.sam.mask_decoder.iou_prediction_head.parameters())
    for p in model.parameters():
        p.requires_grad_(False)
    for p in params:
        p.requires_grad_(True)
    opt = torch.optim.Adam(params, lr=1e-2)
    first = None
    for _ in range(30):
        out = model(batch)
        first = float(out.iou_loss.detach()) if first is None else first
        opt.zero_grad()
        out.iou_loss.backward()
        opt.step()
    assert float(model(batch).iou_loss.detach()) < 0.2 * first
