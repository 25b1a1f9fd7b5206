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
A camera that stops mid-run, over DDS: /diagnostics says so, and a command on its last frame is refused.

The camera is a thread publishing frames stamped now at about 20 Hz, as a driver does;
every wait ends on what /diagnostics or the result topic says. The levels' arithmetic
(windows, floors, silence) is test_camera_health.py's, on given times.
"""

from __future__ import annotations

import threading
from typing import Any

from fake_models import ScriptedSegmenter
from node_harness import now_ns, wait_until
import pytest
from scenes import random_scene, stamped_image

pytestmark = [pytest.mark.ros, pytest.mark.integration]

OK, WARN, ERROR = b"\x00", b"\x01", b"\x02"


class _Camera:
    """Frames stamped now on ``image`` at about ``hz`` until stopped."""

    def __init__(self, graph: Any, node: Any, hz: float = 20.0) -> None:
        from sensor_msgs.msg import Image

        self.pub, self.node, self.period = graph.publisher(Image, "image", 1), node, 1.0 / hz
        self.rgb = random_scene()
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.period):  # a driver's frame period, not a wait for the node
            self.pub.publish(stamped_image(self.rgb, now_ns(self.node)))

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(5)


def _status(diagnostics: list, suffix: str) -> Any:
    """Return the newest status whose name ends with ``suffix`` (None before one came)."""
    for array in reversed(list(diagnostics)):
        for status in array.status:
            if status.name.endswith(suffix):
                return status
    return None


def _level_is(diagnostics: list, suffix: str, level: bytes, what: str) -> Any:
    return wait_until(lambda: (s := _status(diagnostics, suffix)) is not None and s.level == level and s, 30, what)


def test_a_camera_that_stops_warns_then_errors_and_a_command_on_its_last_frame_is_refused(graph, tiny):
    from diagnostic_msgs.msg import DiagnosticArray
    from m2sa_ros.msg import SegmentationResult
    from std_msgs.msg import String

    # max_image_age 1 s is the node's default (the harness's still camera takes any age).
    node = graph.add_node(ScriptedSegmenter(tiny), diagnostics_period=0.1, max_image_age=1.0, image_timeout=2.5,
                          image_min_rate=5.0, failed_commands_error=2)
    graph.start(node)
    diagnostics = graph.collect(DiagnosticArray, "/diagnostics", 50)
    results = graph.collect(SegmentationResult, "result")
    commands = graph.publisher(String, "command")
    camera = _Camera(graph, node)

    rate = _level_is(diagnostics, ": image rate", OK, "the live camera's rate OK")
    assert rate.message.endswith(" Hz on /image") and float(rate.message.split()[0]) >= 5.0, rate.message
    _level_is(diagnostics, ": image stamp", OK, "the live camera's stamps OK")
    commands.publish(String(data="I want to turn on the TV"))
    assert wait_until(lambda: results, 60, "the live camera's result")[0].success, results[0].error

    camera.stop()
    stamp = _level_is(diagnostics, ": image stamp", WARN, "the stopped camera's stamp WARN")
    assert "over max_image_age 1 s: commands are refused" in stamp.message, stamp.message
    commands.publish(String(data="I want to turn on the TV"))
    refused = wait_until(lambda: len(results) > 1 and results[1], 60, "the command on the last frame")
    assert not refused.success and refused.error.startswith("image too old: ") and \
        refused.error.endswith(" > max_image_age 1.00 s"), refused.error
    assert refused.targets == [] and refused.request_id

    dead = _level_is(diagnostics, ": image rate", ERROR, "the stopped camera's rate ERROR")
    assert dead.message.startswith("no image on /image for "), dead.message
    values = {kv.key: kv.value for kv in dead.values}
    assert float(values["seconds_since_last_image"]) >= 2.5 and int(values["images_received"]) > 0
    # One refusal is not yet the node's failure; the second in a row is (failed_commands_error 2).
    assert _status(diagnostics, ": m2sa perception").level != ERROR
    commands.publish(String(data="and now?"))
    wait_until(lambda: len(results) > 2, 60, "the second refused command")
    node_status = _level_is(diagnostics, ": m2sa perception", ERROR, "the node's ERROR after two failures")
    assert node_status.message.startswith("the last 2 results failed, the last with: image too old: "), \
        node_status.message
