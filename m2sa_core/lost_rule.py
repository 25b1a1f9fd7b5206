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
When a track gives up on its targets.

The rule reads only each target's score per frame, so it lives apart from the tracking
that needs torch: the node checks a Track goal's rule when the goal arrives, and a node
that has not loaded its model yet (or never will: a bad parameter, ``--help``) need not
import the model stack for that.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Protocol, TypeVar

from m2sa_core.types import Result
import numpy as np


class _HasLostFrames(Protocol):
    lost_frames: np.ndarray  # per target: low-score frames in a row


_TrackState = TypeVar("_TrackState", bound=_HasLostFrames)


@dataclass(frozen=True)
class LostRule:
    """When a track gives up: every target scored under ``min_score`` for ``frames`` frames in a row."""

    min_score: float = 0.5
    frames: int = 3

    def __post_init__(self) -> None:
        if not 0.0 <= self.min_score <= 1.0:
            raise ValueError(f"min_score must be within [0, 1], got {self.min_score}")
        if self.frames < 1:
            raise ValueError(f"frames must be >= 1, got {self.frames}")

    def update(self, state: _TrackState, result: Result) -> _TrackState:
        """Return the state with each target's run of low-score frames counted (a target without a mask counts low)."""
        scores = np.array([t.score if t.mask.any() else 0.0 for t in result.targets], dtype=np.float64)
        before = state.lost_frames if state.lost_frames.shape == scores.shape else np.zeros(scores.shape, np.int64)
        runs = np.where(scores < self.min_score, before + 1, 0)
        return replace(state, lost_frames=runs)

    def all_lost(self, state: _TrackState) -> bool:
        return bool(state.lost_frames.size) and bool((state.lost_frames >= self.frames).all())
