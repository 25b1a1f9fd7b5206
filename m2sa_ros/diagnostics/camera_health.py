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
Is each camera alive? A frequency status and a timestamp status per camera for /diagnostics.

A camera that stopped must not look healthy: the node kept answering from its last frame
and said "ready". These are judged the way diagnostic_updater's FrequencyStatus and
TimeStampStatus judge a topic (diagnostic_updater itself is not on PyPI):

- **rate**: images per second over a sliding window; WARN below a floor
  (``image_min_rate``), ERROR when no image came for ``image_timeout`` seconds (or none
  at all that long after activation);
- **stamp**: the newest image's age by its header stamp against the node's clock; WARN
  when it is older than ``max_image_age`` (commands are then refused) or stamped in the
  future (two clocks that disagree).

While the node is not active it has no subscriptions, so both say so at level OK: a node
left inactive on purpose is not a fault. Plain Python, thread-safe, no ROS: the image
callbacks tick, the diagnostics timer reads.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
import threading
from typing import Any

from m2sa_ros.diagnostics.node_status import ERROR, OK, WARN
from m2sa_ros.params.parameter_group import ParameterGroup

FUTURE_TOLERANCE_S = 0.5  # a stamp this far ahead of the node's clock is two clocks disagreeing


@dataclass(frozen=True)
class CameraHealthSettings(ParameterGroup):
    """The node parameters that judge a camera, by the table's names (node_params.py documents each)."""

    CONSTANTS = ("window_s",)

    image_min_rate: float = 1.0  # Hz; 0: no floor
    image_timeout: float = 5.0  # s: no image for this long is an ERROR
    max_image_age: float = 1.0  # s; 0: any age
    window_s: float = 5.0  # the rate's window


class ImageArrivals:
    """When one camera's images arrived (node clock, ns): the rate over a window, the newest, the count."""

    def __init__(self) -> None:
        self._times: deque[int] = deque()
        self._lock = threading.Lock()
        self.total = 0
        self.last_ns: int | None = None
        self.started_ns: int | None = None  # when the node began listening (activate)

    def start(self, now_ns: int) -> None:
        """Mark the subscriptions' start: silence is measured from here until the first image."""
        with self._lock:
            self._times.clear()
            self.started_ns, self.last_ns = now_ns, None

    def stop(self) -> None:
        with self._lock:
            self._times.clear()
            self.started_ns, self.last_ns = None, None

    def tick(self, now_ns: int) -> None:
        with self._lock:
            self._times.append(now_ns)
            self.total += 1
            self.last_ns = now_ns
            while len(self._times) > 10_000:  # a window's worth at any sane rate
                self._times.popleft()

    def rate_hz(self, now_ns: int, window_s: float) -> float:
        """Images per second over the last ``window_s`` (over the time listened, when that is shorter)."""
        with self._lock:
            start = now_ns - int(window_s * 1e9)
            while self._times and self._times[0] <= start:  # the window is (now - window_s, now]
                self._times.popleft()
            listened = (now_ns - self.started_ns) / 1e9 if self.started_ns is not None else window_s
            span = min(window_s, listened)
            return len(self._times) / span if span > 0 else 0.0


def camera_health(base: str, topic: str, arrivals: ImageArrivals, newest_stamp_ns: int | None, now_ns: int,
                  limits: CameraHealthSettings, active: bool, state: str
                  ) -> list[tuple[str, int, str, dict[str, Any]]]:
    """Return the camera's rate and stamp statuses as (name, level, message, values)."""
    if not active:
        idle = f"not subscribed to {topic}: the node is {state}"
        return [(f"{base}: image rate", OK, idle, {"topic": topic}),
                (f"{base}: image stamp", OK, idle, {"topic": topic})]
    return [_rate_status(base, topic, arrivals, now_ns, limits),
            _stamp_status(base, topic, newest_stamp_ns, now_ns, limits)]


def _rate_status(base: str, topic: str, arrivals: ImageArrivals, now_ns: int,
                 limits: CameraHealthSettings) -> tuple[str, int, str, dict[str, Any]]:
    rate = arrivals.rate_hz(now_ns, limits.window_s)
    last, started = arrivals.last_ns, arrivals.started_ns
    silent_s = (now_ns - (last if last is not None else started if started is not None else now_ns)) / 1e9
    values = {"topic": topic, "rate_hz": rate, "min_rate_hz": limits.image_min_rate, "window_s": limits.window_s,
              "images_received": arrivals.total, "seconds_since_last_image": silent_s if last is not None else "none"}
    if limits.image_timeout > 0 and silent_s >= limits.image_timeout:
        if last is None:
            return (f"{base}: image rate", ERROR,
                    f"no image on {topic} in the {silent_s:.1f} s since the node became active", values)
        return f"{base}: image rate", ERROR, f"no image on {topic} for {silent_s:.1f} s", values
    if last is None:
        return f"{base}: image rate", WARN, f"waiting for the first image on {topic}", values
    if limits.image_min_rate > 0 and rate < limits.image_min_rate:
        return (f"{base}: image rate", WARN,
                f"{rate:.1f} Hz on {topic}, below image_min_rate {limits.image_min_rate:g} Hz", values)
    return f"{base}: image rate", OK, f"{rate:.1f} Hz on {topic}", values


def _stamp_status(base: str, topic: str, newest_stamp_ns: int | None, now_ns: int,
                  limits: CameraHealthSettings) -> tuple[str, int, str, dict[str, Any]]:
    limit = limits.max_image_age
    if newest_stamp_ns is None:
        return f"{base}: image stamp", WARN, f"no image stamp yet on {topic}", {"topic": topic,
                                                                                "max_image_age_s": limit}
    age = (now_ns - newest_stamp_ns) / 1e9
    values = {"topic": topic, "image_age_s": age, "max_image_age_s": limit}
    if limit > 0 and age > limit:
        return (f"{base}: image stamp", WARN,
                f"newest image on {topic} is {age:.2f} s old, over max_image_age {limit:g} s: commands are refused",
                values)
    if age < -FUTURE_TOLERANCE_S:
        return (f"{base}: image stamp", WARN,
                f"newest image on {topic} is stamped {-age:.2f} s in the future: the camera's clock and the "
                f"node's differ", values)
    return f"{base}: image stamp", OK, f"newest image {age:.3f} s old", values
