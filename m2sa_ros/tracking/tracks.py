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
Per-track state of the ``track`` action, apart from DDS so it can be tested alone.

A track is one command answered by the full model, then followed on new camera frames
with ``Segmenter.track`` (SAM alone). The node owns the plumbing (goal handles, the
worker, publishing); this module owns the decisions: is a frame due (new, not too soon
after the last one, none of this track's frames already waiting), which sequence number
a tracked result gets, when the track ends (cancel, timeout, every target lost, an answer
naming no target, the node stopping, an error) and that it ends exactly once, with the
first reason given.

Fairness with ordinary commands comes from :meth:`Track.want_frame`: a track never has
more than one frame waiting in the worker's queue, so a command queued behind tracked
frames waits for at most one frame per running track.

Tracks are per camera: a node serving several cameras keeps one :class:`TrackSet` per
camera, a track follows its own camera's frames (``Track.camera`` names it) and its
frames wait in that camera's queue.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
import threading
from typing import Any, Callable

from m2sa_core.lost_rule import LostRule

CANCELLED = "cancelled"
TIMEOUT = "timeout"
LOST = "lost"  # every target lost
ABSENT_PREFIX = "absent: "  # the answer named no target: nothing to follow (interfaces v6)
ERROR_PREFIX = "error: "


def absent_reason(missing: str) -> str:
    """Return the reason of a track whose answer named no target, saying what is missing when known."""
    return f"{ABSENT_PREFIX}no {missing} in view" if missing else f"{ABSENT_PREFIX}the answer names no target"


@dataclass(frozen=True)
class TrackSettings:
    """A Track goal's knobs, checked: a bad goal is refused with a clear reason."""

    rate: float = 0.0  # Hz; 0 = every new frame
    timeout: float = 0.0  # seconds from acceptance; 0 = none
    min_score: float = 0.0
    lost_frames: int = 0  # 0 = never lost
    use_previous_mask: bool = False

    def __post_init__(self) -> None:
        problems = []
        if not self.rate >= 0.0:  # also refuses NaN
            problems.append(f"rate must be >= 0 Hz, got {self.rate}")
        if not self.timeout >= 0.0:
            problems.append(f"timeout must be >= 0 s, got {self.timeout}")
        if not 0.0 <= self.min_score <= 1.0:
            problems.append(f"min_score must be within [0, 1], got {self.min_score}")
        if problems:
            raise ValueError("; ".join(problems))

    @classmethod
    def from_goal(cls, goal: Any) -> TrackSettings:
        """From a ``m2sa_ros/action/Track`` goal (or anything with its fields)."""
        return cls(rate=float(goal.rate), timeout=float(goal.timeout), min_score=float(goal.min_score),
                   lost_frames=int(goal.lost_frames), use_previous_mask=bool(goal.use_previous_mask))

    @property
    def lost_rule(self) -> LostRule | None:
        return LostRule(self.min_score, self.lost_frames) if self.lost_frames > 0 else None

    @property
    def min_interval(self) -> float:
        """Seconds between the starts of two tracked frames (0: no limit)."""
        return 1.0 / self.rate if self.rate > 0 else 0.0


class Track:
    """
    One running track: from "answering" (the command) to "tracking" to ended.

    Thread-safe: the worker thread runs frames, the image callback asks for them, the
    goal's callback checks cancel and timeout; one lock orders them, so no tracked
    result goes out after the track ended.
    """

    def __init__(self, request_id: str, command: str, settings: TrackSettings, started_at: float,
                 handle: Any = None, camera: str = "") -> None:
        self.request_id = request_id
        self.camera = camera  # the camera whose frames it follows ("" = the single camera)
        self.handle = handle  # the node's way to deliver feedback (its goal handle)
        self.command = command
        self.settings = settings
        self.started_at = started_at
        self.prompts: Any = None  # m2sa_core TrackPrompts, once answered
        self.state: Any = None  # m2sa_core TrackState of the last frame
        self.frames = 0  # tracked frames delivered (the answer is frame 0)
        self.last: Any = None  # the last result delivered (a SegmentationResult)
        self.reason = ""
        self.ended = threading.Event()
        self._lock = threading.Lock()
        self._tracking = False
        self._queued = False
        self._last_key: Any = None
        self._last_start = float("-inf")

    @property
    def active(self) -> bool:
        return not self.ended.is_set()

    @property
    def queued(self) -> bool:
        with self._lock:
            return self._queued

    def answered(self, prompts: Any, frame_key: Any, answer: Any, deliver: Callable[[], None],
                 missing: str = "") -> bool:
        """
        Return the command's answer: deliver it as frame 0 and start following; False if already ended.

        An answer naming no target ends the track at once, its reason :func:`absent_reason`
        of ``missing`` (the result's words for what is not there): there is nothing to
        follow, and the planner must not wait for frames that will not come.
        """
        with self._lock:
            if self.ended.is_set():
                return False
            self.prompts, self._last_key, self.last = prompts, frame_key, answer
            deliver()
            self._tracking = True
            if len(prompts) == 0:
                self._end(absent_reason(missing))
            return True

    def want_frame(self, frame_key: Any, now: float) -> bool:
        """Whether to queue a tracked frame now; True marks one queued (call :meth:`dropped` if not sent)."""
        with self._lock:
            if (not self._tracking or self.ended.is_set() or self._queued or frame_key is None
                    or frame_key == self._last_key or now - self._last_start < self.settings.min_interval):
                return False
            self._queued = True
            return True

    def dropped(self) -> None:
        """Note that a queued frame will not run (the worker refused or rejected it)."""
        with self._lock:
            self._queued = False

    def take(self, frame_key: Any, now: float) -> bool:
        """
        Return the worker starts the queued frame on ``frame_key``: False when there is nothing to do.

        Nothing to do: the track ended meanwhile, or no newer frame than the last one.
        """
        with self._lock:
            self._queued = False
            if self.ended.is_set() or frame_key is None or frame_key == self._last_key:
                return False
            self._last_key, self._last_start = frame_key, now
            return True

    def record(self, result: Any, state: Any, message: Any, deliver: Callable[[int], None]) -> bool:
        """
        Return a tracked frame's outcome: deliver ``message`` with its sequence number, apply the lost rule.

        Returns False (nothing delivered) when the track ended while the frame ran.
        """
        with self._lock:
            if self.ended.is_set():
                return False
            rule = self.settings.lost_rule
            if rule is not None:
                # Segmenter.track starts each frame's state afresh: the runs of low
                # frames so far come from the previous frame's state.
                if self.state is not None:
                    state = dataclasses.replace(state, lost_frames=self.state.lost_frames)
                state = rule.update(state, result)
            self.state = state
            self.frames += 1
            self.last = message
            deliver(self.frames)
            if rule is not None and rule.all_lost(state):
                self._end(LOST)
            return True

    def check(self, now: float, cancel_requested: bool) -> None:
        """End on a cancel request or when the timeout has passed (polled by the goal's callback)."""
        if cancel_requested:
            self.end(CANCELLED)
        elif self.settings.timeout > 0 and now - self.started_at >= self.settings.timeout:
            self.end(TIMEOUT)

    def end(self, reason: str, last: Any = None) -> bool:
        """End the track; True exactly once (the first reason wins). ``last`` replaces the final result."""
        with self._lock:
            if self.ended.is_set():
                return False
            if last is not None:
                self.last = last
            self._end(reason)
            return True

    def _end(self, reason: str) -> None:
        self.reason = reason
        self.ended.set()


class TrackSet:
    """The node's running tracks, so frames can be handed out and all ended at once."""

    def __init__(self) -> None:
        self._tracks: list[Track] = []
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._tracks)

    def add(self, track: Track) -> None:
        with self._lock:
            self._tracks.append(track)

    def remove(self, track: Track) -> None:
        with self._lock:
            if track in self._tracks:
                self._tracks.remove(track)

    def due(self, frame_key: Any, now: float) -> list[Track]:
        """Tracks that want ``frame_key`` now (each is marked queued; see :meth:`Track.want_frame`)."""
        with self._lock:
            tracks = list(self._tracks)
        return [t for t in tracks if t.want_frame(frame_key, now)]

    def end_all(self, reason: str) -> None:
        with self._lock:
            tracks = list(self._tracks)
        for track in tracks:
            track.end(reason)
