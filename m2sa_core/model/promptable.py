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
SAM's own training objective on the model's SAM: point and box prompts -> masks.

Staged training's first stage (docs/TRAINING.md) teaches the tiny SAM to segment the
world's objects and parts from prompts, as SAM is trained, before [SEG] embeddings
prompt it. The image encoder runs as released (no early fusion: that belongs to M2SA and
trains in the last stage, as the authors' does from a pretrained SAM); the prompt
encoder embeds the points and boxes; the mask decoder's first token is supervised with
the visible region and its second with the complete shape, the two tokens M2SA reads
(:data:`m2sa_core.model.m2sa.VISIBLE_MASK_TOKEN`, ``AMODAL_MASK_TOKEN``).
"""

from __future__ import annotations

from m2sa_core.model.losses import M2SALoss
from m2sa_core.model.m2sa import AMODAL_MASK_TOKEN, M2SAModel, M2SAOutput, VISIBLE_MASK_TOKEN
import torch
import torch.nn.functional as F

PROMPTED_BATCH_KEYS = ("sam_images", "resize_sizes", "original_sizes", "boxes", "points", "point_labels",
                       "gt_masks", "gt_amodal_masks", "sample_ids")


def prompted_mask_logits(model: M2SAModel, image_embedding: torch.Tensor, boxes: torch.Tensor | None,
                         points: torch.Tensor | None, point_labels: torch.Tensor | None,
                         upsampling: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """
    Return low-res (visible, complete) logits [n, 2, g, g] and IoU predictions [n, 2] for n prompts.

    The prompts are on one image embedding [1, P, h, w]; ``boxes`` [n, 4], ``points``
    [n, k, 2] in SAM's input frame. ``upsampling`` [1, 9, 4, 4h, 4w] holds the image's
    refiner weights, for a model that refines its masks (``g`` = 8h, else 4h).
    """
    dtype, device = image_embedding.dtype, image_embedding.device
    point_pair = None
    if points is not None:
        point_pair = (points.to(device, torch.float32), point_labels.to(device))
    box = None if boxes is None else boxes.to(device, torch.float32)
    sparse, dense = model.sam.prompt_encoder(points=point_pair, boxes=box, masks=None)
    low_res, iou = model.sam.mask_decoder.predict_masks(
        image_embeddings=image_embedding,
        image_pe=model.dense_positional_encoding().to(dtype),
        sparse_prompt_embeddings=sparse.to(dtype),
        dense_prompt_embeddings=dense.to(dtype),
    )
    keep = [VISIBLE_MASK_TOKEN, AMODAL_MASK_TOKEN]
    return model.refine_masks(low_res[:, keep], upsampling), iou[:, keep]


def low_res_targets(masks: torch.Tensor, resize_size, image_size: int, low_res_size) -> torch.Tensor:
    """
    Masks [n, H, W] at the original size -> soft targets [n, h, w] in the decoder's low-res frame.

    The frame is SAM's padded input (resized, padded bottom-right) at the decoder's
    resolution; each target pixel is the covered fraction of its cell (area averaging),
    so thin parts keep a soft presence instead of vanishing at 1/4 resolution.
    """
    rh, rw = resize_size
    resized = F.interpolate(masks[:, None].float(), size=(rh, rw), mode="bilinear", align_corners=False)
    padded = F.pad(resized, (0, image_size - rw, 0, image_size - rh))
    return F.adaptive_avg_pool2d(padded, tuple(low_res_size))[:, 0]


def promptable_forward(model: M2SAModel, batch: dict) -> M2SAOutput:
    """
    BCE + Dice of the prompted visible and complete masks (M2SA's mask loss weights, no text).

    ``batch`` comes from :func:`m2sa_core.model.batch.collate_prompted`. The answer CE is
    zero: nothing here reads or writes text. The losses are taken at the decoder's own
    resolution (:func:`low_res_targets`), as SAM is trained on its low-res masks: at
    image size the upsampling and the per-pixel losses of 8 regions x 2 masks cost 4x
    the image encoder on a CPU. Predictions are returned as low-res logits.
    """
    missing = [k for k in PROMPTED_BATCH_KEYS if k not in batch]
    if missing:
        raise KeyError(f"promptable_forward: batch lacks {missing}")
    embeddings, _ = model.encode_sam(batch["sam_images"])
    upsampling = model.encode_upsampling_weights(batch["sam_images"])
    losses = M2SALoss(model.config)
    pred_masks, pred_amodal, pred_ious = [], [], []
    for b, sample_id in enumerate(batch["sample_ids"]):
        low_res, iou = prompted_mask_logits(model, embeddings[b:b + 1], batch["boxes"][b], batch["points"][b],
                                            batch["point_labels"][b],
                                            None if upsampling is None else upsampling[b:b + 1])
        masks, amodal = low_res[:, VISIBLE_MASK_TOKEN], low_res[:, AMODAL_MASK_TOKEN]
        gt = batch["gt_masks"][b]
        if tuple(gt.shape[-2:]) != tuple(batch["original_sizes"][b]):
            raise ValueError(f"sample {sample_id}: gt masks are {tuple(gt.shape[-2:])}, the image "
                             f"{tuple(batch['original_sizes'][b])}")
        frame = (batch["resize_sizes"][b], model.config.sam.image_size, tuple(low_res.shape[-2:]))
        gt = low_res_targets(gt, *frame).to(masks.device)
        gt_amodal = low_res_targets(batch["gt_amodal_masks"][b], *frame).to(masks.device)
        losses.add_sample(sample_id, masks, amodal, masks.new_zeros((masks.shape[0], 2)), gt, gt_amodal, None, iou)
        pred_masks.append(masks)
        pred_amodal.append(amodal)
        pred_ious.append(iou[:, VISIBLE_MASK_TOKEN])
    parts = losses.total(embeddings.new_zeros((), dtype=torch.float32))
    return M2SAOutput(parts.loss, parts.ce, parts.bce, parts.dice, pred_masks, pred_ious, None, parts.num_masks,
                      amodal_bce_loss=parts.amodal_bce, amodal_dice_loss=parts.amodal_dice,
                      mask_type_loss=parts.mask_type, pred_amodal_masks=pred_amodal,
                      num_amodal_masks=parts.num_amodal_masks, iou_loss=parts.iou,
                      loss_terms=parts.terms, loss_counts=parts.counts)
