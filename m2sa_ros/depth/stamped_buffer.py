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
The depth and camera_info buffers: the last few of each, looked up by the colour image's stamp.

Depth and camera_info arrive on their own topics; :class:`StampedBuffer` keeps the last
few and finds the one nearest to the colour image's stamp; depth_binding.bind_depth
checks that the pair fits the colour image before a command's masks are measured with
it. Pure Python: rclpy is never imported. The centroid itself (``mask_centroid``,
``erode_mask``) is in m2sa_core/geometry/centroid.py, ``Intrinsics`` in m2sa_core/camera.py.
"""

from __future__ import annotations

from collections import deque
import threading
import time
from typing import Callable, Generic, TypeVar

T = TypeVar("T")


class StampedBuffer(Generic[T]):
    """
    The last ``capacity`` items with their stamps (nanoseconds); thread-safe.

    Sensor callbacks push, the worker thread looks up the item nearest in time to the
    colour image, so a depth frame from a slightly different moment is never used.
    """

    def __init__(self, capacity: int = 10) -> None:
        if capacity < 1:
            raise ValueError(f"StampedBuffer capacity must be >= 1, got {capacity}")
        self._items: deque[tuple[int, T]] = deque(maxlen=capacity)
        self._lock = threading.Lock()
        self._pushed = threading.Condition(self._lock)

    def push(self, stamp_ns: int, item: T) -> None:
        with self._pushed:
            self._items.append((int(stamp_ns), item))
            self._pushed.notify_all()

    def wait_near(self, stamp_ns: int, tolerance_ns: int, timeout_s: float,
                  should_stop: Callable[[], bool] = lambda: False) -> bool:
        """
        Wait until an item within ``tolerance_ns`` of ``stamp_ns`` is here; return whether one is.

        Ends at once without a wait when the buffer is empty (a camera without depth) or
        already holds an item stamped after the tolerance (the stream has passed the stamp:
        no nearer item will come), and at ``timeout_s`` or when ``should_stop()`` says so
        (checked at least every 50 ms). The worker thread calls it when a frame's depth had
        not come by the time the model answered: depth that is late on a loaded link or
        behind a large message's repair would otherwise cost the command its 3-D.
        """
        deadline = time.monotonic() + timeout_s
        stamp_ns, tolerance_ns = int(stamp_ns), int(tolerance_ns)
        with self._pushed:
            while True:
                if not self._items:
                    return False
                if any(abs(stamp - stamp_ns) <= tolerance_ns for stamp, _ in self._items):
                    return True
                if self._items[-1][0] > stamp_ns + tolerance_ns or should_stop():
                    return False
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._pushed.wait(min(left, 0.05))

    def nearest(self, stamp_ns: int, tolerance_ns: int) -> T | None:
        """Return the item whose stamp is closest to ``stamp_ns``, if within ``tolerance_ns``."""
        found = self.closest(stamp_ns)
        return found[1] if found is not None and abs(found[0]) <= tolerance_ns else None

    def closest(self, stamp_ns: int) -> tuple[int, T] | None:
        """
        (its stamp minus ``stamp_ns``, item) of the item closest in time, whatever the distance; None when empty.

        Says how far off the depth is when it is not within the tolerance.
        """
        with self._lock:
            if not self._items:
                return None
            best_stamp, best = min(self._items, key=lambda entry: abs(entry[0] - stamp_ns))
        return best_stamp - int(stamp_ns), best

    def newest_stamp(self) -> int | None:
        """Return the stamp of the item pushed last (None when empty): how old the stream is."""
        with self._lock:
            return self._items[-1][0] if self._items else None

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)
