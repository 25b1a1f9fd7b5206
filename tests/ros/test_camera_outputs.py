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
A camera's outputs, without a node: the narrow object the pipeline delivers on (cameras/camera_outputs.py).

The result goes out, then its detections (successful results only); the views only while
someone listens, the overlay only when asked; a publish that fails loses that message
alone. The pipeline reaches a camera's publishers through this object only.
"""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace
from typing import Any

from m2sa_core.types import Granularity, Result, Target
from m2sa_ros.cameras.camera_outputs import CameraOutputs
from m2sa_ros.cameras.camera_state import Camera
from m2sa_ros.cameras.latest_frame import Frame
from m2sa_ros.diagnostics.node_status import NodeStats
from m2sa_ros.messages.result_conversion import error_result, result_to_msg, ResultOrigin
from m2sa_ros.params.node_params import PARAMETERS, validate
from m2sa_ros.pipeline import CommandPipeline, Request
import numpy as np
from std_msgs.msg import Header

HEIGHT, WIDTH = 6, 8


class _Publisher:
    """Keeps what it is given; ``listeners`` is its subscription count; ``fails`` raises instead."""

    def __init__(self, name: str, log: list[str], listeners: int = 1, fails: bool = False) -> None:
        self.name, self._log, self.listeners, self.fails = name, log, listeners, fails
        self.sent: list[Any] = []

    def publish(self, msg: Any) -> None:
        if self.fails:
            raise RuntimeError(f"{self.name} context invalid")
        self.sent.append(msg)
        self._log.append(self.name)

    def get_subscription_count(self) -> int:
        return self.listeners


def _outputs(log: list[str], reports: list[str], **overrides: Any) -> CameraOutputs:
    names = ("result", "labels", "overlay", "markers", "points", "detections_2d", "detections_3d")
    pubs = {name: _Publisher(name, log) for name in names}
    pubs.update(overrides)
    return CameraOutputs(**pubs, log_error=lambda text: reports.append(f"error: {text}"),
                         warn_once=lambda key, text: reports.append(f"{key}: {text}"))


def _result() -> tuple[Result, Frame, Any]:
    mask = np.zeros((HEIGHT, WIDTH), dtype=bool)
    mask[1:4, 2:6] = True
    result = Result(answer="the mug_1 [SEG]", targets=[Target("mug_1", "mug", 1, "", Granularity.OBJECT, mask)])
    header = Header(frame_id="camera_optical")
    frame = Frame(rgb=np.zeros((HEIGHT, WIDTH, 3), dtype=np.uint8), header=header, key="k", stamp_ns=1,
                  received_at=0.0, height=HEIGHT, width=WIDTH)
    msg = result_to_msg(result, ResultOrigin("r1", "the mug", header, HEIGHT, WIDTH), 1.0)
    return result, frame, msg


def test_a_successful_result_goes_out_before_its_detections():
    log: list[str] = []
    reports: list[str] = []
    outputs = _outputs(log, reports)
    _, _, msg = _result()
    outputs.publish_result(msg, "the result of r1")
    assert log == ["result", "detections_2d", "detections_3d"] and reports == []
    assert outputs.result.sent == [msg]
    assert len(outputs.detections_2d.sent[0].detections) == 1


def test_a_failed_result_publishes_no_detections():
    log: list[str] = []
    outputs = _outputs(log, [])
    outputs.publish_result(error_result("model failure: x", ResultOrigin("r1", "c")), "the result of r1")
    assert log == ["result"]


def test_a_failed_result_publish_is_logged_and_the_detections_still_go_out():
    log: list[str] = []
    reports: list[str] = []
    outputs = _outputs(log, reports, result=_Publisher("result", log, fails=True))
    outputs.publish_result(_result()[2], "the result of r1")
    assert log == ["detections_2d", "detections_3d"]
    assert reports == ["error: could not publish the result of r1: result context invalid"]


def test_views_go_only_to_listened_topics_and_the_overlay_only_when_asked():
    log: list[str] = []
    outputs = _outputs(log, [], markers=_Publisher("markers", log, listeners=0))
    result, frame, msg = _result()
    outputs.publish_views(frame, result, msg, publish_overlay=False)
    assert log == ["labels", "points"]
    labels = outputs.labels.sent[0]
    assert (labels.height, labels.width, labels.encoding) == (HEIGHT, WIDTH, "mono16")
    assert labels.header.frame_id == "camera_optical"
    log.clear()
    outputs.publish_views(frame, result, msg, publish_overlay=True)
    assert log == ["labels", "overlay", "points"]


def test_a_view_that_fails_is_warned_once_by_cause_and_the_others_still_go_out():
    log: list[str] = []
    reports: list[str] = []
    outputs = _outputs(log, reports, labels=_Publisher("labels", log, fails=True))
    result, frame, msg = _result()
    outputs.publish_views(frame, result, msg, publish_overlay=True)
    assert log == ["overlay", "markers", "points"]
    assert reports == ["labels:RuntimeError: labels not published: labels context invalid"]


def test_an_empty_outputs_publishes_nothing_and_holds_no_publisher():
    outputs = CameraOutputs()
    result, frame, msg = _result()
    outputs.publish_result(msg, "the result of r1")
    outputs.publish_views(frame, result, msg, publish_overlay=True)
    assert outputs.publishers() == []
    assert len(_outputs([], []).publishers()) == 7


def test_the_pipeline_delivers_a_request_s_one_result_through_its_camera_s_outputs():
    """finish(): counted, published on the request's camera's outputs, then handed to its caller."""
    log: list[str] = []
    camera = Camera(name="head", key_prefix="test")
    camera.outputs = _outputs(log, [])
    pipeline = CommandPipeline(SimpleNamespace(error=print, warning=print), NodeStats(), Counter(),
                               topic_name=lambda name: name, warn_once=lambda key, text: None)
    defaults = {spec.name: spec.default for spec in PARAMETERS}
    pipeline.load(SimpleNamespace(), validate({**defaults, "heap_trim_period": 0.0}))
    answers: list[Any] = []
    req = Request(request_id="r1", command="the mug", source="topic", received_ns=0, camera=camera,
                  on_done=lambda msg: answers.append((list(log), msg)))
    _, _, msg = _result()
    pipeline.finish(req, msg)
    assert answers == [(["result", "detections_2d", "detections_3d"], msg)]
    assert (camera.stats.results, camera.stats.errors, pipeline.stats.results) == (1, 0, 1)
