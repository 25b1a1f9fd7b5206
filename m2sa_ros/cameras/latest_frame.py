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
Keep-latest camera frame: the image a command refers to.

A command means "what the camera sees now", so the node keeps exactly one frame - the
newest - and never a backlog (a queue of stale frames would make every answer late).
A raw image is converted in its callback (a copy, cheap), so a bad encoding is known at
once; the slot then holds the error, and the next command is answered with it. A
compressed one is kept encoded (:meth:`LatestFrame.put_pending`) and decoded only when
a command or a track takes it: a 1080p JPEG costs about 8 ms to decode, a quarter of a
core at 30 Hz, which an idle node would otherwise spend on frames nobody asks about.
Whatever only needs the stamp (diagnostics, the track scheduler) uses :meth:`peek`,
which never decodes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
import itertools
import threading
import time
from typing import Any, Callable

from m2sa_ros.messages.image_conversion import stamp_ns
import numpy as np


@dataclass(frozen=True)
class Frame:
    """One received image: RGB pixels (or the reason there are none) plus its header."""

    rgb: np.ndarray | None  # uint8 HxWx3; None when conversion failed
    header: Any  # std_msgs/Header of the source image, copied into results
    key: str  # cache key for the Segmenter's frame features; unique per received frame
    stamp_ns: int  # header stamp in nanoseconds (0 when the publisher left it unset)
    received_at: float  # time.monotonic() at arrival
    height: int = 0
    width: int = 0
    error: str = ""  # conversion error, when rgb is None
    # A compressed image not decoded yet: returns (rgb, "") or (None, the reason). The
    # holder (LatestFrame) decodes it once, for whoever takes the frame first.
    pending: Callable[[], tuple[np.ndarray | None, str]] | None = None

    def age_s(self, now_ns: int) -> float:
        """Seconds since the image's stamp; falls back to arrival time for unset stamps."""
        if self.stamp_ns > 0:
            return (now_ns - self.stamp_ns) / 1e9
        return time.monotonic() - self.received_at


class LatestFrame:
    """
    A one-slot, thread-safe holder of the newest :class:`Frame`.

    :meth:`wait` lets a command that arrives before the first image wait a little
    (``wait_for_image``) instead of failing at once at start-up.
    """

    def __init__(self, key_prefix: str = "camera") -> None:
        # The prefix keeps cache keys unique when several nodes share one Segmenter.
        self._key_prefix = key_prefix
        self._frame: Frame | None = None
        self._cond = threading.Condition()
        self._counter = itertools.count(1)
        self._decode_lock = threading.Lock()  # one decode at a time; the second taker reuses it
        self._decoded: Frame | None = None  # the last frame decoded, by key

    def put(self, rgb: np.ndarray | None, header: Any, error: str = "",
            height: int = 0, width: int = 0) -> Frame:
        """Keep a converted image (or the reason it could not be converted) as the newest."""
        if rgb is not None:
            height, width = rgb.shape[:2]
        return self._keep(header, rgb=rgb, height=int(height), width=int(width), error=error)

    def put_pending(self, decode: Callable[[], tuple[np.ndarray | None, str]], header: Any) -> Frame:
        """Keep a still encoded image as the newest; ``decode`` runs when the frame is first taken."""
        return self._keep(header, rgb=None, pending=decode)

    def _keep(self, header: Any, **fields: Any) -> Frame:
        stamp = stamp_ns(header)
        n = next(self._counter)
        frame = Frame(header=header, key=f"{self._key_prefix}:{n}:{stamp}", stamp_ns=stamp,
                      received_at=time.monotonic(), **fields)
        with self._cond:
            self._frame = frame
            self._cond.notify_all()
        return frame

    def peek(self) -> Frame | None:
        """Return the newest frame as it is, still encoded if it came compressed: for its stamp and key."""
        with self._cond:
            return self._frame

    def get(self) -> Frame | None:
        """Return the newest frame, decoded."""
        return self._taken(self.peek())

    def _taken(self, frame: Frame | None) -> Frame | None:
        """``frame`` decoded (once, whoever asks first), or as it is when it needs no decoding."""
        if frame is None or frame.pending is None:
            return frame
        with self._decode_lock:
            done = self._decoded
            if done is not None and done.key == frame.key:
                return done
            rgb, error = frame.pending()
            height, width = rgb.shape[:2] if rgb is not None else (0, 0)
            done = replace(frame, rgb=rgb, error=error, height=int(height), width=int(width), pending=None)
            self._decoded = done
        with self._cond:
            if self._frame is frame:  # still the newest: later takers skip the lookup
                self._frame = done
        return done

    def wait(self, timeout: float, should_stop=lambda: False, poll: float = 0.05) -> Frame | None:
        """Return the latest frame, waiting up to ``timeout`` s for the first one (None if none)."""
        deadline = time.monotonic() + max(0.0, timeout)
        with self._cond:
            while self._frame is None and not should_stop():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(min(poll, remaining))
            frame = self._frame
        return self._taken(frame)

    def clear(self) -> None:
        with self._cond:
            self._frame = None
        with self._decode_lock:
            self._decoded = None
