"""Node health for /diagnostics: what an operator checks in rqt_robot_monitor.

:class:`NodeStats` is updated by the worker (latency, errors) and read by a timer that
publishes a diagnostic_msgs/DiagnosticArray. diagnostic_updater is not on PyPI, and
the node needs one status per camera only, so it is built here directly.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

OK, WARN, ERROR = 0, 1, 2  # diagnostic_msgs/DiagnosticStatus levels (bytes in the message)


@dataclass
class NodeStats:
    """Counters and latencies, thread-safe; latencies keep a window for the mean."""

    window: int = 100
    results: int = 0
    errors: int = 0
    queue_full: int = 0
    last_error: str = ""
    last_latency_ms: float = 0.0
    _latencies: deque = field(default_factory=deque)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, success: bool, latency_ms: float, error: str = "") -> None:
        with self._lock:
            self.results += 1
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

    @property
    def mean_latency_ms(self) -> float:
        with self._lock:
            return sum(self._latencies) / len(self._latencies) if self._latencies else 0.0

    def snapshot(self) -> dict[str, Any]:
        mean = self.mean_latency_ms
        with self._lock:
            return {"results": self.results, "errors": self.errors, "queue_full": self.queue_full,
                    "last_error": self.last_error, "last_latency_ms": self.last_latency_ms,
                    "mean_latency_ms": mean}


def status_level(state: str, untrained: bool, queue_depth: int, max_queue: int,
                 configure_error: str = "") -> tuple[int, str]:
    """(level, one-line summary) of the node's lifecycle ``state``.

    ``state`` is "unconfigured", "configuring", "inactive" or "active". A node left
    unconfigured on purpose (``autostart: false``, or cleaned up to swap models) is not
    an error; only a configure that failed is, and its reason is the message.
    """
    if state == "configuring":
        return OK, "configuring: loading the model"
    if state == "unconfigured":
        if configure_error:
            return ERROR, f"configure failed: {configure_error}"
        return OK, "unconfigured: no model loaded (waiting for configure)"
    if untrained:
        return WARN, "running an UNTRAINED model (random weights)"
    if state != "active":
        return WARN, "model loaded, node inactive"
    if max_queue and queue_depth >= max_queue:
        return WARN, "command queue full"
    return OK, "ready"


def build_diagnostics(name: str, hardware_id: str, level: int, message: str,
                      values: Mapping[str, Any], stamp: Any = None):
    """diagnostic_msgs/DiagnosticArray with one status of ``values`` as key/value pairs."""
    return build_diagnostics_array([(name, level, message, values)], hardware_id, stamp)


def build_diagnostics_array(statuses: Sequence[tuple[str, int, str, Mapping[str, Any]]], hardware_id: str,
                            stamp: Any = None):
    """diagnostic_msgs/DiagnosticArray of several (name, level, message, values) statuses.

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
