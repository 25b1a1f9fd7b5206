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
M2SA's losses (LISA's formulation).

Answer CE, sigmoid BCE and Dice averaged per mask, and their weighted sum with the
amodal, mask-type and IoU-head terms (:class:`M2SALoss`).
"""

from __future__ import annotations

from dataclasses import dataclass

from m2sa_core.prompt import IGNORE_INDEX
from m2sa_core.types import MaskType
import torch
import torch.nn.functional as F


def sigmoid_bce_per_mask(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean binary cross-entropy over the pixels of each mask: [n, H, W] -> [n]."""
    loss = F.binary_cross_entropy_with_logits(logits.float(), targets.float(), reduction="none")
    return loss.flatten(1).mean(1)


def dice_per_mask(logits: torch.Tensor, targets: torch.Tensor, smooth: float = 1.0) -> torch.Tensor:
    """
    1 - soft Dice of each mask with additive smoothing: [n, H, W] -> [n].

    The smoothing keeps an empty ground truth predicted empty near zero loss instead of 0/0.
    The authors' dice (LISA's: sums divided by 1000, eps 1e-6 added) is exactly this with
    ``smooth=1e-3`` (``M2SAConfig.dice_smooth``, default for real checkpoints).
    """
    probs = logits.float().sigmoid().flatten(1)
    t = targets.float().flatten(1)
    inter = (probs * t).sum(1)
    return 1.0 - (2.0 * inter + smooth) / (probs.sum(1) + t.sum(1) + smooth)


def exclusion_per_mask(logits: torch.Tensor, targets: torch.Tensor,
                       smooth: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """
    How much of the other targets' ground truth each mask claims.

    [n, H, W] -> [n], and which masks have other targets' pixels to claim at all ([n]
    bool).

    Mask ``i``'s share is its soft area on the pixels of the other targets of its answer
    that are not its own target's, over their area. BCE and Dice see a mask drawn on the
    same part of another instance (pan_3's bottom on pan_4's) as a few wrong pixels among
    many; this term says outright that two targets of one answer do not share visible
    pixels. A part inside its object loses nothing: the object's other pixels count against
    the part, the part's never against the object. On the tiny model it did not pay: stage 3
    already keeps instances apart on the scenes it trains on, and the misses are on unseen
    ones, so the configs leave it off.
    """
    probs = logits.float().sigmoid().flatten(1)
    own = targets.float().flatten(1)
    others = (own.sum(0, keepdim=True) - own).clamp(max=1.0) * (1.0 - own)
    area = others.sum(1)
    return (probs * others).sum(1) / (area + smooth), area > 0.5


def measured_iou(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """
    Return the IoU of each thresholded mask with its target, without gradient: [n, H, W] -> [n].

    What SAM's IoU head learns to predict. A soft target (a low-res cell's covered
    fraction) counts where it is over half covered; two empty masks agree perfectly, as in
    ``m2sa_core.evaluation.metrics.mask_iou``. Batched on the masks' device rather than that function
    (one mask, a host sync each), since it runs on every training step.
    """
    with torch.no_grad():
        pred = (logits > 0).flatten(1)
        gt = (targets.to(pred.device).float() > 0.5).flatten(1)
        inter = (pred & gt).sum(1).float()
        union = (pred | gt).sum(1).float()
        return torch.where(union > 0, inter / union.clamp(min=1), torch.ones_like(union))


def answer_ce(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """
    Teacher-forced cross-entropy of the answer tokens.

    Position t predicts label t+1; positions labelled ``IGNORE_INDEX`` (prompt,
    image, padding) are left out.
    """
    return F.cross_entropy(logits[:, :-1].float().flatten(0, 1), labels[:, 1:].flatten(),
                           ignore_index=IGNORE_INDEX)


def answer_token_count(labels: torch.Tensor) -> int:
    """How many tokens :func:`answer_ce` averages over: the labels it predicts, less the ignored."""
    return int((labels[:, 1:] != IGNORE_INDEX).sum())


@dataclass
class LossParts:
    """The weighted total and its parts; a part with no term in the batch is 0 and left out of the total."""

    loss: torch.Tensor
    ce: torch.Tensor
    bce: torch.Tensor
    dice: torch.Tensor
    amodal_bce: torch.Tensor
    amodal_dice: torch.Tensor
    mask_type: torch.Tensor
    num_masks: int
    num_amodal_masks: int
    iou: torch.Tensor  # SAM's IoU head against the masks' measured IoU (MSE); 0 when not trained
    exclusion: torch.Tensor | None = None  # other targets' pixels claimed (exclusion_per_mask); 0 when off
    # The total's terms, each weighted and 0 where left out ([8]: ce, bce, dice, amodal bce,
    # amodal dice, mask type, iou, exclusion; ``loss`` is their sum), and how many items (answer tokens,
    # masks) each term's mean is over: what data-parallel training needs to weight every
    # rank's terms by its share of the whole step's items (training.train).
    terms: torch.Tensor | None = None
    counts: torch.Tensor | None = None


class M2SALoss:
    """
    Assembles M2SA's loss from its terms.

    ``w_ce * CE + w_bce * BCE + w_dice * Dice`` on the visible masks, the same on the
    amodal masks where there is amodal ground truth, and the mask-type head's
    cross-entropy where a sample has a mask type.

    Feed it one sample at a time (:meth:`add_sample`), then :meth:`total` with the
    answer's CE. BCE and Dice average over every mask of the batch, not per sample.
    With ``config.iou_head_loss_weight`` > 0, SAM's IoU head learns each mask's measured
    IoU (SAM's own objective, an MSE) so that ``Target.score`` means something; the head
    reads the decoder's output detached (:class:`~m2sa_core.model.m2sa.M2SAModel`), so
    this term trains the score and never moves a mask.
    """

    def __init__(self, config) -> None:
        self.config = config
        self.bce_terms: list[torch.Tensor] = []
        self.dice_terms: list[torch.Tensor] = []
        self.amodal_bce_terms: list[torch.Tensor] = []
        self.amodal_dice_terms: list[torch.Tensor] = []
        self.type_terms: list[torch.Tensor] = []
        self.iou_terms: list[torch.Tensor] = []
        self.exclusion_terms: list[torch.Tensor] = []

    def add_sample(self, sample_id: str, masks: torch.Tensor, amodal: torch.Tensor,
                   type_logits: torch.Tensor, gt: torch.Tensor, gt_amodal: torch.Tensor | None,
                   mask_type: str | None, iou_pred: torch.Tensor | None = None) -> None:
        """
        One sample's terms: predicted visible / amodal mask logits [n, H, W] and mask-type logits [n, k].

        ``gt`` the masks the command asks for [n, H, W], ``gt_amodal`` the complete
        shapes or None, ``mask_type`` the asked kind or None, ``iou_pred`` SAM's
        predicted IoU of (visible, amodal) [n, 2] or None.
        """
        train_iou = iou_pred is not None and self.config.iou_head_loss_weight > 0
        smooth = self.config.dice_smooth
        # gt_masks hold the mask the command asks for: for an amodal command that is
        # the complete shape, which supervises the amodal output, never the visible one.
        asks_complete = mask_type == MaskType.AMODAL
        if not asks_complete:
            self.bce_terms.append(sigmoid_bce_per_mask(masks, gt))
            self.dice_terms.append(dice_per_mask(masks, gt, smooth))
            if train_iou:
                self.iou_terms.append((iou_pred[:, 0].float() - measured_iou(masks, gt)) ** 2)
            if self.config.exclusion_loss_weight > 0 and masks.shape[0] > 1:
                share, has_others = exclusion_per_mask(masks, gt)
                self.exclusion_terms.append((share[has_others] - self.config.exclusion_margin).clamp(min=0))
        gt_a = gt_amodal if gt_amodal is not None else (gt if asks_complete else None)
        if gt_a is not None:
            gt_a = gt_a.to(amodal.device)
            if tuple(gt_a.shape) != tuple(gt.shape):
                raise ValueError(
                    f"sample {sample_id}: gt_amodal_masks are {tuple(gt_a.shape)} but gt_masks are "
                    f"{tuple(gt.shape)}"
                )
            self.amodal_bce_terms.append(sigmoid_bce_per_mask(amodal, gt_a))
            self.amodal_dice_terms.append(dice_per_mask(amodal, gt_a, smooth))
            if train_iou:
                self.iou_terms.append((iou_pred[:, 1].float() - measured_iou(amodal, gt_a)) ** 2)
        if mask_type is not None:
            kind = MaskType(mask_type).index
            wanted = torch.full((type_logits.shape[0],), kind, dtype=torch.long, device=type_logits.device)
            self.type_terms.append(F.cross_entropy(type_logits.float(), wanted, reduction="none"))

    def total(self, ce_loss: torch.Tensor, ce_count: int = 0) -> LossParts:
        """
        Return the weighted total and its parts (skipped terms are left out of the sum, not added as zeros).

        ``ce_count`` is the number of answer tokens ``ce_loss`` averages.
        """
        cfg = self.config
        zero = ce_loss.new_zeros(())
        num_masks = sum(int(t.numel()) for t in self.bce_terms)
        bce_loss = torch.cat(self.bce_terms).mean() if self.bce_terms else zero
        dice_loss = torch.cat(self.dice_terms).mean() if self.dice_terms else zero
        num_amodal = sum(int(t.numel()) for t in self.amodal_bce_terms)
        amodal_bce_loss = torch.cat(self.amodal_bce_terms).mean() if num_amodal else zero
        amodal_dice_loss = torch.cat(self.amodal_dice_terms).mean() if num_amodal else zero
        mask_type_loss = torch.cat(self.type_terms).mean() if self.type_terms else zero
        iou_loss = torch.cat(self.iou_terms).mean() if self.iou_terms else zero
        w_abce, w_adice = cfg.amodal_loss_weights
        num_types = sum(int(t.numel()) for t in self.type_terms)
        num_ious = sum(int(t.numel()) for t in self.iou_terms)
        num_exclusions = sum(int(t.numel()) for t in self.exclusion_terms)
        exclusion_loss = torch.cat(self.exclusion_terms).mean() if num_exclusions else zero
        # A term with no items is the zero above, so its weighted term is 0 and adds nothing.
        values = torch.stack([ce_loss, bce_loss, dice_loss, amodal_bce_loss, amodal_dice_loss,
                              mask_type_loss, iou_loss, exclusion_loss]).float()
        weights = values.new_tensor([cfg.ce_loss_weight, cfg.bce_loss_weight, cfg.dice_loss_weight, w_abce,
                                     w_adice, cfg.mask_type_weight, cfg.iou_head_loss_weight,
                                     cfg.exclusion_loss_weight])
        terms = values * weights
        counts = torch.tensor([ce_count, num_masks, num_masks, num_amodal, num_amodal, num_types, num_ious,
                               num_exclusions],
                              dtype=torch.float64)
        return LossParts(terms.sum(), ce_loss, bce_loss, dice_loss, amodal_bce_loss, amodal_dice_loss,
                         mask_type_loss, num_masks, num_amodal, iou_loss, exclusion_loss, terms, counts)
