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
The per-frame feature cache: what a frame costs once, however many commands ask about it.

The SAM image encoder with early features, the fusion convolutions and CLIP do not depend
on the command, so a frame's :class:`FrameEntry` is kept in a small LRU keyed by the
caller's frame key or, without one, by a hash of the pixels.

Tensor shapes: ``FrameEntry.fused`` [1, P, h, w].
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass
import hashlib

from m2sa_core.model.m2sa import FrameFeatures
import numpy as np
import torch


@dataclass
class FrameEntry:
    """Cached, command-independent features of one frame."""

    features: FrameFeatures
    fused: torch.Tensor  # [1, P, h, w] image embedding + early fusion
    resize_size: tuple[int, int]
    original_size: tuple[int, int]


class FrameCache:
    """LRU of :class:`FrameEntry` with hit/miss counters; capacity 0 disables it."""

    def __init__(self, capacity: int) -> None:
        if capacity < 0:
            raise ValueError(f"frame_cache_size must be >= 0, got {capacity}")
        self.capacity = capacity
        self._entries: OrderedDict[Hashable, FrameEntry] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable) -> FrameEntry | None:
        entry = self._entries.get(key)
        if entry is None:
            self.misses += 1
            return None
        self.hits += 1
        self._entries.move_to_end(key)
        return entry

    def put(self, key: Hashable, entry: FrameEntry) -> None:
        if self.capacity == 0:
            return
        self._entries[key] = entry
        self._entries.move_to_end(key)
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)

    def clear(self) -> None:
        self._entries.clear()
        self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)


def image_key(image: np.ndarray) -> str:
    """Content hash of a frame (used when the caller gives no frame key)."""
    digest = hashlib.blake2b(image.tobytes(), digest_size=16)
    digest.update(repr(image.shape).encode())
    return digest.hexdigest()
