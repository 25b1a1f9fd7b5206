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
Node health for /diagnostics: what an operator checks in rqt_robot_monitor.

:class:`NodeStats` is updated by the worker (latency, errors) and read by a timer that
publishes a diagnostic_msgs/DiagnosticArray. diagnostic_updater is not on PyPI, and
the node needs one status per camera only, so it is built here directly.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
import threading
from typing import Any, Mapping, Sequence

OK, WARN, ERROR = 0, 1, 2  # diagnostic_msgs/DiagnosticStatus levels (bytes in the message)


@dataclass
class NodeStats:
    """Counters and latencies, thread-safe; latencies keep a window for the mean."""

    window: int = 100
    results: int = 0
    errors: int = 0
    failed_in_a_row: int = 0  # results that failed since the last one that succeeded
    queue_full: int = 0
    last_error: str = ""
    last_latency_ms: float = 0.0
    # target_frame (frame_transform.py): results moved into it, results left in the optical frame.
    tf_transformed: int = 0
    tf_failed: int = 0
    tf_last_error: str = ""
    _latencies: deque = field(default_factory=deque)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, success: bool, latency_ms: float, error: str = "") -> None:
        with self._lock:
            self.results += 1
            self.failed_in_a_row = 0 if success else self.failed_in_a_row + 1
            if success:
                self.last_latency_ms = float(latency_ms)
                self._latencies.append(float(latency_ms))
                while len(self._latencies) > self.window:
                    self._latencies.popleft()
            else:
                self.errors += 1
                self.last_error = error
                if error.startswith("queue full"):
                    self.queue_full += 1

    def record_transform(self, moved: bool, error: str = "") -> None:
        """One result's target_frame outcome: moved into it, or left in the optical frame (``error``)."""
        with self._lock:
            if moved:
                self.tf_transformed += 1
            else:
                self.tf_failed += 1
                self.tf_last_error = error

    @property
    def mean_latency_ms(self) -> float:
        with self._lock:
            return sum(self._latencies) / len(self._latencies) if self._latencies else 0.0

    def snapshot(self) -> dict[str, Any]:
        mean = self.mean_latency_ms
        with self._lock:
            return {"results": self.results, "errors": self.errors, "failed_in_a_row": self.failed_in_a_row,
                    "queue_full": self.queue_full,
                    "last_error": self.last_error, "last_latency_ms": self.last_latency_ms,
                    "mean_latency_ms": mean, "tf_transformed": self.tf_transformed,
                    "tf_failed": self.tf_failed, "tf_last_error": self.tf_last_error}


def status_level(state: str, untrained: bool, queue_depth: int, max_queue: int,
                 configure_error: str = "", *, toy: bool = False, failed_in_a_row: int = 0,
                 failed_commands_error: int = 0, last_error: str = "", depth_refused: str = "") -> tuple[int, str]:
    """
    (level, one-line summary) of the node's lifecycle ``state``.

    ``state`` is "unconfigured", "configuring", "inactive" or "active". A node left
    unconfigured on purpose (``autostart: false``, or cleaned up to swap models) is not
    an error; only a configure that failed is, and its reason is the message. Results
    that keep failing (``failed_commands_error`` in a row) are an error whatever the
    model; the shipped tiny model (``toy``) answers only its synthetic scenes, which a
    robot's operator must see before trusting an answer, though any other warning
    (``depth_refused``: the reason the last frame's depth was refused) says more.
    """
    if state == "configuring":
        return OK, "configuring: loading the model"
    if state == "unconfigured":
        if configure_error:
            return ERROR, f"configure failed: {configure_error}"
        return OK, "unconfigured: no model loaded (waiting for configure)"
    if failed_commands_error and failed_in_a_row >= failed_commands_error:
        return ERROR, f"the last {failed_in_a_row} results failed, the last with: {last_error}"
    if untrained:
        return WARN, "running an UNTRAINED model (random weights)"
    if state != "active":
        return WARN, "model loaded, node inactive"
    if max_queue and queue_depth >= max_queue:
        return WARN, "command queue full"
    if depth_refused:
        return WARN, f"depth refused: {depth_refused}"
    if toy:
        return WARN, "running the shipped tiny model: it knows only the synthetic test scenes (set model_path)"
    return OK, "ready"


def node_statuses(name: str, cameras: Sequence[Any], worker: Any, *, state: str, configure_error: str,
                  untrained: bool, model: str, device: str, max_queue: int, stats: NodeStats,
                  batches: Mapping[int, int], cache: Any, now_ns: int = 0, toy: bool = False,
                  failed_commands_error: int = 0) -> list[tuple[str, int, str, dict[str, Any]]]:
    """
    Return the node's (name, level, message, values) statuses: one for a single camera, one per camera with several.

    ``cameras`` have ``name``, ``lane`` and their own ``stats``; ``worker`` (None while
    inactive) tells each lane's queue depth and whether it is busy; ``stats`` counts all
    cameras together, which is what the single camera reports; ``max_queue`` is the
    configured one (0 unconfigured). The model and its batches are shared, so with
    several cameras the same model and batch figures stand under every camera. Depth is
    always per camera (:func:`depth_values`, ages against ``now_ns``, the node's clock).
    """
    several = len(cameras) > 1
    statuses = []
    for camera in cameras:
        snapshot = camera.stats.snapshot() if several else stats.snapshot()
        depth = worker.depth_of(camera.lane) if worker else 0
        health = camera.depth_health.snapshot()
        refused = health["depth_last_reason"] if health["depth_last_state"] == "refused" else ""
        level, message = status_level(state, untrained, depth, worker.max_queue if worker else 0, configure_error,
                                      toy=toy, failed_in_a_row=snapshot["failed_in_a_row"],
                                      failed_commands_error=failed_commands_error,
                                      last_error=snapshot["last_error"], depth_refused=refused)
        values: dict[str, Any] = {
            "model": model,
            "device": device,
            "state": state,
            "queue_depth": depth,
            "max_queue": worker.max_queue if worker else max_queue,
            "busy": bool(worker and worker.busy_with(camera.lane)),
            "last_latency_ms": snapshot["last_latency_ms"],
            "mean_latency_ms": snapshot["mean_latency_ms"],
            "results": snapshot["results"],
            "errors": snapshot["errors"],
            "failed_in_a_row": snapshot["failed_in_a_row"],
            "queue_full": snapshot["queue_full"],
            "last_error": snapshot["last_error"],
            "tf_transformed": snapshot["tf_transformed"],
            "tf_failed": snapshot["tf_failed"],
            "tf_last_error": snapshot["tf_last_error"],
            "image_age_ms": image_age_ms(camera, now_ns),
            "result_subscribers": result_subscribers(camera),
        }
        values.update(depth_values(camera, now_ns, health))
        if several:
            values = {"camera": camera.name, **values, "cameras": ", ".join(c.name for c in cameras),
                      "batched_calls": sum(batches.values()),
                      "batched_commands": sum(n * k for n, k in batches.items())}
        if isinstance(cache, dict):
            values.update({f"cache_{k}": v for k, v in cache.items()})
        statuses.append((f"{name} ({camera.name})" if several else name, level, message, values))
    return statuses


def result_subscribers(camera: Any) -> int:
    """
    Return how many subscriptions the camera's result publisher has matched (0 while it has none).

    Matched by this node's own publisher, not merely seen in the graph: a reader started a
    moment before a command (``ros2 topic echo``) gets the result only once this counts it,
    since each pair of participants discovers the other on its own.
    """
    publisher = camera.outputs.result
    return int(publisher.get_subscription_count()) if publisher is not None else 0


def image_age_ms(camera: Any, now_ns: int) -> float | str:
    """
    Return how old the camera's newest colour image is (ms from its stamp to ``now_ns``).

    "none received" before the first: what tells an operator whose commands end "no image
    yet" whether the node is subscribed to a camera that is not publishing, or to none.
    """
    frame = camera.latest.peek()  # the stamp only: a compressed frame stays undecoded
    return "none received" if frame is None else (now_ns - frame.stamp_ns) / 1e6


def depth_values(camera: Any, now_ns: int, health: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """
    Return one camera's depth values for /diagnostics.

    Frames whose depth was bound / missing / refused (depth_health.py), the last frame's
    state and reason, and how old the newest depth and camera_info are (ms from their stamp
    to ``now_ns``; "none received" before the first).

    What an operator reads when targets have no 3-D: nothing received, stamps far from the
    colour image's (an old age), or depth that is there but refused (the reason).
    """
    values = dict(health if health is not None else camera.depth_health.snapshot())
    for key, buffer in (("depth_age_ms", camera.depth), ("camera_info_age_ms", camera.camera_info)):
        stamp = buffer.newest_stamp()
        values[key] = "none received" if stamp is None else (now_ns - stamp) / 1e6
    return values


def build_diagnostics(name: str, hardware_id: str, level: int, message: str,
                      values: Mapping[str, Any], stamp: Any = None):
    """diagnostic_msgs/DiagnosticArray with one status of ``values`` as key/value pairs."""
    return build_diagnostics_array([(name, level, message, values)], hardware_id, stamp)


def build_diagnostics_array(statuses: Sequence[tuple[str, int, str, Mapping[str, Any]]], hardware_id: str,
                            stamp: Any = None):
    """
    diagnostic_msgs/DiagnosticArray of several (name, level, message, values) statuses.

    A node serving several cameras reports one status per camera, each named after its
    camera, so rqt_robot_monitor shows which camera is backed up or failing.
    """
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue

    array = DiagnosticArray()
    for name, level, message, values in statuses:
        status = DiagnosticStatus(level=bytes([level]), name=name, message=message, hardware_id=hardware_id)
        for key, value in values.items():
            text = f"{value:.1f}" if isinstance(value, float) else str(value)
            status.values.append(KeyValue(key=str(key), value=text))
        array.status.append(status)
    if stamp is not None:
        array.header.stamp = stamp
    return array
