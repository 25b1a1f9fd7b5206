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

"""Amodal masks and mask-type intent in the model: decoder outputs, losses, training, checkpoints."""

from __future__ import annotations

from m2sa_core.model import get_preset, ImageProcessor, M2SAModel
from m2sa_core.model.batch import make_batch, toy_example
from m2sa_core.model.checkpoint import from_pretrained, save_pretrained
from m2sa_core.model.tokenizer import build_tiny_tokenizer
from m2sa_core.model.trainable import apply_trainable_policy
from m2sa_core.prompt import SEG_TOKEN
from m2sa_core.types import mask_bbox
import numpy as np
import pytest
import torch
from toy_batches import fit_batch


@pytest.fixture(scope="module")
def tokenizer():
    return build_tiny_tokenizer()


def _model(tokenizer, seed: int = 0) -> M2SAModel:
    cfg = get_preset("tiny")
    cfg.text_config["vocab_size"] = len(tokenizer)
    cfg.seg_token_id = tokenizer.convert_tokens_to_ids(SEG_TOKEN)
    torch.manual_seed(seed)
    return M2SAModel.build(cfg).eval()


@pytest.fixture(scope="module")
def model(tokenizer):
    return _model(tokenizer)


def _amodal_of(masks: np.ndarray) -> np.ndarray:
    """Complete shapes for the toy scene: the red box continues under the blue one."""
    out = masks.copy()
    _, w = masks.shape[1:]
    x, y, bw, bh = mask_bbox(masks[0])
    out[0, y:y + bh, x:w // 2 + w // 8] = True  # reaches into the blue box
    return out


def _batch(model, tokenizer, amodal: bool = False, mask_type: str | None = None) -> dict:
    ex = toy_example(0)
    batch = make_batch([ex], tokenizer, ImageProcessor(model.config), model.config)
    if amodal:
        batch["gt_amodal_masks"] = [torch.from_numpy(_amodal_of(ex.masks).astype(np.float32))]
    if mask_type is not None:
        batch["mask_types"] = [mask_type]
    return batch


def test_toy_scene_has_an_occluded_target():
    ex = toy_example(0)
    amodal = _amodal_of(ex.masks)
    assert (amodal[0] & ex.masks[1]).any()  # the hidden part lies under the other target
    assert (amodal[0] >= ex.masks[0]).all() and (amodal[1] == ex.masks[1]).all()


def test_visible_mask_is_exactly_sams_single_mask_output(model):
    """Token 0 of predict_masks is what multimask_output=False returns: authors' checkpoints keep their meaning."""
    torch.manual_seed(1)
    fused, states = torch.randn(1, 64, 16, 16), torch.randn(3, 128)
    with torch.no_grad():
        pair, pair_iou = model.decode_mask_pair(fused, states)
        visible, iou = model.decode_masks(fused, states)
        prompts = model.seg_projector(states)
        _, dense = model.sam.prompt_encoder(points=None, boxes=None, masks=None)
        reference, ref_iou = model.sam.mask_decoder(
            image_embeddings=fused, image_pe=model.dense_positional_encoding(),
            sparse_prompt_embeddings=prompts[:, None, :], dense_prompt_embeddings=dense, multimask_output=False)
    assert pair.shape == (3, 2, 64, 64) and pair_iou.shape == (3, 2)
    assert torch.equal(visible, reference) and torch.equal(iou, ref_iou[:, 0])
    assert torch.equal(pair[:, :1], reference)
    assert not torch.equal(pair[:, 1], pair[:, 0])  # the amodal token is a different output


def test_forward_returns_both_masks_and_mask_type_logits(model, tokenizer):
    with torch.no_grad():
        out = model(_batch(model, tokenizer, amodal=True, mask_type="amodal"))
    assert [tuple(m.shape) for m in out.pred_masks] == [(2, 96, 128)]
    assert [tuple(m.shape) for m in out.pred_amodal_masks] == [(2, 96, 128)]
    assert [tuple(t.shape) for t in out.pred_mask_types] == [(2, 2)]
    assert out.num_amodal_masks == 2
    for value in (out.amodal_bce_loss, out.amodal_dice_loss, out.mask_type_loss):
        assert value.ndim == 0 and torch.isfinite(value) and value > 0


def test_amodal_and_mask_type_losses_are_skipped_without_ground_truth(model, tokenizer):
    with torch.no_grad():
        plain = model(_batch(model, tokenizer))
        nones = _batch(model, tokenizer)
        nones.update(gt_amodal_masks=[None], mask_types=[None])
        skipped = model(nones)
        full = model(_batch(model, tokenizer, amodal=True, mask_type="modal"))
    assert torch.equal(skipped.loss, plain.loss)
    assert skipped.amodal_bce_loss == 0 and skipped.amodal_dice_loss == 0 and skipped.mask_type_loss == 0
    cfg = model.config
    w_bce, w_dice = cfg.amodal_loss_weights
    assert (w_bce, w_dice, cfg.mask_type_weight) == (cfg.bce_loss_weight, cfg.dice_loss_weight, 1.0)
    extra = w_bce * full.amodal_bce_loss + w_dice * full.amodal_dice_loss + cfg.mask_type_weight * full.mask_type_loss
    assert torch.allclose(full.loss, plain.loss + extra, atol=1e-5)


def test_bad_optional_targets_are_named(model, tokenizer):
    batch = _batch(model, tokenizer, mask_type="complete")
    with pytest.raises(ValueError, match=r"toy-0.*mask_types"):
        model(batch)
    batch = _batch(model, tokenizer)
    batch["gt_amodal_masks"] = [torch.zeros(1, 96, 128)]
    with pytest.raises(ValueError, match=r"toy-0.*gt_amodal_masks"):
        model(batch)


@pytest.mark.slow
def test_training_drives_amodal_and_mask_type_losses_down(tokenizer):
    model = apply_trainable_policy(_model(tokenizer), "from_scratch")
    batch = _batch(model, tokenizer, amodal=True, mask_type="amodal")
    with torch.no_grad():
        before = model(batch)
    fit_batch(model, batch, steps=30, lr=2e-3)
    with torch.no_grad():
        after = model(batch)
    assert after.amodal_dice_loss < 0.75 * before.amodal_dice_loss
    assert after.amodal_bce_loss < 0.6 * before.amodal_bce_loss
    assert after.mask_type_loss < 0.2 * before.mask_type_loss
    assert (after.pred_mask_types[0].argmax(-1) == 1).all()


def test_save_and_load_keep_the_mask_type_head(tmp_path, tokenizer):
    model = _model(tokenizer)
    with torch.no_grad():
        model.mask_type_head.weight.normal_()
        model.mask_type_head.bias.copy_(torch.tensor([0.5, -0.25]))
    save_pretrained(model, tokenizer, tmp_path / "ckpt")
    loaded, _ = from_pretrained(tmp_path / "ckpt")
    assert torch.equal(loaded.mask_type_head.weight, model.mask_type_head.weight)
    assert torch.equal(loaded.mask_type_head.bias, model.mask_type_head.bias)


def test_checkpoint_saved_before_the_head_loads_and_reads_modal(tmp_path, tokenizer):
    from safetensors.torch import load_file, save_file

    model = _model(tokenizer)
    directory = save_pretrained(model, tokenizer, tmp_path / "old")
    state = load_file(str(directory / "model.safetensors"))
    save_file({k: v for k, v in state.items() if not k.startswith("mask_type_head.")},
              str(directory / "model.safetensors"))
    loaded, _ = from_pretrained(directory)
    logits = loaded.mask_type_logits(torch.randn(4, loaded.config.hidden_size))
    assert (logits.argmax(-1) == 0).all()  # ties resolve to "modal": behaves as before the head existed


def test_command_asking_for_the_complete_shape_trains_the_amodal_output_only(model, tokenizer):
    """Its gt_masks are the complete shapes (the mask the command asks for), not visible masks."""
    with torch.no_grad():
        out = model(_batch(model, tokenizer, mask_type="amodal"))
        plain = model(_batch(model, tokenizer))
    assert out.num_masks == 0 and out.bce_loss == 0 and out.dice_loss == 0
    assert out.num_amodal_masks == 2
    # The complete shapes in gt_masks are scored on the amodal output.
    gt = _batch(model, tokenizer)["gt_masks"][0]
    from m2sa_core.model.losses import dice_per_mask

    assert torch.allclose(out.amodal_dice_loss, dice_per_mask(out.pred_amodal_masks[0], gt).mean())
    assert torch.equal(out.pred_masks[0], plain.pred_masks[0])


def test_training_batches_with_and_without_amodal_masks_reach_the_model(model, tokenizer):
    """A batch mixing samples with and without amodal masks moves to the device and trains on what it has."""
    from training.train import _to_device

    two = make_batch([toy_example(0), toy_example(1)], tokenizer, ImageProcessor(model.config), model.config)
    two["gt_amodal_masks"] = [None, torch.from_numpy(_amodal_of(toy_example(1).masks).astype(np.float32))]
    two["mask_types"] = [None, "modal"]
    moved = _to_device(two, torch.device("cpu"))
    assert moved["gt_amodal_masks"][0] is None and moved["mask_types"] == [None, "modal"]
    with torch.no_grad():
        out = model(moved)
    assert out.num_amodal_masks == 2 and out.num_masks == 4 and out.mask_type_loss > 0


def test_loss_terms_sum_to_the_loss_and_count_what_each_averages(model, tokenizer):
    """
    Data-parallel training weighs each rank's terms by these counts (training.train.step_loss).

    A wrong count would train another loss than one process on the whole batch.
    """
    batch = _batch(model, tokenizer, amodal=True, mask_type="modal")
    with torch.no_grad():
        out = model(batch)
    torch.testing.assert_close(out.loss_terms.sum(), out.loss)
    cfg = model.config
    ce, bce, dice, a_bce, a_dice, kind, _, exclusion = out.loss_terms
    torch.testing.assert_close(ce, cfg.ce_loss_weight * out.ce_loss)
    torch.testing.assert_close(bce, cfg.bce_loss_weight * out.bce_loss)
    torch.testing.assert_close(a_dice, cfg.amodal_loss_weights[1] * out.amodal_dice_loss)
    assert float(exclusion) == 0.0 and out.loss_counts[7] == 0  # off by default, as the authors train
    answer_tokens = int((batch["labels"][:, 1:] != -100).sum())
    assert answer_tokens > 0
    # two targets, each with a complete shape and a type
    assert out.loss_counts.tolist()[:6] == [answer_tokens, 2, 2, 2, 2, 2]


def test_exclusion_term_counts_each_mask_that_could_claim_another_targets_pixels(model, tokenizer):
    batch = _batch(model, tokenizer)
    model.config.exclusion_loss_weight = 0.5
    try:
        with torch.no_grad():
            out = model(batch)
    finally:
        model.config.exclusion_loss_weight = 0.0
    assert out.loss_counts[7] == 2  # the toy scene's two targets are disjoint
    assert 0 < float(out.exclusion_loss) < 1
    torch.testing.assert_close(out.loss_terms[7], 0.5 * out.exclusion_loss)
    torch.testing.assert_close(out.loss_terms.sum(), out.loss)


def test_exclusion_margin_counts_only_the_share_beyond_it(model, tokenizer):
    """
    A boundary's spill onto a neighbour stays under the margin.

    A mask drawn on another target goes past it and counts only by how far.
    """
    from m2sa_core.model.losses import exclusion_per_mask

    batch = _batch(model, tokenizer)
    model.config.exclusion_loss_weight = 1.0
    try:
        with torch.no_grad():
            plain = model(batch)
            share, _ = exclusion_per_mask(plain.pred_masks[0], batch["gt_masks"][0])
            model.config.exclusion_margin = float(share.min())
            margined = model(batch)
            model.config.exclusion_margin = 0.99
            above_all = model(batch)
    finally:
        model.config.exclusion_loss_weight, model.config.exclusion_margin = 0.0, 0.0
    torch.testing.assert_close(plain.exclusion_loss, share.mean())
    torch.testing.assert_close(margined.exclusion_loss, (share - share.min()).mean())
    assert float(above_all.exclusion_loss) == 0.0 and above_all.loss_counts[7] == 2


def test_exclusion_share_is_the_other_targets_pixels_a_mask_claims():
    """
    pan_3's bottom drawn on pan_4's is what the term is for.

    A part inside its object costs the object nothing, and a lone target has nothing
    to claim.
    """
    from m2sa_core.model.losses import exclusion_per_mask

    left, right, whole = torch.zeros(3, 8, 8), torch.zeros(8, 8), torch.zeros(8, 8)
    left[0, :, :4] = 1  # target 0: the left half
    left[1, :, 4:] = 1  # target 1: the right half
    right[:, 4:] = 1
    logit = lambda m: (m * 2 - 1) * 20.0  # noqa: E731 - a confident mask
    own_drawn = torch.stack([logit(left[0]), logit(left[1])])
    swapped = torch.stack([logit(right), logit(left[0])])
    share, has = exclusion_per_mask(own_drawn, left[:2], smooth=1e-3)
    assert has.tolist() == [True, True] and share.max() < 1e-3
    share, _ = exclusion_per_mask(swapped, left[:2], smooth=1e-3)
    assert share.min() > 0.99
    obj, part = torch.ones(8, 8), torch.zeros(8, 8)
    part[2:4, 2:4] = 1
    share, has = exclusion_per_mask(torch.stack([logit(obj), logit(obj)]), torch.stack([obj, part]), smooth=1e-3)
    assert has.tolist() == [False, True]  # the object has no pixels of others that are not its own
    assert share[1] > 0.99  # the part's mask spilling over its whole object claims the object's other pixels
    _, has = exclusion_per_mask(logit(whole)[None], whole[None])
    assert has.tolist() == [False]
