"""The ``track`` action: a command answered once by the full model, then followed frame by frame.

The first answer goes through the command pipeline like any command, keeping the
model's [SEG] prompts; every new camera frame after it is re-segmented from those
prompts with SAM alone (``Segmenter.track``), much cheaper than asking again. The
frames share the one worker queue with commands, at most one waiting per track, so
commands still get through. The goal ends once - cancel, timeout, every target lost, a
failure or the node stopping - with one final result and the reason; the per-track
decisions (when a frame is due, when a target is lost) live in tracks.py. A tracked
frame binds its own depth and goes through the pipeline's one conversion, so its
targets carry centroids, poses and points like a command's: a track's targets move in 3-D.
"""

from __future__ import annotations

import time
import traceback
import uuid
from dataclasses import dataclass
from typing import Any, Callable

from m2sa_ros.action import Track as TrackGoal
from m2sa_ros.blocking_calls import Answer, BlockingCalls
from m2sa_ros.cameras import Camera
from m2sa_ros.memory import is_out_of_memory, release_memory
from m2sa_ros.msg import SegmentationResult
from m2sa_ros.pipeline import CommandPipeline, Request
from m2sa_ros.result_conversion import error_result
from m2sa_ros.tracks import CANCELLED, ERROR_PREFIX, LOST, TIMEOUT, Track, TrackSettings
from m2sa_ros.worker import Job


@dataclass(frozen=True)
class TrackFrame:
    """A worker job: the next new camera frame of one track (the newest when it runs)."""

    track: Track
    camera: Camera


class TrackGoals:
    """Runs ``track`` goals on the node's pipeline and worker.

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
        """The execute callback: the command once with the full model, then every new frame.

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
                feedback = TrackGoal.Feedback(result=msg, frame_seq=0)
                track.answered(prompts[0][0], prompts[0][1], msg, lambda: goal_handle.publish_feedback(feedback))
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
        """Set the goal's status from the reason: cancelled, succeeded (timeout, lost) or aborted."""
        if reason == CANCELLED and goal_handle.is_cancel_requested:
            goal_handle.canceled()
        elif reason in (TIMEOUT, LOST):
            goal_handle.succeed()
        else:
            goal_handle.abort()
        self._logger.info(f"track {msg.request_id} ended after {frames} frame(s): {reason}")
        return TrackGoal.Result(result=msg, frames=frames, reason=reason)

    def schedule(self, camera: Camera) -> None:
        """Queue the newest frame for each track that wants it (image callback, after each tracked frame)."""
        worker, frame = self._pipeline.worker, camera.latest.get()
        if worker is None or frame is None or not self._pipeline.active or frame.error:
            return
        for track in camera.tracks.due(frame.key, time.monotonic()):
            job = Job(payload=TrackFrame(track, camera), bounded=False, lane=camera.lane, batchable=False)
            if not worker.submit(job):
                track.dropped()

    def run_frame(self, job: TrackFrame) -> None:
        """Worker thread: one tracked frame of a track on the newest frame of its camera."""
        track, camera, pipeline = job.track, job.camera, self._pipeline
        segmenter, params, frame = pipeline.segmenter, pipeline.params, camera.latest.get()
        if segmenter is None or params is None or frame is None or frame.rgb is None:
            track.dropped()
            return
        if not track.take(frame.key, time.monotonic()):
            return
        measure, depth_state = pipeline.bind_depth(frame, camera)
        started = time.monotonic()
        try:
            result, state = segmenter.track(frame.rgb, track.prompts, track.state,
                                            use_previous_mask=track.settings.use_previous_mask,
                                            frame_key=frame.key or None)
            elapsed = (time.monotonic() - started) * 1000.0
            msg = pipeline.convert(result, request_id=track.request_id, command=track.command, frame=frame,
                                   inference_ms=elapsed,
                                   measure=pipeline.measure_after_model(frame, camera, measure, depth_state))
        except Exception as exc:  # noqa: BLE001 - a model failure ends the track, not the node
            self._logger.error(f"model failure on track {track.request_id}: {traceback.format_exc()}")
            error = f"model failure: {type(exc).__name__}: {exc}"
            out_of_memory = is_out_of_memory(exc)
            del exc
            last = error_result(error, request_id=track.request_id, command=track.command, header=frame.header,
                                height=frame.height, width=frame.width)
            track.end(ERROR_PREFIX + error, last=last)
            if out_of_memory:
                release_memory(params.device)
            return

        def deliver(seq: int) -> None:
            pipeline.stats.record(True, msg.inference_ms, "")
            camera.stats.record(True, msg.inference_ms, "")
            pub = camera.result_pub
            if pub is not None:
                pub.publish(msg)
            track.handle.publish_feedback(TrackGoal.Feedback(result=msg, frame_seq=seq))

        if track.record(result, state, msg, deliver):
            pipeline.publish_views(frame, result, msg, camera)
        self.schedule(camera)  # a newer frame may have come while this one ran

    @staticmethod
    def reject(job: TrackFrame) -> None:
        """A queued frame the worker will never run: the track itself ends with the node's reason."""
        job.track.dropped()

    def crashed(self, job: TrackFrame, exc: BaseException) -> None:
        """The worker's handler raised on a tracked frame: the track ends with the error."""
        track = job.track
        self._logger.error(f"internal error on track {track.request_id}: "
                           f"{''.join(traceback.format_exception(exc))}")
        track.dropped()
        track.end(f"{ERROR_PREFIX}internal error: {type(exc).__name__}: {exc}")
