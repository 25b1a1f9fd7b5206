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
The perception node driven by hand: tests call its callbacks and read its results.

Shared by the fuzzing, fault-injection and heap tests. No executor spins: the test is
the executor; the worker thread is real, so results arrive asynchronously and are
captured at the node's result publisher. For tests that need the node served as a
launched process serves it (lifecycle transitions, action clients), :func:`spinning`;
for waiting on what such a node does, :func:`wait_until`.

:class:`Graph` is the same in-process harness over DDS: perception nodes and a client
node spun together, the client publishing and collecting over loopback (the ``graph``
fixture of tests/ros/conftest.py gives one per test).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
import threading
import time
from typing import Any

import numpy as np

W, H = 32, 24


def wait_until(predicate: Callable[[], Any], timeout: float = 30.0, what: str = "condition") -> Any:
    """
    ``predicate()``'s first true value, polled every 20 ms.

    An AssertionError naming ``what`` when none comes within ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


@contextmanager
def spinning(context: Any, *nodes: Any, threads: int = 4) -> Iterator[Any]:
    """
    Serve ``nodes`` by a multi-threaded executor on a background thread, as in a launched process.

    The test can then block (a lifecycle transition, a client call) while
    callbacks run; the executor is shut down and its thread joined on the way out.
    """
    from m2sa_ros.executor_spin import spin_through_destroyed_entities
    from rclpy.executors import MultiThreadedExecutor

    executor = MultiThreadedExecutor(num_threads=threads, context=context)
    for node in nodes:
        executor.add_node(node)
    spinner = threading.Thread(target=spin_through_destroyed_entities, args=(executor,), daemon=True)
    spinner.start()
    try:
        yield executor
    finally:
        executor.shutdown()
        spinner.join(10)


class Graph:
    """Perception node(s) + a client node on one multi-threaded executor, spinning in a thread."""

    def __init__(self, context) -> None:
        from rclpy.executors import MultiThreadedExecutor
        from rclpy.node import Node

        self.context = context
        self.client = Node("test_client", context=context)
        self.executor = MultiThreadedExecutor(num_threads=6, context=context)
        self.executor.add_node(self.client)
        self.nodes: list[Any] = []
        self._lock = threading.Lock()
        from m2sa_ros.executor_spin import spin_through_destroyed_entities

        self.thread = threading.Thread(target=spin_through_destroyed_entities, args=(self.executor,), daemon=True)
        self.thread.start()

    def add_node(self, segmenter: Any, namespace: str = "", **params: Any):
        from m2sa_ros.perception_node import PerceptionNode
        from rclpy.parameter import Parameter

        params = {"autostart": False, "wait_for_image": 0.2, "max_queue": 4, **params}
        node = PerceptionNode(context=self.context, namespace=namespace,
                              segmenter_factory=lambda _params, _source: segmenter,
                              parameter_overrides=[Parameter(k, value=v) for k, v in params.items()])
        self.nodes.append(node)
        self.executor.add_node(node)
        return node

    def start(self, node) -> None:
        from rclpy.lifecycle import TransitionCallbackReturn

        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS

    def collect(self, msg_type, topic: str, qos: Any = 100) -> list:
        received: list = []
        self.client.create_subscription(msg_type, topic, lambda m: self._append(received, m), qos)
        return received

    def _append(self, target: list, msg: Any) -> None:
        with self._lock:
            target.append(msg)

    def publisher(self, msg_type, topic: str, depth: int = 100):
        from rclpy.qos import QoSProfile, ReliabilityPolicy

        pub = self.client.create_publisher(msg_type, topic,
                                           QoSProfile(depth=depth, reliability=ReliabilityPolicy.RELIABLE))
        wait_until(lambda: pub.get_subscription_count() > 0, 10, f"a subscriber on {topic}")
        return pub

    def publish_frame(self, node, pub, msg) -> None:
        """Publish an image and wait until the node holds it as its latest frame."""
        before = node.camera().latest.get()
        pub.publish(msg)
        wait_until(lambda: node.camera().latest.get() is not before, 10, "the node to receive the image")

    def close(self) -> None:
        self.executor.shutdown()
        for node in self.nodes:
            node.close()
        self.client.destroy_node()


class DirectNode:
    """
    A configured, active PerceptionNode whose callbacks the test calls itself.

    No executor spins: the test is the executor. The worker thread is real, so results
    arrive asynchronously; they are captured at the node's result publisher.
    """

    def __init__(self, context: Any, segmenter: Any, namespace: str = "", **params: Any) -> None:
        from m2sa_ros.perception_node import PerceptionNode
        from rclpy.lifecycle import TransitionCallbackReturn
        from rclpy.parameter import Parameter

        params = {"autostart": False, "wait_for_image": 0.0, "max_queue": 8, **params}
        self.segmenter = segmenter
        self.node = PerceptionNode(context=context, namespace=namespace, segmenter_factory=lambda _p, _s: segmenter,
                                   parameter_overrides=[Parameter(k, value=v) for k, v in params.items()])
        assert self.node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        assert self.node.trigger_activate() == TransitionCallbackReturn.SUCCESS
        self.results: list[Any] = []
        self._cond = threading.Condition()
        real_pub = self.node.camera().result_pub
        self._real_publish = real_pub.publish

        def publish(msg: Any) -> None:
            with self._cond:
                self.results.append(msg)
                self._cond.notify_all()
            self._real_publish(msg)

        real_pub.publish = publish

    def command(self, text: str, timeout: float = 30.0) -> Any:
        """
        Send one command through the topic callback; its single result.

        The node answers one request after another on one publisher, so a second answer to an
        earlier request would have been published before this command's result: every request
        id among the results so far must be there once (checked again at :meth:`close`).
        """
        from std_msgs.msg import String

        with self._cond:
            self.assert_one_result_per_request()
            n = len(self.results)
        self.node._on_command(String(data=text))
        with self._cond:
            assert self._cond.wait_for(lambda: len(self.results) > n, timeout), f"no result for {text[:50]!r}"
            self.assert_one_result_per_request()
            return self.results[n]

    def assert_one_result_per_request(self) -> None:
        from collections import Counter

        with self._cond:
            twice = [rid for rid, count in Counter(r.request_id for r in self.results).items() if count > 1]
        assert not twice, f"answered more than once: {twice}"

    def close(self) -> None:
        self.node.close()
        self.assert_one_result_per_request()


def image_msg(height: int, width: int, encoding: str, step: int, data: bytes, bigendian: int = 0,
              stamp: int = 7) -> Any:
    from sensor_msgs.msg import Image

    msg = Image(height=height, width=width, encoding=encoding, step=step, is_bigendian=bigendian)
    msg.header.stamp.sec, msg.header.frame_id = stamp, "fuzz_camera"
    msg.data = data
    return msg


def good_image(stamp: int = 1) -> Any:
    rgb = np.random.default_rng(stamp).integers(0, 256, (H, W, 3), dtype=np.uint8)
    return image_msg(H, W, "rgb8", W * 3, rgb.tobytes(), stamp=stamp)
