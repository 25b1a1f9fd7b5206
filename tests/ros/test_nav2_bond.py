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
Nav2's lifecycle manager can manage the node: the manager's side played exactly.

nav2_lifecycle_manager (Jazzy, Kilted) brings a node up with ``change_state`` configure,
then activate, each call waited for without a timeout and followed by ``get_state``
(within ``service_timeout``, 5 s); right after activate it forms a bond (bondcpp, topic
``bond`` in the manager's namespace, id = the node's name, heartbeat period 0.1 s,
heartbeat timeout = ``bond_timeout``, 4 s by default) and fails the bring-up unless the
bond forms within ``bond_timeout / 2``. From then on a bond that breaks means a crashed
node. Here the manager's side is rclpy service clients and a bondpy Bond with those same
names and numbers (bondpy and bondcpp speak the same bond/Status protocol), against the
node launched with ``autostart:=false`` from a colcon install space, as a Nav2 bring-up
launches its nodes; and against the node in the test's own process for what needs no
process (the bond ending at shutdown, a node without bondpy).
"""

from __future__ import annotations

import os
import re
import signal
import sys
import threading
import time
from typing import Any

from fake_models import BoxSegmenter
from node_harness import spinning, wait_until
import pytest
from ros_install import LaunchProcess, require_upstream

pytestmark = [pytest.mark.ros, pytest.mark.integration]

NODE = "perception_node"
# nav2_lifecycle_manager's defaults (lifecycle_manager.cpp, Jazzy and Kilted).
BOND_TIMEOUT_S = 4.0
BOND_HEARTBEAT_PERIOD_S = 0.1
SERVICE_TIMEOUT_S = 5.0
# lifecycle_msgs/msg/State and Transition ids.
UNCONFIGURED, INACTIVE, ACTIVE = 1, 2, 3
CONFIGURE, ACTIVATE, DEACTIVATE = 1, 3, 4


class Manager:
    """The calls nav2_lifecycle_manager makes for one node, from a node in the managed node's namespace."""

    def __init__(self, node: Any, node_name: str) -> None:
        from lifecycle_msgs.srv import ChangeState, GetState

        self.node = node
        self.node_name = node_name
        # LifecycleServiceClient: "<node_name>/change_state", relative to the manager's namespace.
        self._change = node.create_client(ChangeState, f"{node_name}/change_state")
        self._get = node.create_client(GetState, f"{node_name}/get_state")
        self.bond: Any = None
        # When the current bond took each of the node's heartbeats after the message that formed
        # it (bondpy's Heartbeat, which restarts its heartbeat timeout; the first one starts it).
        self.heartbeats: list[float] = []

    def wait_for_node(self, timeout: float) -> None:
        """Block until get_state is there (the node's start-up), as LifecycleServiceClient's constructor does."""
        assert self._get.wait_for_service(timeout_sec=timeout), f"no {self.node_name}/get_state"

    def get_state(self) -> int:
        from lifecycle_msgs.srv import GetState

        future = self._get.call_async(GetState.Request())
        wait_until(future.done, SERVICE_TIMEOUT_S, "get_state within the manager's service_timeout")
        return future.result().current_state.id

    def change_state(self, transition: int, expected: int, timeout: float = 300.0) -> None:
        """Change the state, then get it, as changeStateForNode does (no timeout in Nav2; bounded here)."""
        from lifecycle_msgs.srv import ChangeState

        assert self._change.wait_for_service(timeout_sec=SERVICE_TIMEOUT_S)
        request = ChangeState.Request()
        request.transition.id = transition
        future = self._change.call_async(request)
        wait_until(future.done, timeout, f"change_state {transition}")
        assert future.result().success, f"transition {transition} failed"
        assert self.get_state() == expected

    def create_bond(self) -> bool:
        """Form a bond on "bond" with the node's name as id, as createBondConnection does, within bond_timeout / 2."""
        from bondpy.bondpy import Bond
        from rclpy.duration import Duration

        self.bond = Bond(self.node, "bond", self.node_name)
        self.bond.heartbeat_timeout = BOND_TIMEOUT_S
        self.bond.heartbeat_period = BOND_HEARTBEAT_PERIOD_S
        heartbeats: list[float] = []
        self.heartbeats = heartbeats
        take_heartbeat = self.bond.Heartbeat  # called by bondpy's state machine for each heartbeat once formed

        def heartbeat() -> None:
            heartbeats.append(time.monotonic())
            take_heartbeat()

        self.bond.Heartbeat = heartbeat
        self.bond.start()
        return self.bond.wait_until_formed(Duration(seconds=BOND_TIMEOUT_S / 2))

    def timed_for(self) -> float:
        """Seconds from the bond's first heartbeat, where its timeout starts counting, to its last (0 before)."""
        return self.heartbeats[-1] - self.heartbeats[0] if self.heartbeats else 0.0

    def drop_bond(self) -> None:
        """Drop the bond as bondcpp's destructor does; bondpy leaves its destroyed entities, so they go too."""
        if self.bond is not None:
            self.node.destroy_subscription(self.bond.sub)
            self.bond.shutdown()
            self.node.destroy_publisher(self.bond.pub)
            self.bond = None


def _node_states(diagnostics: list, node: str) -> list[str]:
    """Return the lifecycle states ``node`` (fully qualified name) reported in ``diagnostics``, oldest first."""
    return [{kv.key: kv.value for kv in status.values}.get("state", "")
            for array in list(diagnostics) for status in array.status
            if status.name.startswith(f"{node}: ") and status.name.endswith(": m2sa perception")]  # not a camera's


def _wait_broken(bond: Any, timeout: float) -> float:
    """Seconds until ``bond`` is broken (an AssertionError after ``timeout``)."""
    start = time.monotonic()
    wait_until(bond.is_broken, timeout, "the bond to break")
    return time.monotonic() - start


@pytest.mark.slow
def test_a_lifecycle_manager_brings_the_launched_node_up_bonds_and_sees_it_die(ros_shell, tmp_path, ros_context):
    require_upstream("bondpy", "launch_ros")
    from diagnostic_msgs.msg import DiagnosticArray
    from m2sa_ros.params.topic_qos import diagnostics_qos
    from rclpy.node import Node

    ns = f"/nav2_{os.getpid()}"
    env = {**ros_shell, "ROS_LOG_DIR": str(tmp_path / "ros_log"), "RCUTILS_COLORIZED_OUTPUT": "0"}
    launch = LaunchProcess(["ros2", "launch", "m2sa_ros", "perception.launch.py", f"namespace:={ns}",
                            "autostart:=false"], env)
    manager_node = Node("lifecycle_manager", namespace=ns, context=ros_context)
    manager = Manager(manager_node, NODE)
    diagnostics: list = []
    manager_node.create_subscription(DiagnosticArray, "/diagnostics", diagnostics.append, diagnostics_qos())
    try:
        with spinning(ros_context, manager_node):
            manager.wait_for_node(timeout=120)
            # autostart:=false leaves the node for the manager: unconfigured, no model loaded. The
            # node's second /diagnostics (its 1 s timer's, from start-up) comes a period after the
            # moment autostart's configure would have begun, which it would report as configuring.
            wait_until(lambda: len(_node_states(diagnostics, f"{ns}/{NODE}")) >= 2, 30, "two of the node's diagnostics")
            assert set(_node_states(diagnostics, f"{ns}/{NODE}")) == {"unconfigured"}, launch.output
            assert manager.get_state() == UNCONFIGURED, launch.output
            assert "loaded on" not in launch.output and "active: listening" not in launch.output, launch.output

            manager.change_state(CONFIGURE, INACTIVE)  # loads the model: Nav2 waits for it, however long
            manager.change_state(ACTIVATE, ACTIVE)
            assert manager.create_bond(), "bond not formed within bond_timeout / 2:\n" + launch.output
            launch.wait_for_line(f"bond with the lifecycle manager formed (id {NODE})", timeout=10)
            # The node's heartbeat holds the bond past its timeout: the bond keeps taking the node's
            # heartbeats (50 at Nav2's period) until one comes bond_timeout + 1 s after the first,
            # from which its timeout counts.
            wait_until(lambda: manager.bond.is_broken() or manager.timed_for() > BOND_TIMEOUT_S + 1.0, 30,
                       "a heartbeat bond_timeout + 1 s after the bond's first")
            assert not manager.bond.is_broken(), launch.output

            # Nav2's pause / reset: deactivate; the node ends its side at once (a DEAD status,
            # not a missed heartbeat), and the manager bonds again after the next activate.
            manager.change_state(DEACTIVATE, INACTIVE)
            _wait_broken(manager.bond, 30.0)  # a bound for a loaded machine: sister_died_first says how
            assert manager.bond.sister_died_first, "the node's side did not break the bond at deactivate"
            manager.drop_bond()
            manager.change_state(ACTIVATE, ACTIVE)
            assert manager.create_bond(), "no bond after the second activate:\n" + launch.output

            # A crash: SIGKILL, no goodbye. The bond breaks on the missed heartbeat, within the
            # timeout. (A bond times out only once a heartbeat has come after the one that formed
            # it, so the node runs until one has, as a crash comes some time into a run.)
            wait_until(lambda: manager.heartbeats, 10, "a heartbeat after the one that formed the bond")
            pid = int(re.search(rf"\[{NODE}-1\]: process started with pid \[(\d+)\]", launch.output).group(1))
            os.kill(pid, signal.SIGKILL)
            broke_after = _wait_broken(manager.bond, 30.0)
            assert not manager.bond.sister_died_first
            # Not before the timeout (the bond waited for the heartbeats); how much after depends
            # on the machine's load, so only the wait above bounds it.
            assert broke_after >= BOND_TIMEOUT_S - 0.5, broke_after
    finally:
        manager.drop_bond()
        manager_node.destroy_node()
        launch.kill()
    assert "Traceback" not in launch.output, launch.output


@pytest.fixture
def in_process(ros_context):
    """Yield an unconfigured PerceptionNode (box model) and a manager node beside it, both spinning."""
    from m2sa_ros.perception_node import PerceptionNode
    from rclpy.node import Node
    from rclpy.parameter import Parameter

    name = f"nav2_bond_node_{os.getpid()}"
    node = PerceptionNode(name, context=ros_context, segmenter_factory=lambda _p, _s: BoxSegmenter(),
                          parameter_overrides=[Parameter("autostart", value=False)])
    manager_node = Node(f"lifecycle_manager_{os.getpid()}", context=ros_context)
    manager = Manager(manager_node, name)
    try:
        with spinning(ros_context, node, manager_node):
            yield node, manager
    finally:
        manager.drop_bond()
        manager_node.destroy_node()
        node.close()


def test_the_bond_ends_when_the_node_shuts_down(in_process):
    """main() calls stop() on SIGINT / SIGTERM: the bond breaks with the node's DEAD once pending work is answered."""
    require_upstream("bondpy")
    node, manager = in_process
    manager.change_state(CONFIGURE, INACTIVE)
    manager.change_state(ACTIVATE, ACTIVE)
    assert manager.create_bond()
    node.stop("node shutting down (SIGINT)")
    # A bound for a loaded machine, not a measure: sister_died_first proves the bond broke on
    # the node's DEAD message; a lost one would break it at the bond's timeout without it.
    _wait_broken(manager.bond, 30.0)
    assert manager.bond.sister_died_first


def test_without_bondpy_the_node_warns_once_and_runs(in_process, capfd, monkeypatch):
    from rclpy.lifecycle import TransitionCallbackReturn

    monkeypatch.setitem(sys.modules, "bondpy", None)  # import bondpy raises ImportError
    monkeypatch.setitem(sys.modules, "bondpy.bondpy", None)
    node, _manager = in_process
    assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
    for _ in range(2):
        assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
        assert node.trigger_deactivate() == TransitionCallbackReturn.SUCCESS
    warnings = [line for line in capfd.readouterr().err.splitlines() if "bondpy not found" in line]
    assert len(warnings) == 1, warnings
    assert "Nav2's lifecycle manager cannot manage this node" in warnings[0]


def test_destroying_an_active_node_ends_its_heartbeat(ros_context, capfd, monkeypatch):
    """A node destroyed while active (no deactivate first) stops the bond's thread with it."""
    require_upstream("bondpy")
    from rclpy.lifecycle import TransitionCallbackReturn
    from rclpy.parameter import Parameter

    from m2sa_ros.perception_node import PerceptionNode

    node = PerceptionNode(f"nav2_destroyed_{os.getpid()}", context=ros_context,
                          segmenter_factory=lambda _p, _s: BoxSegmenter(),
                          parameter_overrides=[Parameter("autostart", value=False)])
    assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
    assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
    heartbeat = node._bond._bond.thread  # bondpy's thread, heartbeating every 0.1 s
    assert heartbeat.is_alive()
    raised: list = []  # a thread's uncaught exception (pytest would only warn of it)
    monkeypatch.setattr(threading, "excepthook", raised.append)
    node.destroy_node()
    # Ended, not left sending on the destroyed node (a thread that raised is hooked before it ends).
    wait_until(lambda: not heartbeat.is_alive(), 10, "the bond's heartbeat thread to end")
    assert not raised, [f"{args.thread.name}: {args.exc_type.__name__}: {args.exc_value}" for args in raised]
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Exception in thread" not in err, err
