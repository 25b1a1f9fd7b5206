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
Warn before a CPU training shares its cores with busy processes at more threads than are free.

Torch's OpenMP threads spin while they wait for each other. Two two-thread trainings on a
two-core machine do not each run at half speed: they preempt each other's spinning threads
and both run 15-20 times slower (the tiny model's stage 1 fell from 1.8 steps a second
to 0.1 while a second training ran beside it). One thread each avoids it, and
nothing in a training's own output says why it crawls, so the check runs before the first step.
"""

from __future__ import annotations

from dataclasses import dataclass
import os

import psutil
import torch


@dataclass(frozen=True)
class CpuShare:
    """How busy the machine was just before training, and how many threads torch will use."""

    cores: int
    busy_cores: float   # cores' worth of work done by other processes while this one waited
    threads: int        # torch's intra-op threads in this process

    @property
    def oversubscribed(self) -> bool:
        free = self.cores - self.busy_cores
        return self.threads > 1 and self.threads > free + 0.5

    def advice(self) -> str:
        suggested = max(1, int(self.cores - self.busy_cores + 0.5))
        return (f"[train] warning: other processes keep about {self.busy_cores:.1f} of {self.cores} cores busy "
                f"and torch will use {self.threads} threads; threads that outnumber the free cores spin "
                f"against each other and can make every training here many times slower. "
                f"Set OMP_NUM_THREADS={suggested} for each training that shares the machine.")


SAMPLE_S = 0.3  # long enough to see a busy core, short beside any training's start-up


def measure_cpu_share(interval_s: float = SAMPLE_S) -> CpuShare:
    """
    Sample the machine's CPU use for ``interval_s`` while this process sleeps.

    What is busy during that sleep is other processes' work.
    """
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    busy_fraction = psutil.cpu_percent(interval=interval_s) / 100.0
    machine_cores = psutil.cpu_count() or cores
    busy = min(float(cores), busy_fraction * machine_cores)
    return CpuShare(cores=cores, busy_cores=busy, threads=torch.get_num_threads())


def warn_if_oversubscribed(device: torch.device, interval_s: float = SAMPLE_S) -> CpuShare | None:
    """
    Print the advice when a CPU run would start with more threads than free cores.

    Returns the measurement (None on other devices, whose threads only feed the GPU, and
    with one thread, which cannot spin against itself: neither pays for the sample).
    """
    if device.type != "cpu" or torch.get_num_threads() <= 1:
        return None
    share = measure_cpu_share(interval_s)
    if share.oversubscribed:
        print(share.advice(), flush=True)
    return share
