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
Per camera: what became of each frame's depth, and when to say why targets have no 3-D.

A frame measured for 3-D (a command's or a tracked frame's) ends with its depth *bound*,
*missing* (no depth or camera_info within ``depth_tolerance``: none received, or stamped
too far from the colour image) or *refused* (there, but not the colour camera's: another
frame_id, another size, a payload that does not decode). :class:`DepthHealth` counts
those outcomes for /diagnostics and decides when the node warns, naming the cause:

* a refusal at its first frame: it will not fix itself;
* missing depth once it has been missing for ``depth_missing_frames`` frames in a row: depth
  often comes a few ms after its colour image, so one frame without it is no fault;
* once per *episode* and cause, not per frame: an episode ends when depth has been bound
  for ``depth_missing_frames`` frames in a row, so a camera whose depth comes and goes does not
  fill the log, and one that recovers and fails again says so again.

A frame looked at twice (its depth not there before the model ran, looked for again
after it) counts once, with the second look's outcome. Pure Python: rclpy is never
imported.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
import threading
from typing import Any, TYPE_CHECKING

if TYPE_CHECKING:  # the settings' geometry side (OpenCV, SciPy) is not needed to count outcomes
    from m2sa_ros.depth.depth_settings import DepthSettings

BOUND, MISSING, REFUSED = "bound", "missing", "refused"


@dataclass(frozen=True)
class DepthOutcome:
    """
    One frame's depth: ``state`` (bound, missing, refused), with cause and reason.

    For missing and refused, the ``cause`` (a short key: no_depth, depth_late,
    camera_info_frame, ...) and the one-line ``reason`` the warning and /diagnostics show.
    """

    state: str
    cause: str = ""
    reason: str = ""


class DepthHealth:
    """Counts of bound / missing / refused frames, the last reason, and the warnings to give (thread-safe)."""

    def __init__(self, remember: int = 64) -> None:
        self._lock = threading.Lock()
        self._recent: OrderedDict[str, DepthOutcome] = OrderedDict()  # frame key -> its outcome
        self._remember = remember
        self.counts = {BOUND: 0, MISSING: 0, REFUSED: 0}
        self.last_reason = ""
        self.last_state = ""
        self._without = 0  # frames in a row without depth (missing or refused)
        self._with = 0  # frames in a row with depth
        self._said: set[str] = set()  # causes warned about in this episode
        self._episode = 0

    def record(self, frame_key: str, outcome: DepthOutcome, settings: DepthSettings) -> tuple[str, str] | None:
        """
        Count ``outcome`` for the frame ``frame_key`` ("" = a request's own image, never looked at twice).

        (key, text) of the warning to log now, or None. ``settings``: the depth parameters
        (``depth_missing_frames`` is read).

        The key is unique per episode and cause, so a warn-once logger says each once.
        """
        depth_missing_frames = max(1, int(settings.depth_missing_frames))
        with self._lock:
            previous = self._recent.get(frame_key) if frame_key else None
            if previous is not None:
                self.counts[previous.state] -= 1  # the second look replaces the first
            self.counts[outcome.state] += 1
            if frame_key:
                self._recent[frame_key] = outcome
                while len(self._recent) > self._remember:
                    self._recent.popitem(last=False)
            self.last_state = outcome.state
            if outcome.state == BOUND:
                if previous is None or previous.state != BOUND:
                    self._with += 1
                    self._without = 0
                if self._with >= depth_missing_frames and self._said:
                    self._said.clear()  # the episode is over
                    self._episode += 1
                return None
            self.last_reason = outcome.reason
            if previous is None:
                self._without += 1
                self._with = 0
            if outcome.cause in self._said:
                return None
            if outcome.state == REFUSED:
                self._said.add(outcome.cause)
                return f"depth:{self._episode}:{outcome.cause}", f"no centroids: {outcome.reason}"
            if self._without >= depth_missing_frames:
                self._said.add(outcome.cause)
                return (f"depth:{self._episode}:{outcome.cause}",
                        f"no 3-D for {self._without} frames in a row: {outcome.reason}")
            return None

    def snapshot(self) -> dict[str, Any]:
        """Return the /diagnostics values: counts, the last frame's state and the last reason."""
        with self._lock:
            return {"depth_bound": self.counts[BOUND], "depth_missing": self.counts[MISSING],
                    "depth_refused": self.counts[REFUSED], "depth_last_state": self.last_state or "none",
                    "depth_frames_without": self._without, "depth_last_reason": self.last_reason}

    def clear(self) -> None:
        """Forget everything (cleanup): a later configure starts a fresh count."""
        with self._lock:
            self._recent.clear()
            self.counts = {BOUND: 0, MISSING: 0, REFUSED: 0}
            self.last_reason = self.last_state = ""
            self._without = self._with = 0
            self._said.clear()
            self._episode += 1
