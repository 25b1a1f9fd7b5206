"""Reference implementation of the model's training batch contract.

The training collate builds exactly these fields; this small version (images,
commands, answers, masks -> batch) is what the model's own tests, the benchmarks and
quick experiments use without the data layer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from m2sa_core.prompt import build_conversation, tokenize_conversation
from m2sa_core.model.config import M2SAConfig
from m2sa_core.model.preprocess import ImageProcessor, collate_images


@dataclass
class Example:
    """One supervised sample: an RGB image, a command, an answer with [SEG] markers, masks."""

    sample_id: str
    image: np.ndarray  # H x W x 3 uint8
    command: str
    answer: str  # "... mug_1 [SEG] ..."
    masks: np.ndarray  # [n, H, W] bool, one per [SEG] in order


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
    length = max(len(i) for i in ids)
    pad = tokenizer.pad_token_id
    input_ids = torch.full((len(ids), length), pad, dtype=torch.long)
    labels = torch.full((len(ids), length), -100, dtype=torch.long)
    attention = torch.zeros((len(ids), length), dtype=torch.long)
    for b, (i, lab) in enumerate(zip(ids, labs)):
        input_ids[b, : len(i)] = torch.tensor(i)
        labels[b, : len(lab)] = torch.tensor(lab)
        attention[b, : len(i)] = 1
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
    """A scene of coloured rectangles on a grey table with a two-target answer.

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


def fit_batch(model, batch: dict, steps: int, lr: float = 2e-3, seed: int = 0) -> list[float]:
    """Plain AdamW on one batch for ``steps`` steps; returns the loss history.

    For smoke tests and benchmarks that need a model which actually emits [SEG]
    (a random model rarely does); real training lives in ``training/``.
    """
    torch.manual_seed(seed)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    optimiser = torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
    history = []
    for _ in range(steps):
        out = model(batch)
        optimiser.zero_grad(set_to_none=True)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimiser.step()
        history.append(float(out.loss.detach()))
    model.eval()
    return history
