"""Turn built training samples into the model's batch contract (m2sa_core.model)."""

from __future__ import annotations

from typing import Sequence

import torch

from m2sa_core.prompt import IGNORE_INDEX
from m2sa_core.model.preprocess import ImageProcessor, collate_images


def collate(samples: Sequence, processor: ImageProcessor, pad_token_id: int) -> dict:
    """Right-pad token ids, stack preprocessed images and keep masks at original size."""
    if not samples:
        raise ValueError("collate: empty batch")
    images = collate_images([processor(s.image) for s in samples])
    length = max(len(s.input_ids) for s in samples)
    input_ids = torch.full((len(samples), length), pad_token_id, dtype=torch.long)
    labels = torch.full((len(samples), length), IGNORE_INDEX, dtype=torch.long)
    attention = torch.zeros((len(samples), length), dtype=torch.long)
    for i, s in enumerate(samples):
        n = len(s.input_ids)
        input_ids[i, :n] = torch.tensor(s.input_ids, dtype=torch.long)
        labels[i, :n] = torch.tensor(s.labels, dtype=torch.long)
        attention[i, :n] = 1
    batch = {
        **images,
        "input_ids": input_ids,
        "attention_mask": attention,
        "labels": labels,
        "gt_masks": [torch.from_numpy(s.masks) for s in samples],
        "sample_ids": [s.sample_id for s in samples],
        # "modal" | "amodal" where the command decides which mask it wants (R2SM), else None.
        "mask_types": [getattr(s, "mask_type", None) for s in samples],
    }
    if any(getattr(s, "amodal_masks", None) is not None for s in samples):
        batch["gt_amodal_masks"] = [None if s.amodal_masks is None else torch.from_numpy(s.amodal_masks)
                                    for s in samples]
    return batch
