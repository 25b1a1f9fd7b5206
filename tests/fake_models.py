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
Model doubles for node tests that check plumbing, not the network.

They return m2sa_core Results with known box masks, so a test can tell which depth
frame a centroid came from; one of them is slow (a 7B model's 0.35-1.9 s per command)
and can run a callback while it "thinks" (e.g. 30 Hz depth arriving meanwhile).
"""

from __future__ import annotations

import time
from typing import Any, Callable

from m2sa_core.types import Granularity, Result, Target
import numpy as np


class BoxSegmenter:
    """Answers every command with one target whose mask is a fixed box."""

    def __init__(self, box: tuple[int, int, int, int] = (8, 6, 10, 8), sleep_s: float = 0.0,
                 while_thinking: Callable[[], None] | None = None, mask_type: str = "modal") -> None:
        self.box = box
        self.sleep_s = sleep_s
        self.while_thinking = while_thinking
        self.mask_type = mask_type
        self.mask_threshold = 0.0
        self.duplicate_iou = 0.0
        self.calls = 0

    cache_stats: dict[str, int] = {}

    def segment(self, image: np.ndarray, command: str, **kwargs: Any) -> Result:
        self.calls += 1
        started = time.monotonic()
        if self.while_thinking is not None:
            self.while_thinking()
        remaining = self.sleep_s - (time.monotonic() - started)
        if remaining > 0:
            time.sleep(remaining)
        x, y, w, h = self.box
        mask = np.zeros(image.shape[:2], dtype=bool)
        mask[y:y + h, x:x + w] = True
        amodal = None
        if self.mask_type == "amodal":
            amodal = mask.copy()
            amodal[max(0, y - 2):y + h, x:x + w] = True
        target = Target("mug_1", "mug", 1, "", Granularity.OBJECT, mask, score=0.8, amodal_mask=amodal,
                        mask_type=self.mask_type, amodal_score=0.7 if amodal is not None else 0.0)
        return Result(answer="It is the mug_1.", targets=[target])
