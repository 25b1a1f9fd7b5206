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
The model's training batch contract: the one collate, and a small reference batch builder.

:func:`collate` turns built training samples (``m2sa_core.data.builder.TrainingSample``)
into the batch dict of ``M2SAModel.forward``; training and evaluation use it.
:func:`make_batch` does the same from (image, command, answer, masks) examples, for the
model's own tests, the benchmarks and quick experiments without the data layer, and
:func:`toy_example` is a scene to feed it. Both pad token ids through :func:`pad_tokens`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from m2sa_core.model.config import M2SAConfig
from m2sa_core.model.preprocess import collate_images, ImageProcessor
from m2sa_core.prompt import build_conversation, IGNORE_INDEX, tokenize_conversation
import numpy as np
import torch


@dataclass
class Example:
    """One supervised sample: an RGB image, a command, an answer with [SEG] markers, masks."""

    sample_id: str
    image: np.ndarray  # H x W x 3 uint8
    command: str
    answer: str  # "... mug_1 [SEG] ..."
    masks: np.ndarray  # [n, H, W] bool, one per [SEG] in order


def pad_tokens(ids: Sequence[Sequence[int]], labels: Sequence[Sequence[int]], pad_token_id: int
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """
    Right-pad token rows: (input_ids, labels, attention_mask), each long [B, L].

    Padding is ``pad_token_id`` in the ids, IGNORE_INDEX in the labels and 0 in the mask.
    """
    length = max(len(i) for i in ids)
    input_ids = torch.full((len(ids), length), pad_token_id, dtype=torch.long)
    padded = torch.full((len(ids), length), IGNORE_INDEX, dtype=torch.long)
    attention = torch.zeros((len(ids), length), dtype=torch.long)
    for b, (i, lab) in enumerate(zip(ids, labels)):
        input_ids[b, : len(i)] = torch.tensor(i, dtype=torch.long)
        padded[b, : len(lab)] = torch.tensor(lab, dtype=torch.long)
        attention[b, : len(i)] = 1
    return input_ids, padded, attention


def collate(samples: Sequence, processor: ImageProcessor, pad_token_id: int) -> dict:
    """Training samples -> the batch dict: right-padded ids, stacked images, masks at original size."""
    if not samples:
        raise ValueError("collate: empty batch")
    images = collate_images([processor(s.image) for s in samples])
    input_ids, labels, attention = pad_tokens([s.input_ids for s in samples], [s.labels for s in samples],
                                              pad_token_id)
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


def make_batch(
    examples: Sequence[Example], tokenizer, processor: ImageProcessor, config: M2SAConfig
) -> dict:
    """Tokenize, right-pad and stack ``examples`` into the batch dict of ``M2SAModel.forward``."""
    images = [processor(ex.image) for ex in examples]
    ids, labs = [], []
    for ex in examples:
        prompt, answer = build_conversation(ex.command, ex.answer, config.use_im_start_end)
        i, lab = tokenize_conversation(tokenizer, prompt, answer)
        ids.append(i)
        labs.append(lab)
    input_ids, labels, attention = pad_tokens(ids, labs, tokenizer.pad_token_id)
    batch = collate_images(images)
    batch.update(
        input_ids=input_ids,
        attention_mask=attention,
        labels=labels,
        gt_masks=[torch.from_numpy(np.asarray(ex.masks, dtype=np.float32)) for ex in examples],
        sample_ids=[ex.sample_id for ex in examples],
    )
    return batch


def toy_example(seed: int = 0, size: tuple[int, int] = (96, 128)) -> Example:
    """
    Return a scene of coloured rectangles on a grey table with a two-target answer.

    Enough structure for a model to overfit (tests, benchmarks); the real synthetic
    world lives in ``m2sa_core.data.synthetic``.
    """
    rng = np.random.default_rng(seed)
    h, w = size
    image = np.full((h, w, 3), 128, dtype=np.uint8)
    image += rng.integers(0, 8, size=image.shape, dtype=np.uint8)
    boxes = [(h // 8, w // 8, h // 2, w // 3), (h // 3, w // 2, h - h // 8, w - w // 8)]
    colours = [(220, 40, 40), (40, 60, 220)]
    masks = np.zeros((len(boxes), h, w), dtype=bool)
    for k, ((y0, x0, y1, x1), c) in enumerate(zip(boxes, colours)):
        image[y0:y1, x0:x1] = c
        masks[k, y0:y1, x0:x1] = True
    masks[0] &= ~masks[1]  # the second (blue) box occludes the first (red) one
    return Example(
        sample_id=f"toy-{seed}",
        image=image,
        command="What can I drink from?",
        answer="You can use the mug_1's handle [SEG] and the cup_2 [SEG].",
        masks=masks,
    )


def collate_prompted(samples: Sequence, processor: ImageProcessor) -> dict:
    """
    Collate prompt samples into the batch of :func:`m2sa_core.model.promptable.promptable_forward`.

    The samples are ``m2sa_core.data.prompt_samples.PromptSample``.

    Point and box coordinates are scaled from the original image into SAM's input frame
    (the longest side resized to the SAM size), which is what SAM's prompt encoder reads.
    Per sample: ``boxes`` [n, 4] or None, ``points`` [n, k, 2] or None, ``point_labels`` [n, k].
    """
    if not samples:
        raise ValueError("collate_prompted: empty batch")
    images = collate_images([processor(s.image) for s in samples])
    boxes, points, labels = [], [], []
    for s, (rh, rw), (oh, ow) in zip(samples, images["resize_sizes"], images["original_sizes"]):
        scale = torch.tensor([rw / ow, rh / oh], dtype=torch.float32)
        boxes.append(None if s.boxes is None else torch.from_numpy(s.boxes) * scale.repeat(2))
        points.append(None if s.points is None else torch.from_numpy(s.points) * scale)
        labels.append(None if s.point_labels is None else torch.from_numpy(s.point_labels))
    return {
        **images,
        "boxes": boxes,
        "points": points,
        "point_labels": labels,
        "gt_masks": [torch.from_numpy(s.masks) for s in samples],
        "gt_amodal_masks": [torch.from_numpy(s.amodal_masks) for s in samples],
        "sample_ids": [s.sample_id for s in samples],
    }
