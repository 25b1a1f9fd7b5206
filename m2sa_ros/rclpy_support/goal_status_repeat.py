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
The action servers' goal statuses published again, once a second, while a goal runs.

An action server publishes its status array only when a goal changes state, and the
server sends the goal response just before the first two (accepted, executing). An
action client that takes that status before the goal response finds no goal of that ID
yet and drops it (the client race of ros2/rclcpp issue 2782; rclpy's client does the
same). Its goal handle then says "unknown" while the goal executes, and
``ros2 action send_goal`` cancels at Ctrl-C only a goal it knows as accepted or
executing, so Ctrl-C left such a goal running until it timed out. A status published
again after the goal response reaches the client's handle, as ROS 1 actionlib's
periodic status did.

rclpy has no public call for it: the goal handle's own server handle publishes, as
rclpy's ServerGoalHandle does at each state change (rclpy 3 to 9, Humble to Kilted).
"""

from __future__ import annotations

from contextlib import contextmanager
import threading
from typing import Any, Iterator

REPEAT_PERIOD_S = 1.0


def publish_goal_statuses(goal_handle: Any) -> bool:
    """
    Publish the status array of ``goal_handle``'s action server; False where rclpy cannot.

    An rclpy without the server handle's ``publish_status`` (none known) or a server
    destroyed meanwhile leaves the statuses to the server's own state changes.
    """
    from rclpy.exceptions import InvalidHandle

    server = getattr(goal_handle, "_action_server", None)
    publish = getattr(getattr(server, "_handle", None), "publish_status", None)
    if publish is None:
        return False
    try:
        publish()
    except InvalidHandle:
        return False
    return True


class GoalStatusRepeater:
    """
    The goals running now, whose servers' statuses :meth:`repeat` publishes again.

    The node calls :meth:`repeat` from a timer every :data:`REPEAT_PERIOD_S`; execute
    callbacks register their goal for as long as they run (:meth:`running`).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict[int, Any] = {}

    @contextmanager
    def running(self, goal_handle: Any) -> Iterator[None]:
        """Repeat the statuses of ``goal_handle``'s server while the block runs."""
        with self._lock:
            self._running[id(goal_handle)] = goal_handle
        try:
            yield
        finally:
            with self._lock:
                self._running.pop(id(goal_handle), None)

    def repeat(self) -> int:
        """Publish each running goal's server's statuses once; return how many servers published."""
        with self._lock:
            handles = list(self._running.values())
        servers: dict[int, Any] = {}
        for handle in handles:
            if handle.is_active:
                servers.setdefault(id(getattr(handle, "_action_server", None)), handle)
        return sum(publish_goal_statuses(handle) for handle in servers.values())
