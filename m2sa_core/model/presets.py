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
Named model configurations. A preset is a shape, not weights.

``tiny`` is ours (CPU tests, the demo, the shipped checkpoint trained on the
synthetic world); ``7b`` and ``13b`` reproduce the shapes of the authors' M2SA-7B
(LLaVA-7B v1.1 + SAM ViT-H) and M2SA-13B (LLaVA-Llama2-13B + SAM ViT-H), so their
weights load into them and random-weight benchmarks measure the real cost.
"""

from __future__ import annotations

import copy

from m2sa_core.model.config import AUTHORS_DICE_SMOOTH, AUTHORS_SEG_REQUEST, M2SAConfig, SamConfig
from m2sa_core.model.m2sa import M2SAModel
from m2sa_core.model.tokenizer import add_special_tokens, build_tiny_tokenizer
import torch
from transformers import PreTrainedTokenizerBase

# Base vocabularies before [SEG] (and <im_start>/<im_end>) are appended.
LLAMA_BASE_VOCAB = 32000

_CLIP_VIT_L14 = {
    "hidden_size": 1024,
    "intermediate_size": 4096,
    "num_hidden_layers": 24,
    "num_attention_heads": 16,
    "image_size": 224,
    "patch_size": 14,
    "projection_dim": 768,
    "hidden_act": "quick_gelu",
    "layer_norm_eps": 1e-5,
}

_SAM_VIT_H = SamConfig()  # the defaults are ViT-H


def _llama(hidden: int, inter: int, layers: int, heads: int, max_pos: int, eps: float, vocab: int) -> dict:
    return {
        "hidden_size": hidden,
        "intermediate_size": inter,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": heads,
        "max_position_embeddings": max_pos,
        "rms_norm_eps": eps,
        "vocab_size": vocab,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "pad_token_id": 0,
    }


def tiny_config(vocab_size: int = 1024) -> M2SAConfig:
    """
    Return a few million parameters: one command runs in milliseconds on a CPU core.

    256-px SAM input (16x16 embedding, 64x64 low-res masks), a 4-block ViT whose
    blocks 1 and 3 are global (so early fusion reads block 1), 112-px CLIP with 64
    patch tokens and a 4-layer Llama of width 128. ``vocab_size`` is replaced by the
    tokenizer's length once [SEG] is added.
    """
    sam = SamConfig(
        image_size=256,
        patch_size=16,
        embed_dim=96,
        depth=4,
        num_heads=4,
        window_size=8,
        global_attn_indexes=[1, 3],
        prompt_embed_dim=64,
        mask_in_chans=16,
        decoder_depth=2,
        decoder_mlp_dim=256,
        decoder_num_heads=4,
        iou_head_hidden_dim=64,
    )
    vision = {
        "hidden_size": 96,
        "intermediate_size": 384,
        "num_hidden_layers": 3,
        "num_attention_heads": 4,
        "image_size": 112,
        "patch_size": 14,
        "projection_dim": 96,
        "hidden_act": "quick_gelu",
        "layer_norm_eps": 1e-5,
    }
    text = _llama(128, 352, 4, 4, 512, 1e-6, vocab_size)
    # Its own prompt and preprocessing (bare question, cv2 resizing, dice smoothing 1.0):
    # what the shipped m2sa-tiny-synth was trained with.
    return M2SAConfig(text_config=text, vision_config=vision, sam=sam, use_im_start_end=False, name="tiny",
                      resize_backend="cv2", seg_request="", question_templates="plain", dice_smooth=1.0)


def _llava_sam_h(text: dict, name: str) -> M2SAConfig:
    """
    CLIP ViT-L/14 + SAM ViT-H around Llama ``text``, with the authors' token layout.

    Both released M2SA sizes share everything but the LLM: LISA's training uses image
    start/end tokens, so [SEG] = 32000, <im_start> = 32001, <im_end> = 32002. Copies of
    the module-level CLIP/SAM configs, because callers may mutate the result. Prompt,
    preprocessing and dice smoothing are the authors' (docs/FIDELITY.md): the request
    appended to questions, CLIP's shortest-side resize and centre crop, PIL resizing.
    """
    return M2SAConfig(
        seg_request=AUTHORS_SEG_REQUEST,
        question_templates="authors",
        pad_clip_to_square=False,
        resize_backend="pil",
        text_config=text,
        vision_config=dict(_CLIP_VIT_L14),
        sam=copy.deepcopy(_SAM_VIT_H),
        use_im_start_end=True,
        seg_token_id=LLAMA_BASE_VOCAB,
        im_start_token_id=LLAMA_BASE_VOCAB + 1,
        im_end_token_id=LLAMA_BASE_VOCAB + 2,
        name=name,
    )


def m2sa_7b_config() -> M2SAConfig:
    """
    LLaVA-7B v1.1 (Vicuna-7B v1.1 + CLIP ViT-L/14-224) + SAM ViT-H, as in M2SA-7B.

    The authors' training (LISA's) uses image start/end tokens, so the vocabulary is
    32000 + [SEG] + <im_start> + <im_end> = 32003 with [SEG] = 32000.
    """
    text = _llama(4096, 11008, 32, 32, 2048, 1e-6, LLAMA_BASE_VOCAB + 3)
    return _llava_sam_h(text, "7b")


def m2sa_13b_config() -> M2SAConfig:
    """LLaVA-Llama2-13B (chat, CLIP ViT-L/14-224) + SAM ViT-H, as in M2SA-13B."""
    text = _llama(5120, 13824, 40, 40, 4096, 1e-5, LLAMA_BASE_VOCAB + 3)
    return _llava_sam_h(text, "13b")


def tiny_authors_config(vocab_size: int = 1024) -> M2SAConfig:
    """
    Return the tiny shapes with the authors' conventions of the real presets.

    The conventions: image start/end tokens, segmentation request, CLIP crop, PIL resizing.
    It tests the import paths end to end on CPU.
    """
    config = tiny_config(vocab_size)
    config.use_im_start_end = True
    config.seg_request = AUTHORS_SEG_REQUEST
    config.question_templates = "authors"
    config.pad_clip_to_square = False
    config.resize_backend = "pil"
    config.dice_smooth = AUTHORS_DICE_SMOOTH
    config.name = "tiny-authors"
    return config


PRESETS = {"tiny": tiny_config, "tiny-authors": tiny_authors_config, "7b": m2sa_7b_config, "13b": m2sa_13b_config}


def get_preset(name: str) -> M2SAConfig:
    """Return a fresh config for preset ``name`` (callers may mutate it)."""
    try:
        factory = PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown preset {name!r}; choose from {sorted(PRESETS)}") from None
    return factory()


def attach_tokenizer(config: M2SAConfig, tokenizer: PreTrainedTokenizerBase, min_vocab_size: int = 0) -> None:
    """
    Give ``tokenizer`` [SEG] (and the image start/end tokens) and record their ids in ``config``.

    The one place a config learns its tokenizer's special ids: presets, checkpoint
    imports and training all come through here. The text embedding gets a row per
    token, at least ``min_vocab_size`` (a random-weight 7b/13b keeps its real size).
    """
    ids = add_special_tokens(tokenizer, config.use_im_start_end)
    config.seg_token_id = ids["seg_token_id"]
    config.im_start_token_id = ids["im_start_token_id"]
    config.im_end_token_id = ids["im_end_token_id"]
    config.text_config["vocab_size"] = max(len(tokenizer), min_vocab_size)


def build_preset(name: str, device: str | torch.device = "cpu", dtype: torch.dtype | None = None, seed: int = 0,
                 ) -> tuple[M2SAModel, PreTrainedTokenizerBase]:
    """
    (model with random weights, tokenizer) of preset ``name``, for tests and benchmarks.

    ``tiny`` gets a tokenizer trained on a small built-in corpus; the others a byte-level
    placeholder whose ids fit the preset (their text is noise anyway: real checkpoints
    bring their own tokenizer). Weights are drawn from ``seed`` without touching the
    caller's random state.
    """
    device = torch.device(device)
    config = get_preset(name)
    tokenizer = build_tiny_tokenizer(use_im_start_end=config.use_im_start_end)
    if name != "tiny" and len(tokenizer) > config.vocab_size:
        raise ValueError(f"placeholder tokenizer ({len(tokenizer)}) larger than the preset vocabulary "
                         f"({config.vocab_size})")
    attach_tokenizer(config, tokenizer, min_vocab_size=config.vocab_size)
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(seed)
        model = M2SAModel.build(config, device=device, dtype=dtype)
    return model, tokenizer
