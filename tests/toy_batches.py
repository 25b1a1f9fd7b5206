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
A toy scene and a plain fit on one batch.

What the model's tests and the benchmarks train and run on when the data layer is
beside the point.

Tests import it by name (``from toy_batches import toy_example``); the benchmarks, which
run from the checkout, as ``tests.toy_batches``.
"""

from __future__ import annotations

from m2sa_core.model.batch import Example
import numpy as np
import torch


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


def fit_batch(model, batch: dict, steps: int, lr: float = 2e-3, seed: int = 0) -> list[float]:
    """
    Plain AdamW on one batch for ``steps`` steps; returns the loss history.

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
