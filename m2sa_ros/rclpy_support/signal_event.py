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
An event that a signal handler may set: :class:`SignalSafeEvent`.

``threading.Event.set()`` takes the event's lock. Python runs a signal handler on the main
thread, between two bytecodes, and that can be while the same thread holds that lock
inside ``Event.wait()`` (it takes the lock back when a timed wait ends). The handler's
``set()`` then waits for a lock its own thread holds, forever: the process no longer
reacts to SIGINT, and a node under ``ros2 launch`` answers nothing until launch kills
it. The chance is small per signal and grows on a loaded machine, where a thread can be
paused at just that point.

Here ``set()`` only assigns a flag and writes a byte to a pipe, neither of which takes a
lock, and ``wait()`` waits on the pipe with ``select``, which a signal wakes (PEP 475 runs
the handler and then sees the byte). It is an event for any thread to wait on, as
``threading.Event`` is, but the only one a signal handler may set.

It is rclpy's business because the node's process replaces rclpy's own SIGINT handling
(rclpy's handler would shut the context down at the first signal, before the pending
commands are answered: main.py's ShutdownRequest), and the desk camera does the same.
"""

from __future__ import annotations

import os
import select


class SignalSafeEvent:
    """A set-once flag that a signal handler may set and any thread may wait for."""

    def __init__(self) -> None:
        self._flag = False
        self._read, self._write = os.pipe()
        os.set_blocking(self._write, False)

    def set(self) -> None:  # noqa: A003 - threading.Event's name, for which it stands in
        """Set the flag and wake every waiter; safe inside a signal handler."""
        self._flag = True
        try:
            os.write(self._write, b"\0")
        except (BlockingIOError, OSError):
            pass  # a full pipe already wakes every waiter; a closed one has none left

    def is_set(self) -> bool:
        return self._flag

    def wait(self, timeout: float | None = None) -> bool:
        """Return True once the flag is set, False when ``timeout`` seconds passed first."""
        if not self._flag:
            try:
                select.select([self._read], [], [], timeout)
            except (OSError, ValueError):
                pass  # closed while waiting: the flag says what happened
        return self._flag

    def close(self) -> None:
        """Release the pipe (the flag stays readable)."""
        for fd in (self._read, self._write):
            try:
                os.close(fd)
            except OSError:
                pass
