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
node_harness.action_client: an action client the tests may make on a node an executor already spins.

An executor spinning the node asks every waitable for its entities at each wait. Here
the moment that matters is made certain: the node asks the client for them the instant
the client joins it, which is where rclpy's own ActionClient (Kilted's wheel) has no lock
yet (ros2/rclpy issue 1589). A spin thread that asked then died, and a test's goal
responses were never taken again.
"""

from __future__ import annotations

from node_harness import action_client
import pytest

pytestmark = [pytest.mark.ros, pytest.mark.integration]


def _asking_node(ros_context):
    """Return a node that, like a spinning executor at the worst moment, asks each new waitable for its entities."""
    from rclpy.node import Node

    class AskingNode(Node):
        """Asks at once what an executor's next wait would ask."""

        def add_waitable(self, waitable):
            super().add_waitable(waitable)
            waitable.get_num_entities()

    return AskingNode("asking_node", context=ros_context)


def test_the_harness_client_answers_its_entities_the_moment_it_joins_its_node(ros_context):
    from m2sa_ros.action import Segment

    node = _asking_node(ros_context)
    try:
        client = action_client(node, Segment, "segment")
        assert client.get_num_entities().num_clients == 3  # send goal, cancel, result
        assert not client.server_is_ready()
    finally:
        node.destroy_node()
