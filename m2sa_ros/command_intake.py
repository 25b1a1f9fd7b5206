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
Command intake: the four ways a command arrives, each made a :class:`~m2sa_ros.pipeline.Request`.

``command`` (plain text, a request id made here), ``command_stamped`` (the planner's
request id and stamp), the ``segment`` service and the ``segment`` action all hand the
pipeline a Request and nothing else, so every one gets exactly one result the same way
(pipeline.py). The service and the action wait for it inside their callback, as rclpy
needs, within the node's cap on waiting calls (rclpy_support/blocking_calls.py); an
image in a service request or goal is converted here and answered with its fault. The
node wires these callbacks to each camera's topics, service and action; ``track`` is
tracking/track_action.py's.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable
import uuid

from m2sa_ros.action import Segment as SegmentAction
from m2sa_ros.cameras.camera_state import Camera
from m2sa_ros.cameras.latest_frame import Frame
from m2sa_ros.messages.answer_feedback import AnswerFeedback
from m2sa_ros.messages.image_conversion import conversion_error, image_to_rgb, stamp_ns
from m2sa_ros.messages.result_conversion import error_result, ResultOrigin
from m2sa_ros.msg import Command, SegmentationResult
from m2sa_ros.pipeline import CommandPipeline, Request
from m2sa_ros.rclpy_support.blocking_calls import Answer, BlockingCalls
from m2sa_ros.srv import Segment as SegmentSrv
from std_msgs.msg import String


class CommandIntake:
    """
    Topic, service and action callbacks that turn a command into a Request for ``pipeline``.

    ``now_ns()`` is the node's clock (a command's ``received_ns``), ``alive()`` tells
    whether its context still runs (a waiting call gives up when it does not),
    ``id_prefix`` starts the request ids made here, and ``default_camera()`` is the
    camera of a callback called without one (the single camera's).
    """

    def __init__(self, pipeline: CommandPipeline, calls: BlockingCalls, *, now_ns: Callable[[], int],
                 alive: Callable[[], bool], id_prefix: str, default_camera: Callable[[], Camera]) -> None:
        self._pipeline = pipeline
        self._calls = calls
        self._now_ns = now_ns
        self._alive = alive
        self.id_prefix = id_prefix
        self._default_camera = default_camera
        self._count = 0
        self._count_lock = threading.Lock()

    def new_request_id(self) -> str:
        """Return the next request id of a command that came without one."""
        with self._count_lock:
            self._count += 1
            return f"{self.id_prefix}-{self._count}"

    def on_command(self, msg: String, camera: Camera | None = None) -> None:
        self._pipeline.accept(Request(request_id=self.new_request_id(), command=msg.data, source="topic",
                                      received_ns=self._now_ns(), camera=camera or self._default_camera()))

    def on_command_stamped(self, msg: Command, camera: Camera | None = None) -> None:
        """Accept a command with the planner's request id; its stamp (when set) is when it was given."""
        stamp = stamp_ns(msg.header)
        self._pipeline.accept(Request(request_id=msg.request_id or self.new_request_id(), command=msg.text,
                                      source="topic", received_ns=stamp if stamp > 0 else self._now_ns(),
                                      camera=camera or self._default_camera()))

    def request_from(self, goal: Any, source: str, request_id: str, camera: Camera | None = None) -> Request:
        """Request for a service / action goal; an image in the goal is converted here."""
        request = Request(request_id=goal.request_id or request_id, command=goal.command, source=source,
                          received_ns=self._now_ns(), max_image_age=float(goal.max_image_age),
                          camera=camera or self._default_camera())
        image = goal.image
        if image.height > 0 or image.width > 0 or len(image.data) > 0:
            what = f"{source} request image"
            try:
                rgb, error = image_to_rgb(image, what=what), ""
            except Exception as exc:  # noqa: BLE001 - the request is answered with the reason
                rgb, error = None, conversion_error(exc, what)
            request.frame = Frame(rgb=rgb, header=image.header, key="", stamp_ns=stamp_ns(image.header),
                                  received_at=time.monotonic(), height=int(image.height), width=int(image.width),
                                  error=error)
        return request

    def on_service(self, request: SegmentSrv.Request, response: SegmentSrv.Response,
                   camera: Camera | None = None) -> SegmentSrv.Response:
        req = self.request_from(request, "service", f"{self.id_prefix}-srv-{uuid.uuid4().hex[:8]}", camera)
        with self._calls.admit() as admitted:
            response.result = self.answer(req) if admitted else self._pipeline.refuse(req, self._calls.too_many())
            return response

    def on_goal(self, goal_handle: Any, camera: Camera | None = None) -> Any:
        """Execute a ``segment`` goal: feedback while it runs, then succeeded, canceled or aborted with its result."""
        req = self.request_from(goal_handle.request, "action", uuid.UUID(bytes=bytes(goal_handle.goal_id.uuid)).hex,
                                camera)
        with self._calls.admit() as admitted:
            if not admitted:
                goal_handle.abort()
                return SegmentAction.Result(result=self._pipeline.refuse(req, self._calls.too_many()))
            feedback = AnswerFeedback(lambda stage, partial: goal_handle.publish_feedback(
                SegmentAction.Feedback(stage=stage, partial_answer=partial)))
            req.on_feedback = feedback.update
            result = self.answer(req, stop_when=lambda: goal_handle.is_cancel_requested)
            if goal_handle.is_cancel_requested and result.error.startswith("cancelled"):
                goal_handle.canceled()
            elif result.success:
                goal_handle.succeed()
            else:
                goal_handle.abort()
            return SegmentAction.Result(result=result)

    def answer(self, req: Request, stop_when: Callable[[], bool] | None = None) -> SegmentationResult:
        """Hand ``req`` to the pipeline and wait for its one result, on the caller's executor thread."""
        answer = Answer()
        req.on_done = answer
        self._pipeline.accept(req, stop_when)
        result = answer.wait(self._alive)
        if result is None:
            return error_result("node shutting down", ResultOrigin(req.request_id, req.command))
        return result
