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
Goal statuses published again while a goal runs, and only then (m2sa_ros/rclpy_support/goal_status_repeat.py).

An rclpy action server and a plain subscriber to its status topic, in one process: what a
client that dropped the first statuses would see on the wire.
"""

from __future__ import annotations

import threading

from node_harness import action_client, spinning, wait_until
import pytest

pytestmark = [pytest.mark.ros, pytest.mark.integration]


def test_a_running_goal_has_its_status_published_again_until_it_ends(module_context):
    from action_msgs.msg import GoalStatus, GoalStatusArray
    from m2sa_ros.action import Segment
    from m2sa_ros.rclpy_support.goal_status_repeat import GoalStatusRepeater
    from rclpy.action import ActionServer
    from rclpy.callback_groups import ReentrantCallbackGroup
    from rclpy.node import Node
    from rclpy.qos import qos_profile_action_status_default

    node = Node("status_repeat_server", context=module_context)
    repeater = GoalStatusRepeater()
    release = threading.Event()

    def execute(goal_handle):
        with repeater.running(goal_handle):
            release.wait(30)
        goal_handle.succeed()
        return Segment.Result()

    group = ReentrantCallbackGroup()
    ActionServer(node, Segment, "repeat_segment", execute_callback=execute, callback_group=group)
    ticks: list[int] = []  # each timer tick's repeat(): how many servers it published

    def tick() -> None:
        ticks.append(repeater.repeat())

    node.create_timer(0.2, tick, callback_group=group)
    statuses: list[dict[bytes, int]] = []
    node.create_subscription(GoalStatusArray, "repeat_segment/_action/status",
                             lambda msg: statuses.append({bytes(s.goal_info.goal_id.uuid): s.status
                                                          for s in msg.status_list}),
                             qos_profile_action_status_default, callback_group=group)
    client = action_client(node, Segment, "repeat_segment", callback_group=group)
    try:
        with spinning(module_context, node):
            assert client.wait_for_server(timeout_sec=30)
            sent = client.send_goal_async(Segment.Goal(command="press it"))
            handle = wait_until(lambda: sent.done() and sent.result(), 30, "the goal response")
            goal_id = bytes(handle.goal_id.uuid)
            executing = GoalStatus.STATUS_EXECUTING
            # The server's own transitions publish one executing status; the rest are repeats.
            wait_until(lambda: sum(seen.get(goal_id) == executing for seen in statuses) >= 4, 10,
                       "the executing status published again")
            release.set()
            result = handle.get_result_async()
            wait_until(result.done, 30, "the result")
            assert result.result().status == GoalStatus.STATUS_SUCCEEDED
            wait_until(lambda: statuses and statuses[-1].get(goal_id) == GoalStatus.STATUS_SUCCEEDED, 10,
                       "the succeeded status")
            ended_at, ticked = len(statuses), len(ticks)
            assert repeater.repeat() == 0  # nothing runs: nothing to repeat
            wait_until(lambda: len(ticks) >= ticked + 5, 10, "five periods of the timer")
            assert not any(ticks[ticked:]), ticks[ticked:]
            # On the wire too: the next status from the server, after those ticks, is the next goal's.
            sent = client.send_goal_async(Segment.Goal(command="press it again"))
            later = wait_until(lambda: sent.done() and sent.result(), 30, "the next goal's response")
            wait_until(lambda: len(statuses) > ended_at, 10, "the next goal's status")
            assert bytes(later.goal_id.uuid) in statuses[ended_at], statuses[ended_at:]
            later_result = later.get_result_async()
            wait_until(later_result.done, 30, "the next goal's result")
    finally:
        client.destroy()
        node.destroy_node()
