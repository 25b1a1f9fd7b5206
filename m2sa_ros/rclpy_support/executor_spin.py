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
Spin an executor through rclpy's destroy-while-waiting race.

The executor builds its wait set in one pass: it marks every entity in use, then adds
each to the wait set. A subscription or publisher destroyed from another thread in
between (the node does this at every lifecycle deactivate and cleanup, from whichever
thread runs the transition) leaves its QoS event handler "destruction requested", and
adding that handler raises ``InvalidHandle`` out of ``Executor.spin``. The failed pass
has released everything it entered and the executor builds a fresh wait set on the next
call, from which the destroyed entity is gone; so spinning again is the whole recovery.
Left alone, the exception ends the spin thread and the node goes deaf (ros2/rclpy issues
1206 and 1284).

An action server or client (a waitable) loses the same race one step later: destroyed
before the executor enters it, its failed entry is skipped, but the executor still adds
it to the wait set, and rcl refuses its invalid pointer with an ``RCLError`` ("Failed to
add 'rcl_action_server_t' to wait set: action server pointer is invalid"). The node
destroys its Segment and Track servers at every cleanup, so that error is the same race
and the same recovery holds: the pass released what it entered, and the server is no
longer among the node's waitables (ros2/rclpy issue 1385).

Two more races end the spin instead, both a shutdown from another thread (the node's stop):
a MultiThreadedExecutor's while it hands a ready entity to its thread pool (see
``_shut_down_under_it``), and any executor's while it gathers its entities on Jazzy (see
``_guard_gone_under_it``).
"""

from __future__ import annotations

import re
from typing import Callable

from rclpy.exceptions import InvalidHandle
from rclpy.executors import Executor
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy

#: rcl's refusal of a destroyed waitable, as rclpy's executor words it when adding one
#: (``rcl_action_server_t`` or ``rcl_action_client_t``).
_DESTROYED_WAITABLE = re.compile(r"Failed to add '[a-z_]+' to wait set: .* pointer is invalid")


def spin_through_destroyed_entities(executor: Executor,
                                    on_race: Callable[[Exception], None] | None = None) -> int:
    """
    ``executor.spin()`` that survives entities destroyed while it waits.

    Returns how many times the race was met (for diagnostics and tests). Ends when
    ``spin()`` does, on the executor's shutdown or its context's (a ``spin()`` entered
    after either returns at once); any other exception propagates.
    """
    races = 0
    while True:
        try:
            executor.spin()
            return races
        except InvalidHandle as exc:
            races += 1
            if on_race is not None:
                on_race(exc)
        except _rclpy.RCLError as exc:
            if not _DESTROYED_WAITABLE.search(str(exc)):
                raise
            races += 1
            if on_race is not None:
                on_race(exc)
        except RuntimeError as exc:
            if not _shut_down_under_it(executor, exc):
                raise
            return races
        except AttributeError as exc:
            if not _guard_gone_under_it(executor, exc):
                raise
            return races


def _guard_gone_under_it(executor: Executor, exc: AttributeError) -> bool:
    """
    Whether ``exc`` is Jazzy's executor reading its own guard condition after ``shutdown()`` dropped it.

    ``shutdown()`` from another thread sets the executor's guard conditions to None. Jazzy's
    rclpy lists them for the wait set without checking, so a spin that was gathering its
    entities at that moment enters ``None.handle`` (ros2/rclpy issue 968; Kilted checks). The
    executor is done, so the spin ends as the shutdown meant it to.
    """
    return "'NoneType' object has no attribute 'handle'" in str(exc) and bool(getattr(executor, "_is_shutdown", False))


def _shut_down_under_it(executor: Executor, exc: RuntimeError) -> bool:
    """
    Whether ``exc`` is MultiThreadedExecutor's pool refusing work because the executor was shut down.

    ``shutdown()`` from another thread (the node's stop) closes the thread pool while a
    ``spin_once`` that already took a ready entity is about to hand it over; the pool then
    raises instead of the spin returning. The executor is done either way, so the spin ends
    as a shutdown would end it, without a traceback in the node's output.
    """
    return "after shutdown" in str(exc) and bool(getattr(executor, "_is_shutdown", False))
