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
SAM built from ``segment_anything.modeling`` (unmodified) plus M2SA's early fusion.

M2SA reads the output of the first global-attention block of SAM's ViT ("early
features", fine local detail) and adds two 3x3 convolutions of it to the final image
embedding. We capture that block's output with a forward hook so SAM's own forward
runs exactly as released.
"""

from __future__ import annotations

from functools import partial

from m2sa_core.model.config import M2SAConfig
from segment_anything.modeling import ImageEncoderViT, MaskDecoder, PromptEncoder, Sam, TwoWayTransformer
from segment_anything.modeling.common import LayerNorm2d
import torch
from torch import nn


def build_sam(config: M2SAConfig) -> Sam:
    """Return a ``segment_anything`` Sam with the shapes in ``config.sam`` (random weights)."""
    c = config.sam
    emb = c.embedding_size
    return Sam(
        image_encoder=ImageEncoderViT(
            depth=c.depth,
            embed_dim=c.embed_dim,
            img_size=c.image_size,
            mlp_ratio=c.mlp_ratio,
            norm_layer=partial(nn.LayerNorm, eps=1e-6),
            num_heads=c.num_heads,
            patch_size=c.patch_size,
            qkv_bias=True,
            use_rel_pos=c.use_rel_pos,
            global_attn_indexes=tuple(c.global_attn_indexes),
            window_size=c.window_size,
            out_chans=c.prompt_embed_dim,
        ),
        prompt_encoder=PromptEncoder(
            embed_dim=c.prompt_embed_dim,
            image_embedding_size=(emb, emb),
            input_image_size=(c.image_size, c.image_size),
            mask_in_chans=c.mask_in_chans,
        ),
        mask_decoder=MaskDecoder(
            num_multimask_outputs=c.num_multimask_outputs,
            transformer=TwoWayTransformer(
                depth=c.decoder_depth,
                embedding_dim=c.prompt_embed_dim,
                mlp_dim=c.decoder_mlp_dim,
                num_heads=c.decoder_num_heads,
            ),
            transformer_dim=c.prompt_embed_dim,
            iou_head_depth=c.iou_head_depth,
            iou_head_hidden_dim=c.iou_head_hidden_dim,
        ),
        pixel_mean=list(config.pixel_mean),
        pixel_std=list(config.pixel_std),
    )


def build_fusion(vit_dim: int, prompt_dim: int) -> nn.Sequential:
    """
    Early local feature fusion: Conv3x3 -> LayerNorm2d -> GELU -> Conv3x3.

    Child indices 0, 1, 3 match the authors' ``mask_decoder.compress_vit.{0,1,3}``.
    """
    return nn.Sequential(
        nn.Conv2d(vit_dim, prompt_dim, kernel_size=3, padding=1),
        LayerNorm2d(prompt_dim),
        nn.GELU(),
        nn.Conv2d(prompt_dim, prompt_dim, kernel_size=3, padding=1),
    )


def encode_with_early_features(
    encoder: ImageEncoderViT, images: torch.Tensor, early_index: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """
    Run SAM's image encoder; return (image embedding [B,P,h,w], early features [B,C,h,w]).

    The early features are the output of ``encoder.blocks[early_index]`` (channels-last
    inside SAM, returned channels-first).
    """
    if images.ndim != 4 or images.shape[1] != 3:
        raise ValueError(f"SAM images must be [B, 3, S, S], got {tuple(images.shape)}")
    if images.shape[-1] != encoder.img_size or images.shape[-2] != encoder.img_size:
        raise ValueError(
            f"SAM images must be {encoder.img_size}x{encoder.img_size} (resized and padded), "
            f"got {tuple(images.shape[-2:])}"
        )
    captured: list[torch.Tensor] = []
    handle = encoder.blocks[early_index].register_forward_hook(lambda _m, _i, out: captured.append(out))
    try:
        embedding = encoder(images)
    finally:
        handle.remove()
    return embedding, captured[-1].permute(0, 3, 1, 2)
