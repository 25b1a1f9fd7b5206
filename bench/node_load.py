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
Load generator shared by bench_node.py and soak_node.py: the real node under a camera.

The perception node runs as its own process (the ``m2sa-perception`` entry point, so its
RSS, threads and file descriptors are the node's alone) on loopback DDS, in a domain of
its own. This process plays the robot: a thread publishes a 640x480 rgb8 stream at
30 Hz, commands go out on ``command`` (each text unique, so every result can be matched
to its command through ``SegmentationResult.command``), and every result is recorded
with its arrival time. A sampler reads the node's RSS, thread and fd counts over time.

Nothing here asserts timings: the scripts print and record figures; the tests only
check that commands and results are counted correctly.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
import datetime as dt
import os
from pathlib import Path
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

# command_line: for bench_node and soak_node, which import it from here.
from bench.common import command_line, host_line, publish_report, REPO, SHIPPED_MODEL  # noqa: F401
from m2sa_ros.tools.child_process import ChildProcess
import numpy as np

ENTRY = Path(sys.executable).parent / "m2sa-perception"


# ----------------------------------------------------------------------------- model choice
def choose_model(model_path: str | None) -> tuple[dict[str, Any], str]:
    """
    Node parameters selecting the model, and a line saying which one it is.

    The shipped trained checkpoint is what a robot runs; without it (a checkout before
    the model was trained) the tiny preset with random weights stands in, and the
    output says so, because its answers are always max_new_tokens long.
    """
    if model_path:
        return {"model_path": str(model_path)}, f"checkpoint {model_path}"
    if (SHIPPED_MODEL / "config.json").is_file():
        return {"model_path": str(SHIPPED_MODEL)}, f"shipped model {SHIPPED_MODEL.relative_to(REPO)}"
    return {"preset": "tiny"}, ("preset tiny with RANDOM weights (models/m2sa-tiny-synth not found): "
                                "answers run to max_new_tokens and rarely contain [SEG]")


def machine_line() -> str:
    import torch

    return (f"{host_line()}; "
            f"python {platform.python_version()}, torch {torch.__version__}")


def git_revision() -> str:
    """Return the commit the figures were measured on ("+ local changes" when the tree is dirty)."""
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                             timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (rev or "unknown") + (" + local changes" if dirty else "")


def load_average() -> str:
    try:
        return " ".join(f"{v:.2f}" for v in os.getloadavg())
    except OSError:
        return "n/a"


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=np.float64), q)) if values else float("nan")


def utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


# ----------------------------------------------------------------------------- the node process
class NodeProcess(ChildProcess):
    """``m2sa-perception`` as a child process with the given parameters, logging to a file; started at once."""

    def __init__(self, params: dict[str, Any], namespace: str, log_path: Path) -> None:
        if not ENTRY.exists():
            raise FileNotFoundError(f"{ENTRY} not installed: run `make setup` (pip install -e .)")
        args = [str(ENTRY), "--ros-args", "-r", f"__ns:={namespace}"]
        for key, value in params.items():
            text = ("true" if value else "false") if isinstance(value, bool) else str(value)
            args += ["-p", f"{key}:={text}"]
        super().__init__(args, cwd=REPO, log_path=log_path, name="the node")
        self.start()

    def stop(self, timeout: float = 30.0) -> int:
        """Ctrl-C the node (it answers pending commands and exits); kill if it hangs."""
        return int(super().stop(timeout))  # started in __init__: always an exit status


@dataclass
class Sample:
    t: float  # seconds since the load started
    rss_mib: float
    threads: int
    fds: int
    results: int  # results received so far


class ProcessSampler:
    """Samples a process's RSS, thread and fd counts every ``period`` seconds in a thread."""

    def __init__(self, pid: int, period: float, progress: Any) -> None:
        import psutil

        self._proc = psutil.Process(pid)
        self._period = period
        self._progress = progress  # () -> results so far
        self._stop = threading.Event()
        self._t0 = time.monotonic()
        self.samples: list[Sample] = []
        self._thread = threading.Thread(target=self._run, name="sampler", daemon=True)

    def start(self) -> "ProcessSampler":
        self._t0 = time.monotonic()
        self._thread.start()
        return self

    def sample(self) -> None:
        import psutil

        try:
            with self._proc.oneshot():
                self.samples.append(Sample(time.monotonic() - self._t0, self._proc.memory_info().rss / 2**20,
                                           self._proc.num_threads(), self._proc.num_fds(), self._progress()))
        except psutil.Error:
            pass  # the process is gone; the caller notices through NodeProcess.alive()

    def _run(self) -> None:
        while not self._stop.wait(self._period):
            self.sample()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()


# ----------------------------------------------------------------------------- the robot side
@dataclass
class Outcome:
    """What came back for one command."""

    sent_at: float
    results: list[tuple[float, bool, str, int, int]] = field(default_factory=list)
    # (received_at, success, error, frame stamp ns, number of targets)


class Robot:
    """Camera stream, command publisher and result recorder on one rclpy context."""

    def __init__(self, namespace: str, width: int = 640, height: int = 480, fps: float = 30.0,
                 seed: int = 0, clock_hz: float = 0.0) -> None:
        from m2sa_ros.msg import SegmentationResult
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.node import Node
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import Image
        from std_msgs.msg import String

        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = Node("m2sa_load_robot", namespace=namespace, context=self.context)
        reliable = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
        self.image_pub = self.node.create_publisher(Image, "image", 1)
        self.command_pub = self.node.create_publisher(String, "command", reliable)
        self.node.create_subscription(SegmentationResult, "result", self._on_result,
                                      QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE))
        self._String = String
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        if clock_hz > 0:  # a simulator's /clock (wall time): the node runs with use_sim_time
            from rosgraph_msgs.msg import Clock

            clock_pub = self.node.create_publisher(Clock, "/clock", 10)

            def tick() -> None:
                msg = Clock()
                msg.clock = self.node.get_clock().now().to_msg()
                clock_pub.publish(msg)

            self.node.create_timer(1.0 / clock_hz, tick)
        self._spin = threading.Thread(target=self.executor.spin, name="robot-spin", daemon=True)
        self._spin.start()

        self.outcomes: dict[str, Outcome] = {}
        self._ignored: set[str] = set()  # readiness probes: not part of the run
        self.unknown_results = 0  # results whose command this robot never sent
        self.results_received = 0
        self.lock = threading.Condition()
        self.fps = fps
        self.images_published = 0
        rng = np.random.default_rng(seed)
        self._frames = []
        for _ in range(4):  # a few distinct frames, cycled: the node cannot tell them apart by content
            msg = Image(height=height, width=width, encoding="rgb8", step=width * 3)
            msg.header.frame_id = "camera_color_optical_frame"
            msg.data = rng.integers(0, 256, (height, width, 3), dtype=np.uint8).tobytes()
            self._frames.append(msg)
        self._camera_stop = threading.Event()
        # Cleared, the stream pauses (a bench measuring one camera of several); set by default.
        self.streaming = threading.Event()
        self.streaming.set()
        self._camera = threading.Thread(target=self._stream, name="camera", daemon=True)

    # -- camera
    def start_camera(self) -> None:
        self._camera.start()

    def _stream(self) -> None:
        period = 1.0 / self.fps
        next_at = time.monotonic()
        i = 0
        while not self._camera_stop.is_set():
            if not self.streaming.wait(0.1):
                next_at = time.monotonic()  # paused: resume at the rate, without a burst
                continue
            msg = self._frames[i % len(self._frames)]
            now = self.node.get_clock().now().nanoseconds
            msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(now, 1_000_000_000)
            try:
                self.image_pub.publish(msg)
            except Exception:  # noqa: BLE001 - context shutting down at the end
                return
            self.images_published += 1
            i += 1
            next_at += period
            delay = next_at - time.monotonic()
            if delay > 0:
                self._camera_stop.wait(delay)
            else:
                next_at = time.monotonic()  # fell behind (loaded CPU): do not burst to catch up

    # -- commands and results
    def wait_for_node(self, node: NodeProcess, timeout: float) -> None:
        """Until the node is active: it subscribes to images and commands and publishes results."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not node.alive():
                raise RuntimeError(f"the node exited during start-up:\n{node.log_tail()}")
            if (self.command_pub.get_subscription_count() > 0 and self.image_pub.get_subscription_count() > 0
                    and self.node.count_publishers(self.node.resolve_topic_name("result")) > 0):
                return
            time.sleep(0.1)
        raise TimeoutError(f"the node did not become active within {timeout:.0f} s:\n{node.log_tail()}")

    def send(self, text: str) -> None:
        if text in self.outcomes:
            raise ValueError(f"command text {text!r} sent twice: results could not be told apart")
        with self.lock:
            self.outcomes[text] = Outcome(sent_at=time.monotonic())
        self.command_pub.publish(self._String(data=text))

    def _on_result(self, msg: Any) -> None:
        now = time.monotonic()
        stamp = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
        with self.lock:
            if msg.command in self._ignored:
                return
            self.results_received += 1
            outcome = self.outcomes.get(msg.command)
            if outcome is None:
                self.unknown_results += 1
            else:
                outcome.results.append((now, bool(msg.success), str(msg.error), stamp, len(msg.targets)))
            self.lock.notify_all()

    def wait_until_answering(self, node: NodeProcess, timeout: float) -> int:
        """
        Send probe commands until one succeeds, then forget them; returns the probes sent.

        The robot sees the node's image subscription before the node has matched the
        camera publisher, so a first command can still find no image. Measuring starts
        once the node has answered one command from the stream, and the probes (and
        any late results of theirs) never count as the run's commands.
        """
        deadline = time.monotonic() + timeout
        probes: list[str] = []
        while time.monotonic() < deadline:
            if not node.alive():
                raise RuntimeError(f"the node exited during start-up:\n{node.log_tail()}")
            text = f"readiness probe {len(probes)}: what is on the table?"
            self.send(text)
            probes.append(text)
            self.wait_outstanding(0, max(0.1, deadline - time.monotonic()))
            with self.lock:
                outcome = self.outcomes[text]
                if outcome.results and outcome.results[0][1]:
                    self.outcomes.clear()
                    self.results_received = 0
                    self._ignored = set(probes)
                    return len(probes)
            time.sleep(0.2)
        raise TimeoutError(f"the node answered no probe command within {timeout:.0f} s:\n{node.log_tail()}")

    def wait_outstanding(self, at_most: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self.lock:
            while sum(1 for o in self.outcomes.values() if not o.results) > at_most:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self.lock.wait(min(remaining, 0.5))
        return True

    def close(self) -> None:
        """
        Tear down in this thread, after the spin thread has returned.

        Destroying the node while the spin thread still holds it defers the destruction to
        that thread; Fast DDS then tears the participant down while the node process leaves
        and its discovery callbacks run, and that teardown was seen to spin forever holding
        the GIL (the harness hung after the last result). Joining first keeps it in one place.
        """
        self._camera_stop.set()
        if self._camera.is_alive():
            self._camera.join()
        self.executor.shutdown(timeout_sec=10.0)
        self._spin.join(timeout=10.0)
        self.node.destroy_node()
        self.context.try_shutdown()


def error_kind(error: str) -> str:
    """Return the stable part of an error text ("queue full", "model failure", ...)."""
    return error.split(":", 1)[0].strip() or "?"


def summarise(robot: Robot) -> dict[str, Any]:
    """Count everything the robot sent and received, with latency percentiles."""
    with robot.lock:
        outcomes = dict(robot.outcomes)
        unknown = robot.unknown_results
    lost = [t for t, o in outcomes.items() if not o.results]
    duplicated = [t for t, o in outcomes.items() if len(o.results) > 1]
    firsts = [(o.sent_at, o.results[0]) for o in outcomes.values() if o.results]
    ok = [(sent, r) for sent, r in firsts if r[1]]
    errors = Counter(error_kind(r[2]) for _, r in firsts if not r[1])
    latencies_ms = [(r[0] - sent) * 1e3 for sent, r in ok]
    frames_used = {r[3] for _, r in ok}
    return {
        "commands": len(outcomes),
        "results": sum(len(o.results) for o in outcomes.values()),
        "lost": len(lost),
        "duplicated": len(duplicated),
        "unknown_results": unknown,
        "succeeded": len(ok),
        "errors": dict(errors),
        "targets_total": sum(r[4] for _, r in ok),
        "latency_ms": {
            "p50": percentile(latencies_ms, 50), "p90": percentile(latencies_ms, 90),
            "p95": percentile(latencies_ms, 95), "p99": percentile(latencies_ms, 99),
            "max": max(latencies_ms) if latencies_ms else float("nan"),
            "mean": statistics.fmean(latencies_ms) if latencies_ms else float("nan"),
        },
        "images_published": robot.images_published,
        "frames_used": len(frames_used),
        # Keep-latest: every image no command used was superseded before it was needed.
        "images_dropped_keep_latest": max(0, robot.images_published - len(frames_used)),
        "lost_examples": lost[:5],
        "duplicated_examples": duplicated[:5],
    }


@contextmanager
def node_under_load(params: dict[str, Any], log_path: Path, width: int, height: int,
                    fps: float, clock_hz: float = 0.0) -> Iterator[tuple[NodeProcess, Robot]]:
    """
    Run the node process and a robot on a fresh namespace; both are shut down on the way out.

    The robot is closed and the node stopped (Ctrl-C, then kill) even when the load fails
    half-way, so a broken run never leaves a node process behind on a shared machine.
    Read ``node.exit_code`` after the block.
    """
    namespace = new_namespace()
    node = NodeProcess(params, namespace, log_path)
    robot = None
    try:
        robot = Robot(namespace, width, height, fps, clock_hz=clock_hz)
        yield node, robot
    finally:
        if robot is not None:
            robot.close()
        node.stop()


def new_namespace() -> str:
    return f"/m2sa_load_{os.getpid()}_{random.randrange(1 << 16)}"


def isolated_dds_env() -> None:
    """Loopback discovery on a domain of our own, before any rclpy context exists."""
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    os.environ.setdefault("ROS_DOMAIN_ID", str(random.Random(os.getpid()).randint(1, 101)))


def log_dir(path: str | None) -> Path:
    if path:
        p = Path(path)
        p.mkdir(parents=True, exist_ok=True)
        return p
    return Path(tempfile.mkdtemp(prefix="m2sa_load_"))


def context_lines(report: dict[str, Any], cmd: str) -> list[str]:
    """Return the lines that make a RESULTS.md section reproducible: when, where, what ran, which model."""
    return [
        f"- date: {utc_now()}; load average at the end: {load_average()}",
        f"- machine: {machine_line()}",
        f"- command: `{cmd}` (commit {report['revision']})",
        f"- model: {report['model']}; max_new_tokens {report['params']['max_new_tokens']}, "
        f"max_queue {report['params']['max_queue']}, device cpu",
    ]


def error_counts(report: dict[str, Any]) -> str:
    """Return "kind: n, ..." of the error results, sorted so runs compare line by line; "none" if none."""
    return ", ".join(f"{k}: {v}" for k, v in sorted(report["errors"].items())) or "none"


def publish(text: str, report: dict[str, Any], results: Path, write: bool, json_path: Path | None) -> None:
    """
    Print the section, append it to ``results`` when ``write``, and dump the report as JSON if asked.

    The one way every benchmark does it: ``bench.common.publish_report``.
    """
    publish_report(text, report, results, write, json_path)
