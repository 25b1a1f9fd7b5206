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
Replaying a bag through a live node over DDS, on the bag's own time.

The node runs as a subprocess under a private namespace (or one already running is
used); images and commands go out with their recorded spacing, ``/clock`` carries the
bag time, and every result is recorded (see the package docstring of ``evaluate``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
import math
from pathlib import Path
import sys
import threading
import time
from typing import Any

from m2sa_ros.bag.bag_io import (
    bag_info,
    COMMAND_STAMPED_TOPIC,
    COMMAND_STAMPED_TYPE,
    decode,
    iter_messages,
    message_typestore,
    RESULT_TOPIC,
    RESULT_TYPE,
)
from m2sa_ros.bag.ground_truth import BagError, GroundTruth
from m2sa_ros.bag.node_subprocess import NodeProcess
from m2sa_ros.messages.image_conversion import stamp_ns


# --------------------------------------------------------------------------- replay
@dataclass
class Outcome:
    """One command of the bag: when it went out and what came back."""

    index: int
    command: str
    bag_time_ns: int
    expected_stamp_ns: int | None  # the frame it is about; None when the bag has none
    image_in_bag: bool
    request_id: str = ""
    sent_at: float = math.nan  # monotonic seconds
    received_at: float = math.nan
    result: Any = None  # rclpy SegmentationResult
    problems: list[str] = field(default_factory=list)

    @property
    def latency_ms(self) -> float:
        return (self.received_at - self.sent_at) * 1e3 if self.result is not None else math.nan


@dataclass
class ReplayOptions:
    namespace: str
    rate_factor: float = 1.0
    settle_s: float = 0.1
    max_in_flight: int = 4
    result_timeout_s: float = 300.0
    startup_timeout_s: float = 300.0


def check_bag(bag: Path, truth: GroundTruth | None, image_topic: str, command_topic: str) -> int:
    """Return the number of commands in ``bag``; BagError when it has none or disagrees with its ground truth."""
    topics = bag_info(bag)["topics"]
    n_commands = topics.get(command_topic, {}).get("count", 0)
    if not n_commands:
        raise BagError(f"{bag} has no messages on {command_topic} (topics: {', '.join(sorted(topics)) or 'none'})")
    if not topics.get(image_topic, {}).get("count", 0):
        print(f"m2sa-bag-eval: warning: {bag} has no images on {image_topic}", file=sys.stderr)
    if truth is not None and len(truth.commands) != n_commands:
        raise BagError(f"{bag}: {n_commands} command messages but the ground truth lists {len(truth.commands)}")
    return n_commands


class BagClock:
    """
    Bag time for /clock while a bag is replayed at ``factor`` times its speed.

    Anchored at each message's bag time when it is published, it runs on between
    messages but never past the next message's time (``hold_until``), so the node's
    clock cannot overtake a message that is late because the replayer waited for the
    node. Monotonic by construction: messages come in bag order.
    """

    def __init__(self, factor: float = 1.0) -> None:
        self.factor = factor
        self._lock = threading.Lock()
        self._anchor: tuple[float, int] | None = None  # (monotonic s, bag ns)
        self._limit: int | None = None

    def advance_to(self, bag_ns: int) -> None:
        with self._lock:
            self._anchor = (time.monotonic(), int(bag_ns))
            if self._limit is not None and self._limit < bag_ns:
                self._limit = int(bag_ns)

    def hold_until(self, bag_ns: int) -> None:
        with self._lock:
            self._limit = int(bag_ns)

    def now_ns(self) -> int | None:
        with self._lock:
            if self._anchor is None:
                return None
            wall, bag = self._anchor
            estimate = bag + int((time.monotonic() - wall) * self.factor * 1e9)
            return estimate if self._limit is None else min(estimate, max(self._limit, bag))


CLOCK_PERIOD_S = 0.01  # /clock at 100 Hz of wall time


class Pacer:
    """
    When each bag message goes out.

    Its recorded spacing (divided by ``factor``), shifted by every wait on the node,
    and at least ``settle_s`` after the last frame for a command. Drives the bag
    clock: it is held at a message's time until that message is published, so the
    node's clock never runs ahead of a late message.
    """

    def __init__(self, clock: BagClock, factor: float, settle_s: float) -> None:
        self.clock = clock
        self.factor = factor
        self.settle_s = settle_s
        self._t0_bag: int | None = None
        self._t0 = 0.0
        self._shift = 0.0
        self._last_image_at = -math.inf

    def wait_for(self, time_ns: int, after_frame: bool = False) -> None:
        """
        Sleep until the message of bag time ``time_ns`` is due, then move the clock to it.

        ``after_frame``: the message must follow the last frame by ``settle_s`` (a command,
        so that its frame is in the node before it).
        """
        if self._t0_bag is None:
            self._t0_bag, self._t0 = time_ns, time.monotonic()
        self.clock.hold_until(time_ns)
        due = self._t0 + self._shift + (time_ns - self._t0_bag) / 1e9 / self.factor
        if after_frame:
            due = max(due, self._last_image_at + self.settle_s)
        now = time.monotonic()
        if now > due:
            self._shift += now - due  # waited on the node: keep the recorded spacing from here on
        else:
            time.sleep(due - now)
        self.clock.advance_to(time_ns)

    def frame_sent(self) -> None:
        self._last_image_at = time.monotonic()


class Replayer:
    """Publishes a bag's frames, commands and /clock to a node and collects its results."""

    def __init__(self, options: ReplayOptions, context: Any, results_bag: Path | None) -> None:
        from m2sa_ros.msg import Command, SegmentationResult
        from rclpy.node import Node
        from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
        from rosgraph_msgs.msg import Clock
        from sensor_msgs.msg import Image

        self.options = options
        self.context = context
        ns = options.namespace.rstrip("/")
        self.node = Node("m2sa_bag_eval", context=context)
        reliable = QoSProfile(depth=1, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE)
        self.image_pub = self.node.create_publisher(Image, f"{ns}/image", reliable)
        self.command_pub = self.node.create_publisher(
            Command, f"{ns}/command_stamped", QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE))
        # The node's depth and camera_info (relative names under its namespace, as image);
        # matched before the replay only when the bag has depth (``expect_depth``).
        from sensor_msgs.msg import CameraInfo, CompressedImage

        sensor = QoSProfile(depth=5, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE)
        self.depth_pub = self.node.create_publisher(Image, f"{ns}/depth", sensor)
        # A bag of compressedDepth goes to the node's depth/compressedDepth (use_compressed_depth), as recorded.
        self.compressed_depth_pub = self.node.create_publisher(CompressedImage, f"{ns}/depth/compressedDepth", sensor)
        self.camera_info_pub = self.node.create_publisher(CameraInfo, f"{ns}/camera_info", sensor)
        self.expect_depth = False
        self.compressed_depth = False  # the bag's depth is compressedDepth: matched on depth/compressedDepth
        self.bad_depth: dict[int, str] = {}  # frame stamp -> why its depth was not sent (one line)
        self.clock = BagClock(options.rate_factor)
        self._last_clock = -1
        self._clock_type = Clock
        self.clock_pub = self.node.create_publisher(Clock, "/clock", 10)
        self._clock_timer = self.node.create_timer(CLOCK_PERIOD_S, self._publish_clock)
        self.result_sub = self.node.create_subscription(
            SegmentationResult, f"{ns}/result", self._on_result,
            QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE), raw=True)
        self._result_type = SegmentationResult
        # The node's own count of the readers its result writer has matched (/diagnostics,
        # result_subscribers): seeing the node's writer here does not mean that writer already
        # sends to this reader, since each participant discovers the other on its own, and a
        # volatile writer drops a result for a reader it has not matched.
        from diagnostic_msgs.msg import DiagnosticArray

        self._status_prefix = f"{ns}/"
        self._node_result_readers: int | None = None  # None: no status from the node yet
        self.diagnostics_sub = self.node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, 10)
        self._cond = threading.Condition()
        self._pending: list[Outcome] = []
        self.foreign_results = 0
        self._writer: Any = None
        self._result_conn = self._command_conn = None
        if results_bag is not None:
            from rosbags.rosbag2 import StoragePlugin, Writer

            store = message_typestore()
            self._writer = Writer(results_bag, version=9, storage_plugin=StoragePlugin.MCAP)
            self._writer.open()
            self._result_conn = self._writer.add_connection(RESULT_TOPIC, RESULT_TYPE, typestore=store)
            self._command_conn = self._writer.add_connection(COMMAND_STAMPED_TOPIC, COMMAND_STAMPED_TYPE,
                                                             typestore=store)
        self._writer_lock = threading.Lock()
        self._executor: Any = None
        self._spinner: threading.Thread | None = None

    # -- plumbing ---------------------------------------------------------------------
    def start(self) -> None:
        from rclpy.executors import SingleThreadedExecutor

        self._executor = SingleThreadedExecutor(context=self.context)
        self._executor.add_node(self.node)
        self._spinner = threading.Thread(target=self._spin, name="m2sa-bag-eval-spin", daemon=True)
        self._spinner.start()

    def _spin(self) -> None:
        while self.context.ok() and self._executor is not None:
            try:
                self._executor.spin_once(timeout_sec=0.05)
            except Exception:  # noqa: BLE001 - context shut down while spinning
                return

    def close(self) -> None:
        executor, self._executor = self._executor, None
        if self._spinner is not None:
            self._spinner.join(timeout=5)
        if executor is not None:
            executor.shutdown()
        self.node.destroy_node()
        with self._writer_lock:
            if self._writer is not None:
                self._writer.close()
                self._writer = None

    def _publish_clock(self) -> None:
        now = self.clock.now_ns()
        if now is None or now < self._last_clock:
            return
        self._last_clock = now
        msg = self._clock_type()
        msg.clock.sec, msg.clock.nanosec = divmod(now, 1_000_000_000)
        self.clock_pub.publish(msg)

    def start_clock(self, bag_ns: int) -> None:
        """/clock from ``bag_ns`` on: a node on sim time needs it before it can configure."""
        self.clock.advance_to(bag_ns)
        self.clock.hold_until(bag_ns)

    def pacer(self) -> Pacer:
        """Return a fresh schedule for one replay, on this replayer's clock."""
        return Pacer(self.clock, self.options.rate_factor, self.options.settle_s)

    def _record(self, connection: Any, raw: bytes, bag_ns: int | None = None) -> None:
        """Write into the results bag, stamped in bag time (the replay clock's now)."""
        if bag_ns is None:
            bag_ns = self.clock.now_ns()
        with self._writer_lock:
            if self._writer is not None:
                self._writer.write(connection, bag_ns if bag_ns is not None else time.time_ns(), raw)

    def _on_diagnostics(self, msg: Any) -> None:
        readers = [int(kv.value) for status in msg.status if status.name.startswith(self._status_prefix)
                   for kv in status.values if kv.key == "result_subscribers"]
        spoke = any(status.name.startswith(self._status_prefix) for status in msg.status)
        with self._cond:
            if readers:
                self._node_result_readers = max(readers)
            elif spoke and self._node_result_readers is None:
                self._node_result_readers = -1  # a node that does not count them: matched on our side only

    def wait_for_node(self, node: NodeProcess | None) -> None:
        """
        Until the node's image/command subscriptions and result publisher are matched, both ways.

        Our side is read from our endpoints; the node's result writer, from the node's own
        /diagnostics (result_subscribers): a result sent before that writer matched this
        reader would be lost.
        """
        deadline = time.monotonic() + self.options.startup_timeout_s
        while time.monotonic() < deadline:
            depth_pub = self.compressed_depth_pub if self.compressed_depth else self.depth_pub
            depth_ready = not self.expect_depth or (depth_pub.get_subscription_count() > 0
                                                    and self.camera_info_pub.get_subscription_count() > 0)
            with self._cond:
                readers = self._node_result_readers
            if (self.image_pub.get_subscription_count() > 0 and self.command_pub.get_subscription_count() > 0
                    and self.result_sub.get_publisher_count() > 0 and depth_ready
                    and readers is not None and readers != 0):
                return
            if node is not None:
                node.check_starting()  # a configure failure or an exit ends the wait at once
            time.sleep(0.1)
        where = f"under namespace {self.options.namespace}"
        tail = f"; its log ({node.log_path}) ends with:\n{node.log_tail()}" if node is not None else ""
        depth = ""
        if self.compressed_depth and self.compressed_depth_pub.get_subscription_count() == 0:
            depth = (f"; nothing listens on {self.compressed_depth_pub.topic_name}: the bag's depth is "
                     "compressedDepth, a node needs -p use_compressed_depth:=true")
        if self._node_result_readers is None and self.result_sub.get_publisher_count() > 0:
            depth += (f"; no /diagnostics from a node under {self.options.namespace} (its diagnostics_period, or "
                      "ROS_DOMAIN_ID): this tool waits for the node to say its result writer has matched this reader")
        raise TimeoutError(f"no active perception node {where} after {self.options.startup_timeout_s:.0f} s "
                           f"(topics {self.image_pub.topic_name}, {self.command_pub.topic_name}, "
                           f"{self.result_sub.topic_name}){depth}{tail}")

    # -- results ----------------------------------------------------------------------
    def _on_result(self, raw: bytes) -> None:
        from rclpy.serialization import deserialize_message

        now = time.monotonic()
        msg = deserialize_message(raw, self._result_type)
        self._record(self._result_conn, raw)
        with self._cond:
            outcome = next((o for o in self._pending if o.request_id == msg.request_id), None)
            if outcome is None:
                self.foreign_results += 1  # another client's command on a shared node
                return
            self._pending.remove(outcome)
            outcome.result, outcome.received_at = msg, now
            self._cond.notify_all()

    def _wait_pending(self, at_most: int, node: NodeProcess | None) -> None:
        """Block until at most ``at_most`` commands are unanswered (timed-out ones are given up)."""
        with self._cond:
            while len(self._pending) > at_most:
                now = time.monotonic()
                oldest = min(o.sent_at for o in self._pending)
                if now - oldest > self.options.result_timeout_s:
                    expired = [o for o in self._pending if now - o.sent_at > self.options.result_timeout_s]
                    for outcome in expired:
                        outcome.problems.append(f"no result within {self.options.result_timeout_s:.0f} s")
                        self._pending.remove(outcome)
                    continue
                if node is not None and not node.alive():
                    for outcome in self._pending:
                        outcome.problems.append("no result: the perception node exited")
                    self._pending.clear()
                    return
                self._cond.wait(timeout=0.2)

    # -- the replay -------------------------------------------------------------------
    def replay(self, bag: Path, truth: GroundTruth | None, image_topic: str, command_topic: str,
               node: NodeProcess | None = None, progress: bool = True,
               depth_topics: tuple[str, str] | None = None) -> list[Outcome]:
        """
        Publish the bag and collect the results.

        ``depth_topics`` (depth, camera_info in the bag) are published too, on the
        node's ``depth`` and ``camera_info``, a depth message that cannot be read being
        left out with one line in ``bad_depth``.
        """
        from m2sa_ros.msg import Command
        from rclpy.serialization import deserialize_message, serialize_message
        from std_msgs.msg import String

        n_commands = check_bag(bag, truth, image_topic, command_topic)
        bar = None
        if progress:
            from tqdm import tqdm

            bar = tqdm(total=n_commands, desc="replay", unit="cmd")
        outcomes: list[Outcome] = []
        frames_sent: set[int] = set()
        last_stamp: int | None = None
        pacer = self.pacer()
        topics = [image_topic, command_topic, *(depth_topics or ())]
        for message in iter_messages(bag, topics):  # streamed: bags can be large
            if depth_topics is not None and message.topic in depth_topics:
                pacer.wait_for(message.time_ns)
                self._publish_depth(message, message.topic == depth_topics[0])
                continue
            if message.topic == image_topic:
                self._wait_pending(0, node)
            else:
                self._wait_pending(self.options.max_in_flight - 1, node)
            pacer.wait_for(message.time_ns, after_frame=message.topic == command_topic)
            self._publish_clock()
            if message.topic == image_topic:
                header = decode(message).header
                last_stamp = stamp_ns(header)
                frames_sent.add(last_stamp)
                self.image_pub.publish(message.raw)
                pacer.frame_sent()
                continue
            text = deserialize_message(message.raw, String).data
            index = len(outcomes)
            expected = last_stamp
            if truth is not None:
                gt = truth.commands[index]
                if gt.command != text:
                    raise BagError(f"{bag}: command message {index} is '{text}' but the ground truth "
                                   f"says '{gt.command}'")
                expected = gt.image_stamp_ns
            outcome = Outcome(index, text, message.time_ns, expected, expected is not None and expected in frames_sent,
                              request_id=f"bag-{index}")
            if expected is not None and expected in self.bad_depth:
                outcome.problems.append(self.bad_depth[expected] + "; not scored in 3-D")
            if not outcome.image_in_bag:
                outcome.problems.append("no image in the bag for this command" if expected is None else
                                        f"its image (stamp {expected} ns) is not in the bag on {image_topic} "
                                        f"before it")
            command = Command(request_id=outcome.request_id, text=text)
            command.header.stamp.sec, command.header.stamp.nanosec = divmod(message.time_ns, 1_000_000_000)
            with self._cond:
                outcome.sent_at = time.monotonic()
                self._pending.append(outcome)
            self.command_pub.publish(command)
            self._record(self._command_conn, serialize_message(command), message.time_ns)
            outcomes.append(outcome)
            if bar is not None:
                bar.update(1)
        self._wait_pending(0, node)
        if bar is not None:
            bar.close()
        for outcome in outcomes:
            result = outcome.result
            if result is not None and outcome.expected_stamp_ns is not None and outcome.image_in_bag:
                got = stamp_ns(result.header)
                if result.height > 0 and got != outcome.expected_stamp_ns:
                    outcome.problems.append(f"answered on the frame stamped {got} ns, not on its own "
                                            f"({outcome.expected_stamp_ns} ns)")
        return outcomes

    def _publish_depth(self, message: Any, is_depth: bool) -> None:
        """
        Send a depth or camera_info message as recorded.

        A depth image that cannot be read (bad encoding, data shorter than its size, a
        compressedDepth payload that does not decode) is not sent and is said once.
        compressedDepth goes out as it is, to the node's depth/compressedDepth.
        """
        if is_depth:
            from m2sa_ros.depth.compressed_depth import decode_compressed_depth
            from m2sa_ros.messages.image_conversion import depth_to_metres

            compressed = message.msgtype == "sensor_msgs/msg/CompressedImage"
            msg = None
            try:
                msg = decode(message)
                read = decode_compressed_depth if compressed else depth_to_metres
                read(msg, what=f"depth at {message.time_ns} ns")
            except Exception as exc:  # noqa: BLE001 - any undecodable entry: one line, and go on
                stamp = stamp_ns(msg.header) if msg is not None else message.time_ns
                self.bad_depth[stamp] = f"depth at {message.time_ns} ns not replayed: {str(exc).splitlines()[0]}"
                return
            (self.compressed_depth_pub if compressed else self.depth_pub).publish(message.raw)
        else:
            self.camera_info_pub.publish(message.raw)


def bag_start_ns(bag: Path) -> int:
    """Bag time of the first message (where /clock starts)."""
    messages = iter_messages(bag)
    try:
        return next(messages).time_ns
    finally:
        messages.close()
