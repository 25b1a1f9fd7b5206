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
Service and action callbacks that hold an executor thread until their one result comes.

rclpy answers a service, and sends an action's result, only when the callback returns
(it has no deferred response like rclcpp's, ros2/rclcpp pull request 1709), so
``segment`` (service and action) and ``track`` wait inside their callbacks. Two
things follow, and both live here so the three callbacks share them: the node caps how
many may wait at once (``limit``, set by main from the executor's threads, so waiting
calls never take the threads that images and lifecycle services need), and deactivate
waits for the ones in flight before it destroys the servers, so no reply is lost mid-send.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
import threading
from typing import Any, Callable


class BlockingCalls:
    """Counts the callbacks that wait for a result; refuses one past ``limit`` (None = no cap)."""

    def __init__(self) -> None:
        self.limit: int | None = None
        self._count = 0
        self._cond = threading.Condition()

    @contextmanager
    def admit(self) -> Iterator[bool]:
        """Count a call in while inside the block; what ``with`` gives is False at the cap."""
        with self._cond:
            admitted = self.limit is None or self._count < self.limit
            if admitted:
                self._count += 1
        try:
            yield admitted
        finally:
            if admitted:
                with self._cond:
                    self._count -= 1
                    self._cond.notify_all()

    def too_many(self) -> str:
        """Return the error of a call refused at the cap."""
        return f"queue full: {self.limit} service/action calls already waiting"

    def wait_idle(self, timeout_s: float) -> None:
        """Wait until no call is in flight, or ``timeout_s``."""
        with self._cond:
            self._cond.wait_for(lambda: self._count == 0, timeout=timeout_s)


class Answer:
    """
    A request's one result, awaited by the callback that took the call.

    Set it as the request's ``on_done``; ``then`` runs after the result is in (the track
    action starts its track from the answer there).
    """

    def __init__(self, then: Callable[[Any], None] | None = None) -> None:
        self.result: Any = None
        self._done = threading.Event()
        self._then = then

    def __call__(self, msg: Any) -> None:
        self.result = msg
        self._done.set()
        if self._then is not None:
            self._then(msg)

    def wait(self, alive: Callable[[], bool]) -> Any:
        """Return the result, or None when ``alive()`` turns false first (the context shut down)."""
        while not self._done.wait(0.2):
            if not alive():
                break
        return self.result
