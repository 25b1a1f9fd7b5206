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

"""M2SA model at tiny scale: config, tokenizer, preprocessing, shapes, early features, losses."""

from __future__ import annotations

import json

from m2sa_core.model import get_preset, ImageProcessor, M2SAConfig, M2SAModel
from m2sa_core.model.batch import make_batch, toy_example
from m2sa_core.model.sam import encode_with_early_features
from m2sa_core.model.tokenizer import build_tiny_tokenizer, train_tokenizer
from m2sa_core.prompt import (
    build_conversation,
    IMAGE_PLACEHOLDER_ID,
    SEG_TOKEN,
    tokenize_conversation,
)
import numpy as np
import pytest
import torch


@pytest.fixture(scope="module")
def tokenizer():
    return build_tiny_tokenizer()


@pytest.fixture(scope="module")
def config(tokenizer):
    cfg = get_preset("tiny")
    cfg.text_config["vocab_size"] = len(tokenizer)
    cfg.seg_token_id = tokenizer.convert_tokens_to_ids(SEG_TOKEN)
    return cfg


@pytest.fixture(scope="module")
def model(config):
    torch.manual_seed(0)
    return M2SAModel.build(config).eval()


# -- config and presets --------------------------------------------------------------------
def test_config_json_round_trip(tmp_path, config):
    config.save(tmp_path)
    loaded = M2SAConfig.load(tmp_path)
    assert loaded.to_dict() == config.to_dict()
    assert json.loads((tmp_path / "config.json").read_text())["sam"]["global_attn_indexes"] == [1, 3]


def test_unknown_config_field_is_an_error(tmp_path, config):
    data = config.to_dict() | {"not_a_field": 1}
    (tmp_path / "config.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match="not_a_field"):
        M2SAConfig.load(tmp_path)


def test_early_layer_defaults_to_first_global_block():
    assert get_preset("tiny").early_layer_index == 1
    assert get_preset("7b").early_layer_index == 7
    cfg = get_preset("tiny")
    cfg.early_layer_index = 9
    with pytest.raises(ValueError, match="early_layer_index"):
        cfg.validate()


def test_large_presets_match_the_authors_models():
    for name, hidden, layers in (("7b", 4096, 32), ("13b", 5120, 40)):
        cfg = get_preset(name)
        assert cfg.hidden_size == hidden and cfg.text_config["num_hidden_layers"] == layers
        assert (cfg.seg_token_id, cfg.vocab_size, cfg.use_im_start_end) == (32000, 32003, True)
        assert (cfg.sam.embed_dim, cfg.sam.depth, cfg.sam.global_attn_indexes) == (1280, 32, [7, 15, 23, 31])
        assert cfg.num_image_tokens == 256 and cfg.vision_feature_layer == -2
        cfg.validate()


def test_loss_weight_presets():
    cfg = get_preset("tiny")
    assert (cfg.ce_loss_weight, cfg.bce_loss_weight, cfg.dice_loss_weight) == (1.0, 2.0, 0.5)
    cfg.set_loss_weights("paper")
    assert (cfg.ce_loss_weight, cfg.bce_loss_weight, cfg.dice_loss_weight, cfg.loss_weights) == (
        1.0, 0.5, 2.0, "paper",
    )
    with pytest.raises(ValueError, match="unknown loss weight preset"):
        cfg.set_loss_weights("mine")


def test_tiny_preset_is_small(model):
    n = sum(p.numel() for p in model.parameters())
    assert n * 4 <= 20 * 2**20, f"{n} parameters exceed the 20 MB fp32 budget of the shipped checkpoint"


# -- tokenizer -------------------------------------------------------------------------------
def test_tokenizer_seg_is_one_token_and_eos_closes_the_answer(tokenizer):
    seg = tokenizer.convert_tokens_to_ids(SEG_TOKEN)
    assert seg == len(tokenizer) - 1  # appended after the base vocabulary
    prompt, answer = build_conversation("turn on the TV", "Press the remote_control_1's button [SEG].")
    ids, labels = tokenize_conversation(tokenizer, prompt, answer)
    assert ids[0] == tokenizer.bos_token_id and ids.count(IMAGE_PLACEHOLDER_ID) == 1
    assert ids.count(seg) == 1 and labels.count(seg) == 1
    assert ids[-1] == tokenizer.eos_token_id and labels[-1] == tokenizer.eos_token_id
    text = tokenizer.decode([i for i in labels if i >= 0], skip_special_tokens=True)
    assert text == " Press the remote_control_1's button [SEG]."


def test_train_tokenizer_rejects_empty_corpus():
    with pytest.raises(ValueError, match="empty"):
        train_tokenizer(["", ""], vocab_size=400)


# -- preprocessing ---------------------------------------------------------------------------
def test_image_processor_shapes_and_padding(config):
    proc = ImageProcessor(config)
    image = np.full((60, 120, 3), 200, dtype=np.uint8)
    out = proc(image)
    assert out["sam_image"].shape == (3, 256, 256)
    assert out["clip_image"].shape == (3, 112, 112)
    assert out["resize_size"] == (128, 256) and out["original_size"] == (60, 120)
    assert torch.all(out["sam_image"][:, 128:] == 0)  # padded bottom, after normalisation
    expected = (200 - np.asarray(config.pixel_mean)) / np.asarray(config.pixel_std)
    assert np.allclose(out["sam_image"][:, :128].mean((1, 2)).numpy(), expected, atol=1e-4)


@pytest.mark.parametrize(
    "bad, message",
    [
        (np.zeros((10, 10, 3), dtype=np.float32), "uint8"),
        (np.zeros((10, 10), dtype=np.uint8), "H x W x 3"),
        (np.zeros((10, 10, 4), dtype=np.uint8), "H x W x 3"),
        (np.zeros((0, 10, 3), dtype=np.uint8), "empty"),
        ([[1, 2, 3]], "numpy array"),
    ],
)
def test_image_processor_rejects_bad_images(config, bad, message):
    with pytest.raises((ValueError, TypeError), match=message):
        ImageProcessor(config)(bad)


# -- model -----------------------------------------------------------------------------------
def test_early_features_come_from_the_first_global_block(model, config):
    images = torch.randn(2, 3, 256, 256)
    enc = model.sam.image_encoder
    with torch.no_grad():
        emb, early = encode_with_early_features(enc, images, config.early_layer_index)
        x = enc.patch_embed(images) + enc.pos_embed
        for blk in enc.blocks[: config.early_layer_index + 1]:
            x = blk(x)
        ref_emb = enc(images)
    assert early.shape == (2, 96, 16, 16) and emb.shape == (2, 64, 16, 16)
    assert enc.blocks[config.early_layer_index].window_size == 0  # a global-attention block
    torch.testing.assert_close(early, x.permute(0, 3, 1, 2))
    torch.testing.assert_close(emb, ref_emb)


def test_fusion_and_phi_keep_the_authors_child_indices(model):
    keys = set(model.state_dict())
    for k in ("fusion.0.weight", "fusion.1.weight", "fusion.1.bias", "fusion.3.weight",
              "seg_projector.0.weight", "seg_projector.2.weight"):
        assert k in keys
    assert model.fusion[0].in_channels == 96 and model.fusion[3].out_channels == 64
    assert isinstance(model.seg_projector[3], torch.nn.Dropout) and model.seg_projector[3].p == 0.0


def test_forward_shapes_and_losses(model, tokenizer, config):
    proc = ImageProcessor(config)
    one, two = toy_example(0), toy_example(1, size=(80, 64))
    two.answer, two.masks = "It is mug_1 [SEG].", two.masks[:1]
    batch = make_batch([one, two], tokenizer, proc, config)
    out = model(batch)
    assert [tuple(m.shape) for m in out.pred_masks] == [(2, 96, 128), (1, 80, 64)]
    assert [tuple(i.shape) for i in out.pred_ious] == [(2,), (1,)]
    assert out.num_masks == 3
    n_img = config.num_image_tokens
    assert out.logits.shape == (2, batch["input_ids"].shape[1] + n_img - 1, config.vocab_size)
    for value in (out.loss, out.ce_loss, out.bce_loss, out.dice_loss):
        assert torch.isfinite(value) and value.ndim == 0
    expected = 1.0 * out.ce_loss + 2.0 * out.bce_loss + 0.5 * out.dice_loss
    torch.testing.assert_close(out.loss, expected)


def test_seg_count_mismatch_names_the_sample(model, tokenizer, config):
    example = toy_example(0)
    example.masks = example.masks[:1]
    batch = make_batch([example], tokenizer, ImageProcessor(config), config)
    with pytest.raises(ValueError, match="toy-0: 2 \\[SEG\\] tokens .* but 1 ground-truth masks"):
        model(batch)


def test_missing_image_placeholder_is_an_error(model, tokenizer, config):
    batch = make_batch([toy_example(0)], tokenizer, ImageProcessor(config), config)
    batch["input_ids"][batch["input_ids"] == IMAGE_PLACEHOLDER_ID] = tokenizer.unk_token_id
    with pytest.raises(ValueError, match="toy-0: input_ids must hold exactly one image placeholder"):
        model(batch)


def test_mask_embedding_is_the_state_that_predicts_seg(model, config):
    seg = config.seg_token_id
    labels = torch.tensor([[-100, -100, 5, 6, seg, 7, seg, 2]])
    pos = model.seg_hidden_positions(labels)
    assert pos[0].nonzero().flatten().tolist() == [3, 5]


def test_masks_are_upscaled_to_the_original_size(model):
    fused = torch.randn(1, 64, 16, 16)
    with torch.no_grad():
        low, iou = model.decode_masks(fused, torch.randn(3, 128))
        full = model.upscale_masks(low, (128, 256), (60, 120))
    assert low.shape == (3, 1, 64, 64) and iou.shape == (3,)
    assert full.shape == (3, 60, 120)


def test_7b_preset_builds_with_the_authors_shapes():
    """Shapes only (meta device, no memory): what an authors' M2SA-7B checkpoint must fit."""
    model = M2SAModel.build(get_preset("7b"), device="meta", dtype=torch.bfloat16)
    shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    assert shapes["fusion.0.weight"] == (256, 1280, 3, 3) and shapes["fusion.3.weight"] == (256, 256, 3, 3)
    assert shapes["seg_projector.0.weight"] == (4096, 4096) and shapes["seg_projector.2.weight"] == (256, 4096)
    assert shapes["mm_projector.weight"] == (4096, 1024)
    assert shapes["llm.model.embed_tokens.weight"] == (32003, 4096) == shapes["llm.lm_head.weight"]
    assert shapes["sam.image_encoder.blocks.7.attn.rel_pos_h"] == (127, 80)  # global block: 2*64-1 positions
    llm_params = sum(p.numel() for p in model.llm.parameters())
    assert 6.7e9 < llm_params < 6.8e9
