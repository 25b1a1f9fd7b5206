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

What the node tests feed a node besides: :func:`frame_with_depth` (a DirectNode's frame with
a flat depth and camera_info), :class:`DepthFeed` (image, registered depth and camera_info
over DDS), :class:`TrackGoal` (one ``track`` action goal and its feedback) and
:func:`planner_node` (the node a planner talks to, spun by :func:`spinning`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
import threading
import time
from typing import Any

import numpy as np
from scenes import random_scene, SceneCamera, stamped_image

W, H = 32, 24
FX, FY, CX, CY = 40.0, 40.0, 15.5, 11.5  # the camera of good_image's frames
FRAME = "fuzz_camera"  # their frame
CAMERA_FRAME = "camera_color_optical_frame"  # DepthFeed's, a registered depth camera's


# The harnesses publish a frame once and command it later, or stamp it long ago, as a still
# camera would: the node's default max_image_age (1 s) refuses a frame that old, which
# test_node_camera_health.py tests. Where the age is not the subject, any age is taken.
STILL_CAMERA = {"max_image_age": 0.0}


def action_client(node: Any, action_type: Any, name: str, **kwargs: Any) -> Any:
    """
    Return rclpy's ActionClient of ``name``, safe to make on a node that an executor already spins.

    Kilted's ActionClient joins its node's wait set before it has its lock, and an executor
    spinning that node may ask it for its entities in between: the spin thread dies of an
    AttributeError, and no goal response is ever taken again (ros2/rclpy issue 1589, fixed
    upstream after the wheels here). The lock is there before the client joins.
    """
    from rclpy.action import ActionClient

    class _LockedFirst(ActionClient):
        """The same client, with its lock made before rclpy's __init__ adds it to the wait set."""

        def __init__(self, *args: Any, **options: Any) -> None:
            self._lock = threading.Lock()
            super().__init__(*args, **options)

    return _LockedFirst(node, action_type, name, **kwargs)


def held_parameters(client: Any, names: list[str], timeout: float = 60.0) -> dict[str, Any]:
    """
    Return what a node holds for ``names``, read through rclpy's AsyncParameterClient ``client``.

    The get_parameters call ``ros2 param get`` makes, in-process: for a test where no verb
    is under test.
    """
    from rclpy.parameter import parameter_value_to_python

    future = client.get_parameters(names)
    wait_until(future.done, timeout, "the node's get_parameters answer")
    return {name: parameter_value_to_python(value) for name, value in zip(names, future.result().values)}


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
    from m2sa_ros.rclpy_support.executor_spin import spin_through_destroyed_entities
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
        from m2sa_ros.rclpy_support.executor_spin import spin_through_destroyed_entities

        self.thread = threading.Thread(target=spin_through_destroyed_entities, args=(self.executor,), daemon=True)
        self.thread.start()

    def add_node(self, segmenter: Any, namespace: str = "", **params: Any):
        from m2sa_ros.perception_node import PerceptionNode
        from rclpy.parameter import Parameter

        params = {"autostart": False, "wait_for_image": 0.2, "max_queue": 4, **STILL_CAMERA, **params}
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
        """Publish an image and wait until the node holds it as its latest frame (still encoded, if compressed)."""
        before = node.camera().latest.peek()
        pub.publish(msg)
        wait_until(lambda: getattr(node.camera().latest.peek(), "key", None) != getattr(before, "key", None), 10,
                   "the node to receive the image")

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

        params = {"autostart": False, "wait_for_image": 0.0, "max_queue": 8, **STILL_CAMERA, **params}
        self.segmenter = segmenter
        self.node = PerceptionNode(context=context, namespace=namespace, segmenter_factory=lambda _p, _s: segmenter,
                                   parameter_overrides=[Parameter(k, value=v) for k, v in params.items()])
        assert self.node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        assert self.node.trigger_activate() == TransitionCallbackReturn.SUCCESS
        self.results: list[Any] = []
        self._cond = threading.Condition()
        real_pub = self.node.camera().outputs.result
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
        self.node._intake.on_command(String(data=text))
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


def now_ns(node) -> int:
    """Return the node's clock now, in ns: the stamp of a frame taken now."""
    return node.get_clock().now().nanoseconds


# ----------------------------------------------------------------------------- depth for good_image's frames
def flat_depth(stamp_ns: int, metres: float, frame_id: str = FRAME):
    """Return a W x H 32FC1 depth image, a wall ``metres`` away, stamped ``stamp_ns``."""
    from sensor_msgs.msg import Image

    depth = np.full((H, W), metres, np.float32)
    msg = Image(height=H, width=W, encoding="32FC1", step=W * 4)
    msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(stamp_ns, 10**9)
    msg.header.frame_id = frame_id
    msg.data = depth.tobytes()
    return msg


def camera_info(stamp_ns: int):
    """Return the W x H camera's CameraInfo (FX, FY, CX, CY in FRAME) stamped ``stamp_ns``."""
    from sensor_msgs.msg import CameraInfo

    info = CameraInfo(width=W, height=H, k=[FX, 0.0, CX, 0.0, FY, CY, 0.0, 0.0, 1.0])
    info.header.stamp.sec, info.header.stamp.nanosec = divmod(stamp_ns, 10**9)
    info.header.frame_id = FRAME
    return info


def frame_with_depth(harness: DirectNode, stamp_s: int, metres: float, frame_id: str = FRAME) -> int:
    """Hand ``harness``'s node a flat depth, its camera_info and good_image at ``stamp_s``; the stamp in ns."""
    stamp_ns = stamp_s * 10**9
    harness.node._on_depth(flat_depth(stamp_ns, metres, frame_id))
    harness.node._on_camera_info(camera_info(stamp_ns))
    harness.node._on_image(good_image(stamp_s))
    return stamp_ns


# ----------------------------------------------------------------------------- over DDS: depth, tracks
def _depth_image(depth: np.ndarray, stamp_ns: int, frame_id: str = CAMERA_FRAME):
    from sensor_msgs.msg import Image

    msg = Image(height=depth.shape[0], width=depth.shape[1], encoding="32FC1", step=depth.shape[1] * 4)
    msg.header.frame_id = frame_id
    msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(int(stamp_ns), 10**9)
    msg.data = np.ascontiguousarray(depth, dtype="<f4").tobytes()
    return msg


def _camera_info_of(camera, stamp_ns: int, frame_id: str = CAMERA_FRAME):
    from sensor_msgs.msg import CameraInfo

    info = CameraInfo(width=camera.width, height=camera.height, k=camera.k)
    info.header.frame_id = frame_id
    info.header.stamp.sec, info.header.stamp.nanosec = divmod(int(stamp_ns), 10**9)
    return info


class DepthFeed:
    """
    Start a node over ``model`` and publish its colour image, registered depth and camera_info.

    Depth and camera_info go out first and are waited for until the node holds both, so the
    command or tracked frame that follows finds them: over DDS the three topics arrive in any
    order. Every message is in ``frame_id``, as a registered depth camera's are.
    """

    def __init__(self, graph: Graph, model, frame_id: str = CAMERA_FRAME, **params) -> None:
        from sensor_msgs.msg import CameraInfo, Image

        self.graph, self.frame_id = graph, frame_id
        self.node = graph.add_node(model, depth_tolerance=0.01, **params)
        graph.start(self.node)
        self.images = graph.publisher(Image, "image", 1)
        self.depth_pub = graph.publisher(Image, "depth", 5)
        self.info_pub = graph.publisher(CameraInfo, "camera_info", 5)

    def send_depth(self, stamp: int, depth: np.ndarray, camera=SceneCamera) -> None:
        """Publish ``depth`` (H x W metres) and ``camera``'s camera_info at ``stamp``; wait for both."""
        node = self.node
        self.info_pub.publish(_camera_info_of(camera, stamp, self.frame_id))
        self.depth_pub.publish(_depth_image(depth, stamp, self.frame_id))
        wait_until(lambda: node.camera().depth.nearest(stamp, 0) is not None
                   and node.camera().camera_info.nearest(stamp, 0) is not None, 10, "depth and camera_info")

    def send_flat_depth(self, stamp: int, metres: float) -> None:
        """Publish a wall ``metres`` away across the whole of a scenes.W x scenes.H image."""
        self.send_depth(stamp, np.full((SceneCamera.height, SceneCamera.width), metres, np.float32))

    def send_image(self, stamp: int, rgb: np.ndarray) -> None:
        """Publish ``rgb`` (H x W x 3) at ``stamp`` and wait until it is the node's latest frame."""
        self.graph.publish_frame(self.node, self.images, stamped_image(rgb, stamp, frame_id=self.frame_id))

    def send_scene(self, stamp: int, scene, sd, depth: np.ndarray | None = None) -> None:
        """Publish one synthetic scene (synthetic_scene's ``scene``, ``sd``): its depth (or ``depth``), its image."""
        self.send_depth(stamp, sd.depth if depth is None else depth, sd.camera)
        self.send_image(stamp, scene.image)


class TrackGoal:
    """One Track goal from the test client: its feedback as it comes, and its one result."""

    def __init__(self, graph: Graph, client: Any, **fields: Any) -> None:
        from m2sa_ros.action import Track

        self.feedback: list = []
        self._lock = threading.Lock()
        future = client.send_goal_async(Track.Goal(**fields), feedback_callback=self._on_feedback)
        self.handle = wait_until(lambda: future.done() and future.result(), 30, "goal acceptance")
        assert self.handle.accepted
        self._result = self.handle.get_result_async()

    def _on_feedback(self, msg: Any) -> None:
        with self._lock:
            self.feedback.append(msg.feedback)

    def seqs(self) -> list[int]:
        with self._lock:
            return [f.frame_seq for f in self.feedback]

    def wait_frames(self, n: int, timeout: float = 60.0) -> None:
        wait_until(lambda: len(self.seqs()) >= n, timeout, f"{n} feedback messages")

    def result(self, timeout: float = 60.0) -> Any:
        return wait_until(lambda: self._result.done() and self._result.result(), timeout, "the track's result")


def track_client(graph: Graph):
    """Return an action client of the graph's ``track`` action, once its server is ready."""
    from m2sa_ros.action import Track

    client = action_client(graph.client, Track, "track")
    wait_until(client.server_is_ready, 10, "the track action")
    return client


def track_through_depths(feed: DepthFeed, request_id: str, depths: tuple[float, ...]) -> tuple[Any, list[int]]:
    """
    Track "the mug" over one frame per depth, then cancel; return the ended TrackGoal and each frame's stamp.

    Each frame is a new random scene before a flat wall ``depths[i]`` metres away:
    the first gets the answer, the others are tracked.
    """
    goal, stamps = None, []
    for i, metres in enumerate(depths):
        stamp = now_ns(feed.node)
        stamps.append(stamp)
        feed.send_flat_depth(stamp, metres)
        feed.send_image(stamp, random_scene(seed=1 + i))
        if goal is None:
            goal = TrackGoal(feed.graph, track_client(feed.graph), command="the mug", request_id=request_id)
        goal.wait_frames(1 + i)
    goal.handle.cancel_goal_async()
    goal.result()
    return goal, stamps


# ----------------------------------------------------------------------------- the node a planner talks to
def planner_node(ros_context, seg: Any, namespace: str, **params):
    """
    Build the perception node a planner talks to.

    It autostarts over ``seg``, waits for no image and matches depth within 10 ms;
    ``params`` are further parameters (``target_frame``, ...).
    """
    from m2sa_ros.perception_node import PerceptionNode
    from rclpy.parameter import Parameter

    params = {"wait_for_image": 0.0, "depth_tolerance": 0.01, **STILL_CAMERA, **params}
    return PerceptionNode("planner_target", context=ros_context, namespace=namespace,
                          segmenter_factory=lambda _p, _s: seg,
                          parameter_overrides=[Parameter(k, value=v) for k, v in params.items()])


def give_a_frame_with_depth(node) -> None:
    """
    Wait until the spinning node is active, then hand it the frame every command uses.

    good_image at 4 s with flat_depth (2 m) and camera_info.
    """
    for _ in range(300):
        if node.lifecycle_state() == "active":
            break
        time.sleep(0.05)
    node._on_depth(flat_depth(4 * 10**9, 2.0))
    node._on_camera_info(camera_info(4 * 10**9))
    node._on_image(good_image(4))
