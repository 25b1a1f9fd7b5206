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
The ``track`` action: a command answered once by the full model, then followed frame by frame.

The first answer goes through the command pipeline like any command, keeping the
model's [SEG] prompts; every new camera frame after it is re-segmented from those
prompts with SAM alone (``Segmenter.track``), much cheaper than asking again. The
frames share the one worker queue with commands, at most one waiting per track, so
commands still get through. The goal ends once - cancel, timeout, every target lost, an
answer naming no target (interfaces v6: the result's outcome OUTCOME_ABSENT, the reason
"absent: ..."), a failure or the node stopping - with one final result and the reason; the per-track
decisions (when a frame is due, when a target is lost) live in tracks.py. A tracked
frame binds its own depth and goes through the pipeline's one conversion
(``CommandPipeline.track``), so its targets carry centroids, poses and points like a
command's: a track's targets move in 3-D. Each frame's result goes out once whole, on the
result topic; its feedback carries the same result without masks and points
(``result_conversion.feedback_result``, interfaces v5), so a frame is not sent twice.

What the track action asks of the pipeline is narrow: accept, refuse and answer a
command (the first answer), queue a frame (``submit``), run one tracked frame
(``track``) and publish its result (``publish_tracked``, ``publish_views``). The model,
the parameters, the worker and the counters stay the pipeline's. :class:`TrackGoals`
is the worker's handler of tracked frames (``run``, ``reject``, ``crashed``).
"""

from __future__ import annotations

from dataclasses import dataclass
import time
import traceback
from typing import Any, Callable
import uuid

from m2sa_ros.action import Track as TrackGoal
from m2sa_ros.cameras.camera_state import Camera
from m2sa_ros.messages.result_conversion import feedback_result
from m2sa_ros.msg import SegmentationResult
from m2sa_ros.pipeline import CommandPipeline, Request
from m2sa_ros.rclpy_support.blocking_calls import Answer, BlockingCalls
from m2sa_ros.tracking.tracks import ABSENT_PREFIX, CANCELLED, ERROR_PREFIX, LOST, TIMEOUT, Track, TrackSettings
from m2sa_ros.worker import Job


@dataclass(frozen=True)
class TrackFrame:
    """A worker job's payload: the next new camera frame of one track (the newest when it runs)."""

    track: Track
    camera: Camera


class TrackGoals:
    """
    Runs ``track`` goals on the node's pipeline; the handler of their frames' worker jobs.

    ``now_ns`` is the node's clock (a goal's arrival), ``alive`` whether its context
    still runs; the blocking-call cap is shared with the ``segment`` service and action.
    """

    def __init__(self, pipeline: CommandPipeline, calls: BlockingCalls, logger: Any, *,
                 now_ns: Callable[[], int], alive: Callable[[], bool]) -> None:
        self._pipeline = pipeline
        self._calls = calls
        self._logger = logger
        self._now_ns = now_ns
        self._alive = alive

    def execute(self, goal_handle: Any, camera: Camera) -> Any:
        """
        Return the execute callback: the command once with the full model, then every new frame.

        Blocks its executor thread until the track ends (like the ``segment`` action, it
        counts against the blocking-call cap); the worker delivers the answer and the
        tracked frames as feedback meanwhile. Exactly one final result, with the reason.
        """
        goal = goal_handle.request
        request_id = goal.request_id or uuid.UUID(bytes=bytes(goal_handle.goal_id.uuid)).hex
        req = Request(request_id=request_id, command=goal.command, source="track", received_ns=self._now_ns(),
                      keep_prompts=True, camera=camera)
        with self._calls.admit() as admitted:
            if not admitted:
                msg = self._pipeline.refuse(req, self._calls.too_many())
                return self._end_goal(goal_handle, msg, 0, ERROR_PREFIX + msg.error)
            return self._run(goal_handle, req)

    def _run(self, goal_handle: Any, req: Request) -> Any:
        pipeline = self._pipeline
        try:
            settings = TrackSettings.from_goal(goal_handle.request)
        except ValueError as exc:
            msg = pipeline.refuse(req, f"bad track goal: {exc}")
            return self._end_goal(goal_handle, msg, 0, ERROR_PREFIX + msg.error)
        camera = req.camera
        track = Track(req.request_id, req.command, settings, time.monotonic(), handle=goal_handle,
                      camera=camera.name)
        prompts: list[tuple[Any, str]] = []

        def start_tracking(msg: SegmentationResult) -> None:
            if msg.success and prompts and prompts[0][0] is not None:
                feedback = TrackGoal.Feedback(result=feedback_result(msg), frame_seq=0)
                track.answered(prompts[0][0], prompts[0][1], msg, lambda: goal_handle.publish_feedback(feedback),
                               missing=msg.missing)
            elif goal_handle.is_cancel_requested:
                track.end(CANCELLED, last=msg)
            else:
                track.end(ERROR_PREFIX + (msg.error or "the model returned no prompts to track"), last=msg)

        answer = Answer(then=start_tracking)
        req.on_model_result = lambda result, frame: prompts.append((getattr(result, "prompts", None), frame.key))
        req.on_done = answer
        camera.tracks.add(track)
        try:
            pipeline.accept(req, stop_when=lambda: goal_handle.is_cancel_requested or not track.active)
            while not track.ended.wait(0.05):
                track.check(time.monotonic(), goal_handle.is_cancel_requested)
                if not self._alive():
                    track.end("node shutting down")
            answer.wait(self._alive)  # a command still running stops at its next check
        finally:
            camera.tracks.remove(track)
        final = track.last if track.last is not None else (
            answer.result if answer.result is not None else pipeline.error(req, track.reason))
        return self._end_goal(goal_handle, final, track.frames, track.reason)

    def _end_goal(self, goal_handle: Any, msg: SegmentationResult, frames: int, reason: str) -> Any:
        """Set the goal's status from the reason: cancelled, succeeded (timeout, lost, absent) or aborted."""
        if reason == CANCELLED and goal_handle.is_cancel_requested:
            goal_handle.canceled()
        elif reason in (TIMEOUT, LOST) or reason.startswith(ABSENT_PREFIX):
            goal_handle.succeed()
        else:
            goal_handle.abort()
        self._logger.info(f"track {msg.request_id} ended after {frames} frame(s): {reason}")
        return TrackGoal.Result(result=msg, frames=frames, reason=reason)

    def schedule(self, camera: Camera) -> None:
        """Queue the newest frame for each track that wants it (image callback, after each tracked frame)."""
        frame = camera.latest.peek()  # the key only: the track's run decodes the frame it takes
        if frame is None or frame.error or not self._pipeline.active:
            return
        for track in camera.tracks.due(frame.key, time.monotonic()):
            job = Job(payload=TrackFrame(track, camera), handler=self, bounded=False, lane=camera.lane,
                      batchable=False)
            if not self._pipeline.submit(job):
                track.dropped()

    # ------------------------------------------------------------------ the worker's handler
    def run(self, job: Job) -> None:
        """Worker thread: one tracked frame of a track on the newest frame of its camera."""
        track, camera = job.payload.track, job.payload.camera
        pipeline, frame = self._pipeline, camera.latest.get()
        if not pipeline.loaded or frame is None or frame.rgb is None:
            track.dropped()
            return
        if not track.take(frame.key, time.monotonic()):
            return
        step = pipeline.track(frame, camera, track)
        if step is None:  # unloaded meanwhile (a worker that outlived its stop)
            track.dropped()
            return
        if step.error:
            track.end(ERROR_PREFIX + step.error, last=step.msg)
            return

        def deliver(seq: int) -> None:
            pipeline.publish_tracked(step.msg, camera)
            track.handle.publish_feedback(TrackGoal.Feedback(result=feedback_result(step.msg), frame_seq=seq))

        if track.record(step.result, step.state, step.msg, deliver):
            pipeline.publish_views(frame, step.result, step.msg, camera)
        self.schedule(camera)  # a newer frame may have come while this one ran

    def reject(self, job: Job, reason: str) -> None:
        """End the track of a queued frame the worker will never run, with the node's reason."""
        job.payload.track.dropped()

    def crashed(self, job: Job, exc: BaseException) -> None:
        """End the track with the error the worker's handler raised on a tracked frame."""
        track = job.payload.track
        self._logger.error(f"internal error on track {track.request_id}: "
                           f"{''.join(traceback.format_exception(exc))}")
        track.dropped()
        track.end(f"{ERROR_PREFIX}internal error: {type(exc).__name__}: {exc}")
