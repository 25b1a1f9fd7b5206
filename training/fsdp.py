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
Fully sharded data parallel (PyTorch FSDP2) for models that do not fit DDP.

DDP keeps a full copy of the weights, gradients and optimizer state on every GPU; with
the paper's LoRA split that fits 7B on 80 GB cards, but a larger model, a full
fine-tune or smaller cards need the states sharded (what DeepSpeed ZeRO does). FSDP2
shards every parameter across ranks (each Llama decoder layer is its own unit, so only
one layer is gathered at a time) and works with frozen and trainable parameters side by
side. Checkpoints are gathered into full, unsharded tensors, so a run saved under FSDP
is read by ``m2sa-eval`` or a single process like any other.
"""

from __future__ import annotations

import copy

from m2sa_core.model.m2sa import M2SAModel
from m2sa_core.model.trainable import add_lora, has_lora
import torch
from torch.distributed.checkpoint.state_dict import (
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
    StateDictOptions,
)
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

FULL = StateDictOptions(full_state_dict=True, cpu_offload=True)


def shard_model(model: M2SAModel, device: torch.device, world_size: int) -> M2SAModel:
    """Shard in place: each LLM decoder layer, then the rest of the model as the root unit."""
    mesh = init_device_mesh(device.type, (world_size,))
    for layer in model.llm.model.layers:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def full_trainables(model: M2SAModel) -> dict[str, torch.Tensor]:
    """Unsharded trainable tensors (a collective: every rank must call it)."""
    trainable = {name for name, p in model.named_parameters() if p.requires_grad}
    return {k: v for k, v in get_model_state_dict(model, options=FULL).items() if k in trainable}


def full_optimizer_state(model: M2SAModel, optimizer: torch.optim.Optimizer) -> dict:
    return get_optimizer_state_dict(model, optimizer, options=FULL)


def load_full_state(model: M2SAModel, optimizer: torch.optim.Optimizer, trainables: dict, optim_state: dict) -> None:
    """Scatter a full (unsharded) checkpoint back into the shards of every rank."""
    set_model_state_dict(model, trainables, options=StateDictOptions(full_state_dict=True, strict=False))
    set_optimizer_state_dict(model, optimizer, optim_state, options=StateDictOptions(full_state_dict=True))


def unsharded_copy(model: M2SAModel, build: bool) -> M2SAModel | None:
    """
    Return a plain CPU model with the full weights, e.g. for ``save_pretrained``.

    Gathering is a collective (every rank calls this); only the rank with ``build`` set
    (rank 0) assembles the model, the others get None.
    """
    state = get_model_state_dict(model, options=FULL)
    if not build:
        return None
    config = copy.deepcopy(model.config)
    lora = config.lora
    config.lora = None
    plain = M2SAModel.build(config, device="cpu", dtype=next(iter(state.values())).dtype)
    if has_lora(model):
        add_lora(plain, lora)
    plain.load_state_dict(state, strict=True)
    return plain
