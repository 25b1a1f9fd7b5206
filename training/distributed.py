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
Process-group setup for torchrun (DDP) and the collectives evaluation needs.

One entry point serves a laptop and a cluster: without torchrun's environment it is a
single process; under ``torchrun --nproc-per-node N`` it joins the group with gloo on
CPU and NCCL on GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass
import os

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1


def resolve_device(name: str, info: DistInfo) -> torch.device:
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(name)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", info.local_rank)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    return device


def init_distributed(device_name: str = "auto") -> tuple[DistInfo, torch.device]:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    info = DistInfo(int(os.environ.get("RANK", "0")), world, int(os.environ.get("LOCAL_RANK", "0")))
    device = resolve_device(device_name, info)
    if info.enabled and not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    return info, device


def all_gather_objects(obj, info: DistInfo) -> list:
    if not info.enabled:
        return [obj]
    out: list = [None] * info.world_size
    dist.all_gather_object(out, obj)
    return out


def barrier(info: DistInfo) -> None:
    if info.enabled:
        dist.barrier()


def shutdown(info: DistInfo) -> None:
    if info.enabled and dist.is_initialized():
        dist.destroy_process_group()
