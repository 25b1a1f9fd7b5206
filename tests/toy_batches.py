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
A plain fit on one batch: what the model's tests train with when the training loop is beside the point.

The scene it is given is ``m2sa_core.model.batch.toy_example``, which the benchmarks use
too. Tests import this module by name (``from toy_batches import fit_batch``).
"""

from __future__ import annotations

import torch


def fit_batch(model, batch: dict, steps: int, lr: float = 2e-3, seed: int = 0) -> list[float]:
    """
    Plain AdamW on one batch for ``steps`` steps; returns the loss history.

    For smoke tests that need a model which actually emits [SEG]
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
