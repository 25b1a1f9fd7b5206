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
The node's side of Nav2's lifecycle-manager bond: a heartbeat from activate to deactivate.

nav2_lifecycle_manager configures and activates every node it manages through the node's
lifecycle services, and right after each ``activate`` forms a bond with it: a
``bond/Status`` heartbeat both ways on the topic ``bond`` (relative: the manager and its
nodes share a namespace), with the managed node's *name* as the bond id. From then on, a
node whose heartbeat stops for ``bond_timeout`` (4 s by default) is taken as crashed and
the manager brings every node it manages down. A node that never answers the bond fails
the manager's bring-up ("unable to be reached ... by bond") half a ``bond_timeout`` after
its activation. Nav2's own lifecycle nodes (``nav2_util::LifecycleNode``) create their
side at the end of ``on_activate`` and destroy it in ``on_deactivate`` and at shutdown;
rclpy's LifecycleNode has no such side, so :class:`LifecycleBond` does the same, with bondpy.

bondpy is imported at the first activation, never before: a node that is not under a
manager does not need it, and a node without it (it is not on PyPI; a ROS install has it
as ``ros-<distro>-bondpy``) says so once and runs as before. Without a manager the bond
waits bondpy's connect timeout (10 s) and ends; nothing else changes.
"""

from __future__ import annotations

import threading
from typing import Any

BOND_TOPIC = "bond"  # nav2_lifecycle_manager's bond topic
# nav2_util::LifecycleNode's ``bond_heartbeat_period`` default on Jazzy and Kilted.
HEARTBEAT_PERIOD_S = 0.1
# Nav2's lifecycle nodes never time the manager out: they set bond's
# ``bond_disable_heartbeat_timeout`` parameter, so a manager that dies leaves them running.
# bondpy reads that parameter by declaring it at every heartbeat timeout, which raises
# the second time, so the node's side gets the same effect from a timeout it never
# reaches instead (a day; the manager's side keeps its own bond_timeout).
NODE_SIDE_HEARTBEAT_TIMEOUT_S = 86400.0
# How long stop() waits for the manager to acknowledge the end of a formed bond (bondcpp's
# destructor waits 100 ms); a bond no manager formed ends at once.
BREAK_ACK_WAIT_S = 0.25


class LifecycleBond:
    """
    The bond heartbeat of one node: :meth:`start` at activate, :meth:`stop` at deactivate and shutdown.

    Thread-safe: transitions run on the lifecycle services' threads, bondpy calls back
    from its own.
    """

    def __init__(self, node: Any) -> None:
        self._node = node
        self._lock = threading.Lock()
        self._bond: Any = None
        self._generation = 0  # which bond a late callback of bondpy belongs to
        self._formed = False
        self._unavailable = False  # bondpy missing: warned once, never tried again

    @property
    def active(self) -> bool:
        """Return True from :meth:`start` to :meth:`stop` (whether or not a manager answered)."""
        return self._bond is not None

    @property
    def formed(self) -> bool:
        """Return True once a manager's side answered the current bond."""
        return self._formed

    def start(self) -> None:
        """Start heartbeating on ``bond`` with the node's name as id (no-op if already started)."""
        with self._lock:
            if self._bond is not None or self._unavailable:
                return
            try:
                from bondpy.bondpy import Bond
            except ImportError as exc:
                self._unavailable = True
                self._node.get_logger().warning(
                    f"bondpy not found ({exc}): no bond heartbeat, so Nav2's lifecycle manager cannot "
                    f"manage this node (install ros-<distro>-bondpy); everything else works")
                return
            self._generation += 1
            generation = self._generation
            self._formed = False
            name = self._node.get_name()
            try:
                bond = Bond(self._node, BOND_TOPIC, name,
                            on_broken=lambda: self._on_broken(generation),
                            on_formed=lambda: self._on_formed(generation))
                bond.heartbeat_period = HEARTBEAT_PERIOD_S
                bond.heartbeat_timeout = NODE_SIDE_HEARTBEAT_TIMEOUT_S
                bond.start()
            except Exception as exc:  # noqa: BLE001 - a bond that cannot start must not fail the activation
                self._unavailable = True
                self._node.get_logger().warning(
                    f"no bond heartbeat ({type(exc).__name__}: {exc}), so Nav2's lifecycle manager cannot "
                    f"manage this node; everything else works")
                return
            self._bond = bond
        self._node.get_logger().debug(f"bond heartbeat started on {self._node.resolve_topic_name(BOND_TOPIC)} "
                                      f"(id {name})")

    def stop(self) -> None:
        """Break the bond (the manager hears it at once) and drop its publisher and subscription."""
        with self._lock:
            bond, self._bond = self._bond, None
            self._generation += 1
            self._formed = False
        if bond is None:
            return
        from rclpy.duration import Duration

        # A DEAD status now and every 50 ms until the manager acknowledges it, waited for a
        # moment, as bondcpp's destructor does: a publisher destroyed right after its last
        # message can take the message with it, and the manager would then wait out its
        # bond_timeout and take a deactivated node for a crashed one.
        try:
            bond.break_bond()
            bond.wait_until_broken(Duration(seconds=BREAK_ACK_WAIT_S))
        finally:
            # bondpy destroys its subscription and publisher but leaves them in the node's
            # lists, where their destroyed event handlers make every executor pass raise
            # InvalidHandle (the node would go deaf): the node destroys them itself.
            self._node.destroy_subscription(bond.sub)
            try:
                bond.shutdown()
            finally:
                self._node.destroy_publisher(bond.pub)

    def _on_formed(self, generation: int) -> None:
        with self._lock:
            if generation != self._generation:
                return
            self._formed = True
        self._node.get_logger().info(f"bond with the lifecycle manager formed (id {self._node.get_name()})")

    def _on_broken(self, generation: int) -> None:
        with self._lock:
            if generation != self._generation:
                return  # a bond stop() ended
            formed = self._formed
            self._formed = False
        if formed:
            # Only a manager that broke the bond gets here (the node's side never times out).
            self._node.get_logger().info("the lifecycle manager broke the bond; the node stays in its state "
                                         "until the manager or a user changes it")
        else:
            self._node.get_logger().debug("no lifecycle manager formed the bond within bondpy's connect timeout")
