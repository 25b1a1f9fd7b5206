"""Mask losses of M2SA (LISA's formulation): sigmoid BCE and Dice, averaged per mask."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def sigmoid_bce_per_mask(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean binary cross-entropy over the pixels of each mask: [n, H, W] -> [n]."""
    loss = F.binary_cross_entropy_with_logits(logits.float(), targets.float(), reduction="none")
    return loss.flatten(1).mean(1)


def dice_per_mask(logits: torch.Tensor, targets: torch.Tensor, smooth: float = 1.0) -> torch.Tensor:
    """1 - soft Dice of each mask with additive smoothing: [n, H, W] -> [n].

    The smoothing keeps an empty ground truth predicted empty near zero loss instead of 0/0.
    The authors' dice (LISA's: sums divided by 1000, eps 1e-6 added) is exactly this with
    ``smooth=1e-3`` (``M2SAConfig.dice_smooth``, default for real checkpoints).
    """
    probs = logits.float().sigmoid().flatten(1)
    t = targets.float().flatten(1)
    inter = (probs * t).sum(1)
    return 1.0 - (2.0 * inter + smooth) / (probs.sum(1) + t.sum(1) + smooth)
