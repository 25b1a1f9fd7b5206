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
Letting the last answers leave before the node goes: result topics and action results.

A shutdown answers every pending command, and those answers must reach their clients
while an executor still spins the node: a reliable result topic until its subscribers
acknowledge, an action goal's result until rclpy's executor task has sent it. rclpy does
neither on its own: ``publish()`` returns before a reliable subscriber has the message,
and its ActionServer sends a result from an executor task scheduled when the goal's result
future completes, so an executor shut down at once loses both. Both waits are bounded;
the process is ending, so each is best effort.

A shutdown passes these waits several times (main's stop, close's stop, the servers'
destruction), each with its own bound of up to 2 s. Under load that added up past the 5 s
after which ``ros2 launch`` sends SIGTERM (its ``sigterm_timeout``), and a node still
answering was killed. :class:`ShutdownDeadline` gives all the waits of one shutdown one
budget instead.
"""

from __future__ import annotations

from collections.abc import Iterable
import time
from typing import Any
import weakref


# Of launch's 5 s sigterm_timeout: what is left is rclpy's and Python's own teardown.
SHUTDOWN_BUDGET_S = 3.5
WAIT_BOUND_S = 2.0  # each wait on its own, and within the budget once a shutdown has started


class ShutdownDeadline:
    """One deadline for every wait of a shutdown, set when the shutdown starts; unset, a wait keeps its own bound."""

    def __init__(self, budget_s: float = SHUTDOWN_BUDGET_S) -> None:
        self.budget_s = budget_s
        self._end: float | None = None

    def start(self) -> None:
        """Start the budget; a later call (close after stop) keeps the first start."""
        if self._end is None:
            self._end = time.monotonic() + self.budget_s

    @property
    def started(self) -> bool:
        return self._end is not None

    def left(self, otherwise: float = WAIT_BOUND_S) -> float:
        """Seconds a wait may take: its own bound ``otherwise``, and no more than the budget's rest once started."""
        if self._end is None:
            return otherwise
        return min(otherwise, max(0.0, self._end - time.monotonic()))


def wait_results_acked(publishers: Iterable[Any], timeout_s: float = WAIT_BOUND_S) -> None:
    """Give reliable subscribers of ``publishers`` (None entries skipped) up to ``timeout_s`` in all to acknowledge."""
    from rclpy.duration import Duration

    deadline = time.monotonic() + timeout_s
    for pub in publishers:
        if pub is None:
            continue
        try:
            left = max(0.0, deadline - time.monotonic())
            pub.wait_for_all_acked(Duration(nanoseconds=int(left * 1e9)))
        except Exception:  # noqa: BLE001 - best effort while the process ends
            pass


class ActionResultGrace:
    """
    Waits until the results of ended goals have had time to go out, once per goal.

    A goal's result leaves from an executor task that rclpy schedules when the result
    future completes, so a completed future is not yet a sent result; a short grace after
    the futures covers that task. It only helps while an executor still spins the node,
    which is why the node's stop() waits here before main() shuts the executor down. A
    shutdown passes here up to three times (stop, close's stop, the servers' destruction);
    the grace is waited once per ended goal, not each time.
    """

    GRACE_S = 0.2

    def __init__(self) -> None:
        self._graced: weakref.WeakSet[Any] = weakref.WeakSet()  # result futures already waited for

    def wait(self, servers: Iterable[Any], timeout_s: float = WAIT_BOUND_S) -> None:
        futures = [f for server in servers for f in getattr(server, "_result_futures", {}).values()]
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not all(f.done() for f in futures):
            time.sleep(0.01)
        # Only an ended goal's result is graced: one still running at the timeout gets its
        # grace at the next pass, once it has ended.
        new = [f for f in futures if f.done() and f not in self._graced]
        if new:
            time.sleep(self.GRACE_S)
            self._graced.update(new)
