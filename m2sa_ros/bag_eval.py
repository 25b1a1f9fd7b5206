"""Score the live perception node on a rosbag: ``m2sa-bag-eval``.

What a robotics team runs on its own recordings (docs/BAG_REPLAY.md):

1. start the node as a subprocess under a private namespace, on simulated time
   (``use_sim_time``), or use one already running (``--no-start --namespace /robot1``);
2. replay the bag's images and commands over DDS with the recorded timing (scaled by
   ``--rate-factor``), publishing ``/clock`` from the bag's time so that the node's
   clock, its image-age check (``max_image_age``) and every stamp are bag time, and
   recording every SegmentationResult into an output bag stamped in bag time;
3. score the results against the bag's ground truth with the generative protocol
   (Hungarian matching, gIoU, cIoU, target-count accuracy, per split), with latency
   percentiles and the number of commands that got no result (must be 0);
4. write DIR/report.md, DIR/report.json and DIR/overlays/ (one PNG per command and a
   contact sheet).

Replay and the node's keep-latest image: the node answers a topic command on the
newest frame it holds *when the worker starts the command*. Replaying open loop on a
slow model would therefore answer queued commands on later frames. So the replayer
keeps the recorded spacing of messages but never publishes a new frame while commands
about the previous one are still unanswered (the schedule shifts by the wait), and
leaves ``--settle`` seconds between a frame and the next command so the frame is in
the node before its command. Each result's header stamp is checked against the frame
the command was about; a mismatch is reported, not scored silently.

Commands go out on the node's typed ``command_stamped`` topic with a request id of
their own (``bag-<index>``) and the bag time as their stamp; results are matched to
commands by that id, never by text.

Usage::

    m2sa-bag-eval --bag demo_bag --out runs/eval
    m2sa-bag-eval --bag demo_bag --out runs/eval --node-args "-p model_path:=models/m2sa-tiny-synth"
    m2sa-bag-eval --bag robot.mcap_dir --out runs/eval --no-start --namespace /robot1
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from m2sa_core.cli_errors import cli_entry
from m2sa_ros.bag_tools import (COMMAND_STAMPED_TOPIC, COMMAND_STAMPED_TYPE, COMMAND_TOPIC, IMAGE_TOPIC, RESULT_TOPIC,
                                RESULT_TYPE, BagError,
                                GroundTruth, GroundTruthCommand, bag_info, decode, iter_messages, load_ground_truth,
                                message_typestore, read_frames, stamp_ns)

LATENCY_PERCENTILES = (50, 90, 95, 99)
MIN_PANEL_HEIGHT = 384  # overlay panels of smaller frames are enlarged to at least this


# --------------------------------------------------------------------------- predictions
@dataclass
class Prediction:
    """What the node (or a direct Segmenter run) answered to one command."""

    answer: str
    masks: np.ndarray  # bool [n, H, W]: the visible masks
    labels: list[str]
    scores: list[float]
    success: bool = True
    error: str = ""
    # Per target: the complete shape when the node sent one (else None), and which shape
    # the command asked for ("modal" / "amodal", from Target.mask_type).
    amodal_masks: list[np.ndarray | None] | None = None
    mask_types: list[str] | None = None

    def requested_masks(self) -> np.ndarray:
        """Per target, the shape its command asked for: the complete one for "amodal"
        targets that carry it, else the visible one (what a planner would use)."""
        if not len(self.masks):
            return self.masks
        types = self.mask_types or ["modal"] * len(self.masks)
        amodal = self.amodal_masks or [None] * len(self.masks)
        return np.stack([a if t == "amodal" and a is not None else m
                         for m, a, t in zip(self.masks, amodal, types)])


def prediction_from_msg(msg: Any) -> Prediction:
    """A SegmentationResult message (rclpy) -> Prediction; a failed result has no masks."""
    from m2sa_ros.image_conversion import msg_to_mask
    from m2sa_ros.msg import Target as TargetMsg

    height, width = int(msg.height), int(msg.width)
    masks = [msg_to_mask(t.mask, what=f"result {msg.request_id}: target {i} mask") for i, t in enumerate(msg.targets)]
    stack = np.stack(masks) if masks else np.zeros((0, height, width), dtype=bool)
    amodal = [msg_to_mask(t.amodal_mask, what=f"result {msg.request_id}: target {i} amodal_mask")
              if t.amodal_mask.height > 0 else None for i, t in enumerate(msg.targets)]
    types = ["amodal" if t.mask_type == TargetMsg.MASK_AMODAL else "modal" for t in msg.targets]
    return Prediction(answer=msg.answer, masks=stack, labels=[t.label for t in msg.targets],
                      scores=[float(t.score) for t in msg.targets], success=bool(msg.success), error=msg.error,
                      amodal_masks=amodal, mask_types=types)


def prediction_from_result(result: Any, height: int, width: int) -> Prediction:
    """An ``m2sa_core.types.Result`` -> Prediction (the direct, ROS-free path)."""
    masks = [np.asarray(t.mask, dtype=bool) for t in result.targets]
    stack = np.stack(masks) if masks else np.zeros((0, height, width), dtype=bool)
    amodal = [None if t.amodal_mask is None else np.asarray(t.amodal_mask, dtype=bool) for t in result.targets]
    return Prediction(answer=result.answer, masks=stack, labels=[t.label for t in result.targets],
                      scores=[float(t.score) for t in result.targets], amodal_masks=amodal,
                      mask_types=[t.mask_type for t in result.targets])


# --------------------------------------------------------------------------- scoring
@dataclass
class CommandScore:
    """Per-command outcome of the generative protocol."""

    index: int
    split: str
    target_ious: list[float]  # per predicted target: IoU with its matched ground truth, 0 if unmatched
    matched_gt: list[int | None]  # per predicted target: index of its ground truth
    missed_gt: list[int]  # ground truths no prediction matched
    entry_ious: list[float]  # what entered gIoU (matched pairs, then unmatched entries)


@dataclass
class Scores:
    reports: dict[str, Any]  # split -> m2sa_core.metrics.SplitReport
    commands: dict[int, CommandScore]


def score_predictions(truth: GroundTruth, predictions: dict[int, Prediction | None],
                      exclude: Sequence[int] = ()) -> Scores:
    """Generative protocol over the commands of ``truth``.

    A command without a prediction (no result) or with a failed result counts as an
    answer with no masks: every ground truth is missed. Each predicted target is scored
    on the shape the node says its command asked for (``Target.mask_type``): the
    complete shape for "amodal" targets that carry one, else the visible mask; the
    ground truth holds the shape the command really asked for, so a node that mistakes
    which one was meant loses IoU there.
    ``exclude`` leaves commands out (e.g. those whose image is not in the bag: a data
    problem, not the node's).
    """
    from m2sa_core.metrics import SegmentationEvaluator, match_masks

    evaluator = SegmentationEvaluator("generative")
    scored: dict[int, CommandScore] = {}
    skip = set(exclude)
    for command in truth.commands:
        if command.index in skip:
            continue
        gt = command.masks()
        pred = predictions.get(command.index)
        if pred is not None:
            masks = pred.requested_masks()
        else:
            masks = np.zeros((0, command.height, command.width), dtype=bool)
        if len(masks) and masks.shape[1:] != gt.shape[1:]:
            raise BagError(f"command {command.index} ('{command.command}'): predicted masks are "
                           f"{masks.shape[2]}x{masks.shape[1]}, the ground truth is {command.width}x{command.height}")
        matching = match_masks(masks, gt)
        target_ious = [0.0] * len(masks)
        matched: list[int | None] = [None] * len(masks)
        for p, g in matching.pairs:
            target_ious[p] = float(matching.iou[p, g])
            matched[p] = g
        entries = evaluator.add(masks, gt, split=command.split or "all")
        scored[command.index] = CommandScore(command.index, command.split, target_ious, matched,
                                             list(matching.unmatched_gt), [float(v) for v in entries])
    return Scores(evaluator.report(), scored)


def percentiles(values: Sequence[float]) -> dict[str, float]:
    """p50/p90/p95/p99, mean and max of ``values`` (NaN when empty)."""
    if not values:
        return {**{f"p{p}": math.nan for p in LATENCY_PERCENTILES}, "mean": math.nan, "max": math.nan}
    array = np.asarray(values, dtype=np.float64)
    out = {f"p{p}": float(np.percentile(array, p)) for p in LATENCY_PERCENTILES}
    out.update(mean=float(array.mean()), max=float(array.max()))
    return out


# --------------------------------------------------------------------------- the node
class NodeProcess:
    """The perception node as a subprocess, its output in a log file; stopped with SIGINT."""

    def __init__(self, namespace: str, node_args: Sequence[str], log_path: Path) -> None:
        self.namespace = namespace
        self.command = [sys.executable, "-m", "m2sa_ros.perception_node", "--ros-args",
                        "-r", f"__ns:={namespace}",
                        # A replayed bag must not lose frames: a reliable subscription.
                        "-p", "image_reliability:=reliable",
                        # Bag time: /clock comes from the replayer.
                        "-p", "use_sim_time:=true", *node_args]
        self.log_path = log_path
        self._log: Any = None
        self.process: subprocess.Popen | None = None

    def start(self) -> "NodeProcess":
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "wb")
        self.process = subprocess.Popen(self.command, stdout=self._log, stderr=subprocess.STDOUT,
                                        start_new_session=True)
        return self

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout: float = 20.0) -> None:
        process = self.process
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> "NodeProcess":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


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
    """Number of commands in ``bag``; BagError when it has none or disagrees with its ground truth."""
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
    """Bag time for /clock while a bag is replayed at ``factor`` times its speed.

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


class Replayer:
    """Publishes a bag's frames, commands and /clock to a node and collects its results."""

    def __init__(self, options: ReplayOptions, context: Any, results_bag: Path | None) -> None:
        from rclpy.node import Node
        from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
        from rosgraph_msgs.msg import Clock
        from sensor_msgs.msg import Image

        from m2sa_ros.msg import Command, SegmentationResult

        self.options = options
        self.context = context
        ns = options.namespace.rstrip("/")
        self.node = Node("m2sa_bag_eval", context=context)
        reliable = QoSProfile(depth=1, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE)
        self.image_pub = self.node.create_publisher(Image, f"{ns}/image", reliable)
        self.command_pub = self.node.create_publisher(
            Command, f"{ns}/command_stamped", QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE))
        self.clock = BagClock(options.rate_factor)
        self._last_clock = -1
        self._clock_type = Clock
        self.clock_pub = self.node.create_publisher(Clock, "/clock", 10)
        self._clock_timer = self.node.create_timer(CLOCK_PERIOD_S, self._publish_clock)
        self.result_sub = self.node.create_subscription(
            SegmentationResult, f"{ns}/result", self._on_result,
            QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE), raw=True)
        self._result_type = SegmentationResult
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

    def _record(self, connection: Any, raw: bytes, bag_ns: int | None = None) -> None:
        """Write into the results bag, stamped in bag time (the replay clock's now)."""
        if bag_ns is None:
            bag_ns = self.clock.now_ns()
        with self._writer_lock:
            if self._writer is not None:
                self._writer.write(connection, bag_ns if bag_ns is not None else time.time_ns(), raw)

    def wait_for_node(self, node: NodeProcess | None) -> None:
        """Until the node's image/command subscriptions and result publisher are matched."""
        deadline = time.monotonic() + self.options.startup_timeout_s
        while time.monotonic() < deadline:
            if (self.image_pub.get_subscription_count() > 0 and self.command_pub.get_subscription_count() > 0
                    and self.result_sub.get_publisher_count() > 0):
                time.sleep(0.2)  # let the reliable endpoints finish matching both ways
                return
            if node is not None and not node.alive():
                raise RuntimeError(f"the perception node exited (code {node.process.returncode}) before "
                                   f"becoming active; its log ({node.log_path}) ends with:\n{node.log_tail()}")
            time.sleep(0.1)
        where = f"under namespace {self.options.namespace}"
        tail = f"; its log ({node.log_path}) ends with:\n{node.log_tail()}" if node is not None else ""
        raise TimeoutError(f"no active perception node {where} after {self.options.startup_timeout_s:.0f} s "
                           f"(topics {self.image_pub.topic_name}, {self.command_pub.topic_name}, "
                           f"{self.result_sub.topic_name}){tail}")

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
               node: NodeProcess | None = None, progress: bool = True) -> list[Outcome]:
        from rclpy.serialization import deserialize_message, serialize_message
        from std_msgs.msg import String

        from m2sa_ros.msg import Command

        n_commands = check_bag(bag, truth, image_topic, command_topic)
        bar = None
        if progress:
            from tqdm import tqdm

            bar = tqdm(total=n_commands, desc="replay", unit="cmd")
        outcomes: list[Outcome] = []
        frames_sent: set[int] = set()
        last_stamp: int | None = None
        last_image_at = -math.inf
        t0_bag: int | None = None
        t0 = time.monotonic()
        shift = 0.0
        factor = self.options.rate_factor
        for message in iter_messages(bag, [image_topic, command_topic]):  # streamed: bags can be large
            if t0_bag is None:
                t0_bag, t0 = message.time_ns, time.monotonic()
            if message.topic == image_topic:
                self._wait_pending(0, node)
            else:
                self._wait_pending(self.options.max_in_flight - 1, node)
            self.clock.hold_until(message.time_ns)
            due = t0 + shift + (message.time_ns - t0_bag) / 1e9 / factor
            if message.topic == command_topic:
                due = max(due, last_image_at + self.options.settle_s)
            now = time.monotonic()
            if now > due:
                shift += now - due  # waited on the node: keep the recorded spacing from here on
            else:
                time.sleep(due - now)
            self.clock.advance_to(message.time_ns)
            self._publish_clock()
            if message.topic == image_topic:
                header = decode(message).header
                last_stamp = stamp_ns(header)
                frames_sent.add(last_stamp)
                self.image_pub.publish(message.raw)
                last_image_at = time.monotonic()
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


# --------------------------------------------------------------------------- reports
def _fmt(value: float, digits: int = 4) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def build_report(bag: Path, truth: GroundTruth | None, outcomes: list[Outcome], scores: Scores | None,
                 settings: dict[str, Any], foreign_results: int) -> dict[str, Any]:
    """Everything report.json holds (report.md is rendered from it)."""
    answered = [o for o in outcomes if o.result is not None]
    commands = []
    for o in outcomes:
        gt: GroundTruthCommand | None = truth.commands[o.index] if truth is not None else None
        score = scores.commands.get(o.index) if scores is not None else None
        result = o.result
        targets = []
        if result is not None:
            for i, t in enumerate(result.targets):
                known = score is not None and i < len(score.target_ious)  # not when the result was unreadable
                targets.append({"label": t.label, "score": float(t.score),
                                "iou": score.target_ious[i] if known else None,
                                "matched_gt": score.matched_gt[i] if known else None})
        commands.append({
            "index": o.index, "command": o.command, "split": gt.split if gt else "",
            "image_stamp_ns": o.expected_stamp_ns, "image_in_bag": o.image_in_bag,
            "has_result": result is not None,
            "success": bool(result.success) if result is not None else False,
            "error": result.error if result is not None else "",
            "answer": result.answer if result is not None else "",
            "request_id": result.request_id if result is not None else "",
            "latency_ms": None if result is None else o.latency_ms,
            "inference_ms": None if result is None else float(result.inference_ms),
            "targets": targets,
            "ground_truth": [t.label for t in gt.targets] if gt else [],
            "reference_answer": gt.answer if gt else "",
            "missed_ground_truth": score.missed_gt if score else [],
            "scored": score is not None,
            "problems": o.problems,
        })
    counts = {
        "commands": len(outcomes),
        "results": len(answered),
        "commands_without_result": len(outcomes) - len(answered),
        "failed_results": sum(1 for o in answered if not o.result.success),
        "commands_without_image": sum(1 for o in outcomes if not o.image_in_bag),
        "answered_on_another_frame": sum(1 for o in outcomes if any(p.startswith("answered on") for p in o.problems)),
        "foreign_results": foreign_results,
        "scored": len(scores.commands) if scores is not None else 0,
    }
    return {
        "bag": str(bag),
        "protocol": "generative",
        "settings": settings,
        "counts": counts,
        "metrics": {k: r.as_dict() for k, r in scores.reports.items()} if scores is not None else {},
        "latency_ms": percentiles([o.latency_ms for o in answered]),
        "inference_ms": percentiles([float(o.result.inference_ms) for o in answered if o.result.success]),
        "commands": commands,
    }


def render_markdown(report: dict[str, Any], overlays: list[str]) -> str:
    """report.md: summary, metrics per split, latency, problems, one row per command."""
    c = report["counts"]
    lines = [f"# Bag replay evaluation: `{report['bag']}`", "",
             ("Protocol: generative (Hungarian matching on IoU; unmatched masks count IoU 0). "
              if report["metrics"] else "") +
             f"Rate factor {report['settings'].get('rate_factor')}, node namespace "
             f"`{report['settings'].get('namespace')}`.", "",
             "| commands | results | **without result** | failed | without image | answered on another frame |",
             "|---|---|---|---|---|---|",
             f"| {c['commands']} | {c['results']} | **{c['commands_without_result']}** | {c['failed_results']} | "
             f"{c['commands_without_image']} | {c['answered_on_another_frame']} |", ""]
    if report["metrics"]:
        lines += ["## Scores", "", "| split | gIoU | cIoU | masks | samples | count accuracy |",
                  "|---|---|---|---|---|---|"]
        for split, m in report["metrics"].items():
            lines.append(f"| {split} | {_fmt(m['giou'])} | {_fmt(m['ciou'])} | {m['masks']} | {m['samples']} | "
                         f"{_fmt(m['count_accuracy'])} |")
        lines.append("")
    else:
        lines += ["No ground truth: answers and latency only.", ""]
    lines += ["## Latency (ms)", "", "| | " + " | ".join(report["latency_ms"]) + " |",
              "|---|" + "---|" * len(report["latency_ms"])]
    for name, key in (("command -> result", "latency_ms"), ("node inference", "inference_ms")):
        lines.append(f"| {name} | " + " | ".join(_fmt(v, 1) for v in report[key].values()) + " |")
    lines.append("")
    problems = [(cmd["index"], p) for cmd in report["commands"] for p in cmd["problems"]]
    if problems:
        lines += ["## Problems", ""] + [f"- command {i}: {p}" for i, p in problems] + [""]
    lines += ["## Commands", "", "| # | split | command | answer | targets (IoU) | missed | ms |",
              "|---|---|---|---|---|---|---|"]
    for cmd in report["commands"]:
        answer = cmd["answer"] if cmd["success"] else f"*error: {cmd['error'] or 'no result'}*"
        targets = ", ".join(f"{t['label']} ({_fmt(t['iou'], 2) if t['iou'] is not None else '-'})"
                            for t in cmd["targets"]) or "-"
        missed = ", ".join(cmd["ground_truth"][g] for g in cmd["missed_ground_truth"]) or "-"
        ms = _fmt(cmd["latency_ms"], 0) if cmd["latency_ms"] is not None else "-"
        lines.append(f"| {cmd['index']} | {cmd['split']} | {_md(cmd['command'])} | {_md(answer)} | {_md(targets)} | "
                     f"{_md(missed)} | {ms} |")
    if overlays:
        lines += ["", "## Overlays", "", "![contact sheet](overlays/contact_sheet.png)", "",
                  "Left: ground truth, right: the node's answer; one file per command in `overlays/`."]
    return "\n".join(lines) + "\n"


def _md(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


# --------------------------------------------------------------------------- overlays
def _caption(width: int, lines: list[str], scale: float = 0.4) -> np.ndarray:
    import cv2

    height = 8 + 16 * len(lines)
    strip = np.full((height, width, 3), 255, dtype=np.uint8)
    for i, line in enumerate(lines):
        cv2.putText(strip, line, (4, 16 + 16 * i), cv2.FONT_HERSHEY_SIMPLEX, scale, (0, 0, 0), 1, cv2.LINE_AA)
    return strip


def _wrap(text: str, width_px: int, char_px: int = 7) -> list[str]:
    import textwrap

    return textwrap.wrap(text, max(10, width_px // char_px)) or [""]


def command_overlay(image: np.ndarray, command: GroundTruthCommand | None, text: str, prediction: Prediction | None,
                    ious: list[float] | None) -> np.ndarray:
    """Ground truth | prediction side by side, the command and answer above."""
    from m2sa_core.types import Granularity, Target
    from m2sa_core.visualize import overlay_targets

    def targets(masks: Any, labels: list[str], scores: list[float]) -> list[Target]:
        return [Target(label=label, object_name="", instance=0, part_name="", granularity=Granularity.OBJECT,
                       mask=np.asarray(mask, dtype=bool), score=score)
                for mask, label, score in zip(masks, labels, scores)]

    # Small frames (the synthetic world's 256 px) are enlarged, pixels kept sharp, so labels stay legible.
    zoom = max(1, math.ceil(MIN_PANEL_HEIGHT / image.shape[0]))

    def enlarge(array: np.ndarray) -> np.ndarray:
        if zoom == 1:
            return array
        return np.repeat(np.repeat(array, zoom, axis=0), zoom, axis=1)

    image = enlarge(image)
    gt_panel = image.copy()
    if command is not None and command.targets:
        gt_panel = overlay_targets(image, targets([enlarge(m) for m in command.masks()],
                                                  [t.label for t in command.targets], [0.0] * len(command.targets)))
    pred_panel = image.copy()
    if prediction is not None and len(prediction.masks):
        shown = prediction.requested_masks()  # what was scored
        labels = [f"{label} IoU {iou:.2f}" if ious else label
                  for label, iou in zip(prediction.labels, ious or [0.0] * len(prediction.labels))]
        pred_panel = overlay_targets(image, targets([enlarge(m) for m in shown], labels,
                                                    [0.0] * len(labels)))
    gap = np.full((image.shape[0], 4, 3), 255, dtype=np.uint8)
    body = np.concatenate([gt_panel, gap, pred_panel], axis=1)
    answer = "no result" if prediction is None else (prediction.answer if prediction.success
                                                      else f"error: {prediction.error}")
    lines = _wrap(f"command: {text}", body.shape[1]) + _wrap(f"answer: {answer}", body.shape[1])
    if command is not None:
        lines += _wrap("expected: " + (", ".join(t.label for t in command.targets) or "nothing"), body.shape[1])
    return np.concatenate([_caption(body.shape[1], lines), body], axis=0)


def contact_sheet(tiles: list[tuple[str, np.ndarray]], columns: int = 4, tile_width: int = 320) -> np.ndarray:
    """A grid of thumbnails, each titled (e.g. "#3 gIoU 0.71")."""
    import cv2

    if not tiles:
        raise ValueError("contact sheet: no tiles")
    thumbs = []
    for title, image in tiles:
        scale = tile_width / image.shape[1]
        size = (tile_width, max(1, int(round(image.shape[0] * scale))))
        thumb = cv2.resize(image, size, interpolation=cv2.INTER_AREA)
        thumbs.append(np.concatenate([_caption(tile_width, [title]), thumb], axis=0))
    height = max(t.shape[0] for t in thumbs)
    rows = []
    for start in range(0, len(thumbs), columns):
        row = [np.pad(t, ((0, height - t.shape[0]), (0, 4), (0, 0)), constant_values=255)
               for t in thumbs[start:start + columns]]
        row += [np.full((height, tile_width + 4, 3), 255, dtype=np.uint8)] * (columns - len(row))
        rows.append(np.concatenate(row, axis=1))
    return np.concatenate(rows, axis=0)


def write_overlays(out_dir: Path, bag: Path, truth: GroundTruth | None, outcomes: list[Outcome],
                   predictions: dict[int, Prediction | None], scores: Scores | None, image_topic: str) -> list[str]:
    """overlays/cmd_NNN.png per command with a frame, and overlays/contact_sheet.png."""
    import cv2

    overlay_dir = out_dir / "overlays"
    overlay_dir.mkdir(parents=True, exist_ok=True)
    stamps = {o.expected_stamp_ns for o in outcomes if o.expected_stamp_ns is not None and o.image_in_bag}
    frames = read_frames(bag, stamps, image_topic)
    written, tiles = [], []
    for o in outcomes:
        image = frames.get(o.expected_stamp_ns) if o.expected_stamp_ns is not None else None
        if image is None:
            continue
        gt = truth.commands[o.index] if truth is not None else None
        score = scores.commands.get(o.index) if scores is not None else None
        panel = command_overlay(image, gt, o.command, predictions.get(o.index), score.target_ious if score else None)
        name = f"cmd_{o.index:03d}.png"
        cv2.imwrite(str(overlay_dir / name), panel[:, :, ::-1])
        written.append(name)
        giou = f" IoU {np.mean(score.entry_ious):.2f}" if score and score.entry_ious else ""
        tiles.append((f"#{o.index}{giou}", panel))
    if tiles:
        cv2.imwrite(str(overlay_dir / "contact_sheet.png"), contact_sheet(tiles)[:, :, ::-1])
    return written


# --------------------------------------------------------------------------- evaluation
@dataclass
class Evaluation:
    report: dict[str, Any]
    outcomes: list[Outcome]
    predictions: dict[int, Prediction | None]
    scores: Scores | None


def evaluate_bag(bag: str | Path, out_dir: str | Path, *, node_args: Sequence[str] = (), start_node: bool = True,
                 namespace: str | None = None, rate_factor: float = 1.0, settle_s: float = 0.1,
                 max_in_flight: int = 4, result_timeout_s: float = 300.0, startup_timeout_s: float = 300.0,
                 ground_truth: str | Path | None = None, progress: bool = True, overlays: bool = True) -> Evaluation:
    """Replay ``bag`` through a perception node, record, score and write the reports into ``out_dir``."""
    import rclpy

    bag, out_dir = Path(bag), Path(out_dir)
    if not (bag / "metadata.yaml").is_file():
        raise BagError(f"{bag} is not a rosbag2 directory (no metadata.yaml)")
    if not rate_factor > 0:
        raise BagError(f"--rate-factor must be > 0, got {rate_factor}")
    if max_in_flight < 1:
        raise BagError(f"--max-in-flight must be >= 1, got {max_in_flight}")
    truth = load_ground_truth(bag, ground_truth)
    image_topic = truth.image_topic if truth else IMAGE_TOPIC
    command_topic = truth.command_topic if truth else COMMAND_TOPIC
    check_bag(bag, truth, image_topic, command_topic)  # before paying for a node start-up
    out_dir.mkdir(parents=True, exist_ok=True)
    results_bag = out_dir / "results_bag"
    if results_bag.exists():
        raise BagError(f"{results_bag} already exists: pick a new --out directory or remove it")
    namespace = namespace or f"/m2sa_bag_eval_{os.getpid()}"
    if not namespace.startswith("/"):
        namespace = "/" + namespace
    options = ReplayOptions(namespace, rate_factor, settle_s, max_in_flight, result_timeout_s, startup_timeout_s)
    node = NodeProcess(namespace, list(node_args), out_dir / "node.log") if start_node else None
    context = rclpy.Context()
    rclpy.init(context=context, args=[])
    replayer = None
    try:
        if node is not None:
            node.start()
        replayer = Replayer(options, context, results_bag)
        replayer.start_clock(_first_time_ns(bag))
        replayer.start()
        replayer.wait_for_node(node)
        outcomes = replayer.replay(bag, truth, image_topic, command_topic, node, progress)
        foreign = replayer.foreign_results
    finally:
        if replayer is not None:
            replayer.close()
        if node is not None:
            node.stop()
        rclpy.try_shutdown(context=context)
    predictions: dict[int, Prediction | None] = {}
    for o in outcomes:
        predictions[o.index] = None
        if o.result is not None:
            try:
                predictions[o.index] = prediction_from_msg(o.result)
            except ValueError as exc:  # e.g. a mask that is not mono8: scored as no masks, and said
                o.problems.append(f"unreadable result: {exc}")
    scores = None
    if truth is not None:
        scores = score_predictions(truth, predictions, exclude=[o.index for o in outcomes if not o.image_in_bag])
    settings = {"rate_factor": rate_factor, "namespace": namespace, "node_started": start_node,
                "node_command": node.command if node is not None else None, "settle_s": settle_s,
                "max_in_flight": max_in_flight, "result_timeout_s": result_timeout_s,
                "results_bag": str(results_bag)}
    report = build_report(bag, truth, outcomes, scores, settings, foreign)
    written = write_overlays(out_dir, bag, truth, outcomes, predictions, scores, image_topic) if overlays else []
    (out_dir / "report.json").write_text(json.dumps(report, indent=1, default=_json_default), encoding="utf-8")
    (out_dir / "report.md").write_text(render_markdown(report, written), encoding="utf-8")
    return Evaluation(report, outcomes, predictions, scores)


def _first_time_ns(bag: Path) -> int:
    """Bag time of the first message (where /clock starts)."""
    messages = iter_messages(bag)
    try:
        return next(messages).time_ns
    finally:
        messages.close()


def _json_default(value: Any) -> Any:
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def summary_text(report: dict[str, Any]) -> str:
    """A few lines for the terminal: counts, scores per split, latency."""
    from m2sa_core.metrics import SplitReport, format_report

    c = report["counts"]
    lines = [f"commands {c['commands']}, results {c['results']}, without result {c['commands_without_result']}, "
             f"failed {c['failed_results']}, without image {c['commands_without_image']}, "
             f"answered on another frame {c['answered_on_another_frame']}"]
    if report["metrics"]:
        lines.append(format_report({k: SplitReport(**v) for k, v in report["metrics"].items()}))
    lat = report["latency_ms"]
    lines.append("latency ms: " + ", ".join(f"{k} {_fmt(v, 1)}" for k, v in lat.items()))
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="m2sa-bag-eval", description="Replay a bag through the perception node "
                                     "over DDS, record and score its results.")
    parser.add_argument("--bag", required=True, help="rosbag2 directory (e.g. written by m2sa-bag make)")
    parser.add_argument("--out", required=True, help="output directory: report.md, report.json, overlays/, "
                                                     "results_bag/, node.log")
    parser.add_argument("--node-args", default="", help="extra ROS arguments for the node, one string, e.g. "
                        "\"-p model_path:=models/m2sa-tiny-synth -p device:=cuda\" (after --ros-args)")
    parser.add_argument("--model-path", default=None, help="shorthand for --node-args \"-p model_path:=PATH\"")
    parser.add_argument("--params-file", default=None, help="node parameters file (--params-file)")
    parser.add_argument("--no-start", action="store_true", help="use a node that is already running under "
                        "--namespace instead of starting one")
    parser.add_argument("--namespace", default=None, help="the node's namespace (default: a private one)")
    parser.add_argument("--rate-factor", type=float, default=1.0, help="replay speed: 2 = twice as fast as recorded")
    parser.add_argument("--settle", type=float, default=0.1, help="seconds between a frame and the next command")
    parser.add_argument("--max-in-flight", type=int, default=4, help="unanswered commands allowed at once "
                        "(keep <= the node's max_queue + 1)")
    parser.add_argument("--result-timeout", type=float, default=300.0, help="seconds a command waits for its result")
    parser.add_argument("--startup-timeout", type=float, default=300.0, help="seconds to wait for an active node")
    parser.add_argument("--ground-truth", default=None, help="ground-truth JSON (default: BAG/ground_truth.json)")
    parser.add_argument("--no-overlays", action="store_true", help="skip overlays/")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser


@cli_entry("m2sa-bag-eval")
def main(argv: list[str] | None = None) -> int:
    """``m2sa-bag-eval``; exit status 1 when any command got no result, 2 on bad input."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.no_start and not args.namespace:
        parser.error("--no-start needs --namespace (where the running node listens)")
    node_args = shlex.split(args.node_args)
    if args.model_path:
        node_args += ["-p", f"model_path:={args.model_path}"]
    if args.params_file:
        node_args = ["--params-file", args.params_file, *node_args]
    if args.no_start and node_args:
        parser.error("--node-args/--model-path/--params-file only apply to a node this tool starts")
    try:
        evaluation = evaluate_bag(args.bag, args.out, node_args=node_args, start_node=not args.no_start,
                                  namespace=args.namespace, rate_factor=args.rate_factor, settle_s=args.settle,
                                  max_in_flight=args.max_in_flight, result_timeout_s=args.result_timeout,
                                  startup_timeout_s=args.startup_timeout, ground_truth=args.ground_truth,
                                  progress=not args.quiet, overlays=not args.no_overlays)
    except (BagError, ValueError) as exc:
        print(f"m2sa-bag-eval: error: {exc}", file=sys.stderr)
        return 2
    except (RuntimeError, TimeoutError) as exc:
        print(f"m2sa-bag-eval: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("m2sa-bag-eval: interrupted; the node was stopped, no report written", file=sys.stderr)
        return 130
    print(summary_text(evaluation.report))
    print(f"report: {Path(args.out) / 'report.md'}")
    return 1 if evaluation.report["counts"]["commands_without_result"] else 0


if __name__ == "__main__":
    sys.exit(main())
