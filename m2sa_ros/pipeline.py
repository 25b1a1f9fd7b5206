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
The command pipeline: from an accepted command to its one SegmentationResult.

Every way a command arrives (topic, service, action, a track's first answer) becomes a
:class:`Request` and takes the same road, so "exactly one result per command, with the
command's request id" holds in one place: intake answers at once what needs no model
(node not active, empty or too long, queue full); the worker thread then binds the
request's frame and depth (:class:`Prepared`), runs the model, and delivers the result,
its vision_msgs detections, label image, overlay, markers and target points on the request's
camera's outputs.
The pipeline is the handler of its commands' worker jobs (``run``, ``run_batch``,
``reject``, ``crashed``).
Tracked frames (track_action.py) go through :meth:`CommandPipeline.track` and
:meth:`CommandPipeline.publish_tracked`: the same depth binding and the one conversion
(:meth:`CommandPipeline.convert`), so they carry the same centroids and 3-D geometry as
a command, while the track action never touches the model, the parameters, the worker
or the counters itself.

The node hands the pipeline what it needs - the segmenter and parameters (again after
every runtime change), the worker, its logger and counters - and the pipeline never
reaches back into the node: what it knows of ROS is the camera's outputs (the narrow
object cameras/camera_outputs.py's CameraOutputs, which it publishes on) and a function
that resolves a topic name. Each conversion is handed one ResultOrigin (the command's
request id and text, its image's header and size) rather than those values one by one.
The pipeline keeps its own lifecycle state, as rclpy's ManagedEntity and Nav2's
LifecycleNode keep theirs in one place: the node's transitions call
:meth:`CommandPipeline.load` / :meth:`CommandPipeline.unload`
(configure / cleanup) and :meth:`CommandPipeline.open` / :meth:`CommandPipeline.close`
(activate / deactivate, shutdown, error), and ``active``, ``closed_reason`` and
``worker`` are read-only outside it.
"""

from __future__ import annotations

from collections import Counter
import dataclasses
from dataclasses import dataclass, field
import threading
import time
import traceback
from typing import Any, Callable, Iterable

from m2sa_core.prompt import sanitized
from m2sa_core.types import Cancelled
from m2sa_ros.cameras.camera_state import Camera
from m2sa_ros.cameras.latest_frame import Frame
from m2sa_ros.depth.depth_binding import bind_depth, DepthSource, TargetMeasure
from m2sa_ros.depth.depth_settings import DepthSettings
from m2sa_ros.diagnostics.camera_health import CameraHealthSettings
from m2sa_ros.diagnostics.node_status import NodeStats
from m2sa_ros.messages.result_conversion import error_result, result_to_msg, ResultOrigin
from m2sa_ros.model.memory import HeapTrimmer, is_out_of_memory, release_memory
from m2sa_ros.msg import SegmentationResult
from m2sa_ros.params.node_params import NodeParams
from m2sa_ros.tf.frame_transform import ResultFrames
from m2sa_ros.tracking.tracks import Track
from m2sa_ros.worker import CommandWorker, Job


def origin_of(request_id: str, command: str, frame: Frame | None) -> ResultOrigin:
    """Return the origin of a result about ``frame``: its header and size (None: no image yet, 0 x 0)."""
    if frame is None:
        return ResultOrigin(request_id, command)
    return ResultOrigin(request_id, command, frame.header, frame.height, frame.width)


@dataclass
class Request:
    """One command and where its single result goes."""

    request_id: str
    command: str
    source: str  # "topic", "service" or "action": for log lines
    received_ns: int  # node clock at arrival: image age is measured against it
    max_image_age: float = 0.0  # 0 = the node's parameter
    frame: Frame | None = None  # a request's own image; None = the latest camera frame
    on_feedback: Callable[[str, str], None] | None = None  # (stage, partial answer; "" = no new text)
    on_done: Callable[[SegmentationResult], None] | None = None
    keep_prompts: bool = False  # a track's command: the model returns its [SEG] prompts
    on_model_result: Callable[[Any, Frame], None] | None = None  # (m2sa_core Result, its frame)
    camera: Camera | None = None  # whose frame, queue and topics (set by the node)
    # The command as the prompt will hold it, cleaned once at intake (``accept``).
    prompt_text: str = field(default="", repr=False)
    _finished: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def finished(self) -> bool:
        """Answered already (a batch skips such a row's result)."""
        with self._lock:
            return self._finished

    def claim_finish(self) -> bool:
        """Return True exactly once: the guard behind "one result per command"."""
        with self._lock:
            if self._finished:
                return False
            self._finished = True
            return True


@dataclass(frozen=True)
class TrackStep:
    """
    One tracked frame through the model (:meth:`CommandPipeline.track`).

    On success ``result`` and ``state`` are the model's, ``msg`` the frame's result;
    after a model failure ``error`` says what failed (``model failure: ...``), ``msg``
    is the error result and ``result`` / ``state`` are None.
    """

    msg: SegmentationResult
    result: Any = None
    state: Any = None
    error: str = ""


@dataclass
class Prepared:
    """A request ready for the model: its frame chosen, depth bound (see ``CommandPipeline.prepare``)."""

    job: Job
    req: Request
    frame: Frame
    measure: TargetMeasure | None  # None: no usable depth (``depth_state`` says why)
    depth_state: str


class CommandPipeline:
    """
    Requests in, one SegmentationResult each out, on the request's camera.

    ``segmenter`` and ``params`` are None while the node is unconfigured (the pipeline
    is their one owner: :meth:`load`, :meth:`unload`, :meth:`update_params`), ``worker``
    while it is inactive; ``active`` is the node's "taking commands" (the pipeline is
    their one owner too: :meth:`open`, :meth:`close`). The node calls these at its
    transitions and at runtime parameter changes. The settings of each concern
    (params/parameter_group.py): ``depth_settings`` (depth_settings.DepthSettings) and
    ``health_settings`` (camera_health.CameraHealthSettings), built from ``params`` at
    :meth:`load` and again when a runtime change touches one of their parameters; the
    depth step and the camera statuses read only theirs.
    """

    def __init__(self, logger: Any, stats: NodeStats, batch_sizes: Counter[int], *,
                 topic_name: Callable[[str], str], warn_once: Callable[[str, str], None]) -> None:
        self.segmenter: Any = None
        self.params: NodeParams | None = None
        self.depth_settings: DepthSettings | None = None
        self.health_settings: CameraHealthSettings | None = None  # /diagnostics' camera statuses read it
        self._worker: CommandWorker | None = None
        self.heap = HeapTrimmer(0.0)  # the configured one replaces it
        self._active = False
        # Why the node stopped taking commands ("cancelled: node shutting down (SIGINT)"),
        # None until it first does: a goal the action server accepted just before the
        # close reaches accept() after it and gets this answer, as the ones it queued did.
        self._closed_reason: str | None = None
        self.stats = stats  # all cameras; each camera has its own too
        self._batch_sizes = batch_sizes  # batched model calls by their size (several cameras)
        self._batch_lock = threading.Lock()  # the worker counts, the diagnostics timer reads
        self._logger = logger
        self._topic_name = topic_name
        self._warn_once = warn_once
        # target_frame's tf2 lookups; :meth:`listen` starts the listener, :meth:`unload` stops it.
        self.frames = ResultFrames(warn_once)

    # ------------------------------------------------------------------ lifecycle
    @property
    def active(self) -> bool:
        """Tell whether commands are taken: from :meth:`open` to :meth:`close`."""
        return self._active

    @property
    def closed_reason(self) -> str | None:
        """Return the answer of a command that comes after :meth:`close` (None before the first close)."""
        return self._closed_reason

    @property
    def worker(self) -> CommandWorker | None:
        """Return the worker the commands go to: the one :meth:`open` took, None while closed."""
        return self._worker

    def load(self, segmenter: Any, params: NodeParams) -> None:
        """Take a configured node's model and parameters (configure)."""
        self.segmenter, self.params = segmenter, params
        self.depth_settings = DepthSettings.from_params(params)
        self.health_settings = CameraHealthSettings.from_params(params)
        self.heap = HeapTrimmer(params.heap_trim_period)

    def listen(self, node: Any) -> None:
        """
        Start tf2's listener on ``node`` when ``target_frame`` is set (configure, a runtime change).

        Only a node that moves its results to a target frame subscribes to /tf; a second
        call is a no-op (ResultFrames.listen), and :meth:`unload` stops it.
        """
        if self.params is not None and self.params.target_frame:
            self.frames.listen(node)

    def unload(self) -> bool:
        """
        Drop tf2's listener, the model and the parameters (cleanup, shutdown, error).

        True when a model was loaded.
        """
        self.frames.close()
        had_model = self.segmenter is not None
        self.segmenter = self.params = self.depth_settings = self.health_settings = None
        return had_model

    def open(self, worker: CommandWorker) -> None:  # noqa: A003 - the pair of close, as a lifecycle names it
        """
        Take commands, on ``worker`` (activate); the node opens a closed pipeline.

        The worker is in place before the pipeline is active, and the node opens the
        pipeline before any subscription: a client may send a command the moment it sees
        the command subscription matched, while the rest of activation still runs.
        """
        self._worker = worker
        self._active, self._closed_reason = True, None

    def close(self, reason: str, cameras: Iterable[Camera] = ()) -> bool:
        """
        Stop taking commands, answering every pending one ``cancelled: <reason>`` (deactivate, shutdown, error).

        In this order: inactive, so that a command or a goal that comes after is
        answered with that reason (:meth:`accept`) and no tracked frame is queued; the
        tracks of ``cameras`` ended with ``reason``, before the worker stops, so that they
        end with it; then the worker stopped (its running job cancelled, its queued ones
        answered with the reason through their handlers' ``reject``) and taken away. A
        second close only says the reason again. False when the worker did not stop
        within 30 s (a model that ignored the cancel; logged).
        """
        self._active, self._closed_reason = False, f"cancelled: {reason}"
        for camera in cameras:
            camera.tracks.end_all(reason)
        worker, stopped = self._worker, True
        if worker is not None:
            stopped = worker.stop(f"cancelled: {reason}")
            if not stopped:
                self._logger.error("the worker did not stop within 30 s (model ignored cancel)")
            self._worker = None
        return stopped

    def update_params(self, changes: dict[str, Any]) -> NodeParams:
        """
        Runtime parameter changes, in force from the next command; the new parameters.

        The segmenter's own thresholds are set here too, so that a command never runs with
        the node's new value and the model's old one longer than this call.
        """
        assert self.params is not None, "update_params on an unconfigured pipeline"
        self.params = dataclasses.replace(self.params, **changes)
        if DepthSettings.reads(changes):
            self.depth_settings = DepthSettings.from_params(self.params)
        if CameraHealthSettings.reads(changes):
            self.health_settings = CameraHealthSettings.from_params(self.params)
        if "heap_trim_period" in changes:
            self.heap = HeapTrimmer(changes["heap_trim_period"])
        segmenter = self.segmenter
        if "mask_threshold" in changes and hasattr(segmenter, "mask_threshold"):
            segmenter.mask_threshold = changes["mask_threshold"]
        if "duplicate_iou" in changes and hasattr(segmenter, "duplicate_iou"):
            value = changes["duplicate_iou"]  # -1: back to the model's own setting
            segmenter.duplicate_iou = segmenter.model.config.duplicate_instance_iou if value < 0 else value
        return self.params

    @property
    def loaded(self) -> bool:
        """Tell whether a model and its parameters are there: the node is configured."""
        return self.segmenter is not None and self.params is not None

    def batch_counts(self) -> dict[int, int]:
        """Return a copy of the batch sizes counted so far, safe to read beside the worker."""
        with self._batch_lock:
            return dict(self._batch_sizes)

    def image_topic(self, camera: Camera) -> str:
        """Return the resolved name of the image topic ``camera`` listens on."""
        return camera.inputs.image if camera.inputs is not None else self._topic_name(camera.topic("image"))

    # ------------------------------------------------------------------ intake
    def accept(self, req: Request, stop_when: Callable[[], bool] | None = None) -> None:
        """Answer at once (bad command, inactive, queue full) or queue for the worker."""
        params, worker, camera = self.params, self._worker, req.camera
        assert camera is not None, "the node sets a request's camera"
        # The prompt builder's own cleaning, done once here (the model takes the result as
        # it is): control characters alone count as empty.
        req.prompt_text = sanitized(req.command)
        if not self._active or params is None or worker is None:
            self.finish(req, error_result(self._closed_reason or "node is not active",
                                          ResultOrigin(req.request_id, req.command)))
            return
        if not req.prompt_text:
            self.finish(req, self.error(req, "empty command"))
            return
        if len(req.command) > params.max_command_length:
            self.finish(req, self.error(
                req, f"command too long: {len(req.command)} characters > max_command_length "
                     f"{params.max_command_length}"))
            return
        if not worker.submit(Job(payload=req, handler=self, stop_when=stop_when, lane=camera.lane)):
            where = f" for camera {camera.name}" if camera.name else ""
            self.finish(req, self.error(
                req, f"queue full: {worker.max_queue} commands already waiting{where} (max_queue)"))

    def submit(self, job: Job) -> bool:
        """
        Queue a job of another handler (a tracked frame) behind the commands.

        False (nothing queued) while the node takes no work or the job's lane is
        full.
        """
        worker = self._worker
        return self._active and worker is not None and worker.submit(job)

    def error(self, req: Request, error: str, frame: Frame | None = None,
              inference_ms: float = 0.0) -> SegmentationResult:
        """Return the error result of ``req``, with the header and size of the frame it refers to."""
        frame = frame if frame is not None else (req.frame or req.camera.latest.get())
        return error_result(error, origin_of(req.request_id, req.command, frame), inference_ms)

    def refuse(self, req: Request, error: str) -> SegmentationResult:
        """Answer ``req`` with ``error`` now, before it reaches the queue; returns that answer."""
        msg = self.error(req, error)
        self.finish(req, msg)
        return msg

    # ------------------------------------------------------------------ the worker's run
    def resolve_frame(self, req: Request, job: Job) -> tuple[Frame | None, str]:
        """Return the frame a request refers to, or the reason it cannot be used."""
        params = self.params
        assert params is not None
        frame = req.frame
        if frame is None:
            frame = req.camera.latest.get()
            if frame is None and params.wait_for_image > 0:
                if req.on_feedback:
                    req.on_feedback("waiting_for_image", "")
                frame = req.camera.latest.wait(params.wait_for_image, should_stop=job.should_stop)
            if frame is None:
                return None, (f"no image yet: nothing received on {self.image_topic(req.camera)} "
                              f"(waited {params.wait_for_image:.1f} s)")
        if frame.error:
            return frame, f"bad image: {frame.error}"
        limit = req.max_image_age if req.max_image_age > 0 else params.max_image_age
        if limit > 0 and req.frame is None:
            age = frame.age_s(req.received_ns)
            if age > limit:
                return frame, f"image too old: {age:.2f} s > max_image_age {limit:.2f} s"
        return frame, ""

    def bind_depth(self, frame: Frame, camera: Camera) -> tuple[TargetMeasure | None, str]:
        """``camera``'s depth and intrinsics nearest to ``frame``, bound (see depth_binding.bind_depth)."""
        settings, inputs = self.depth_settings, camera.inputs
        assert settings is not None and inputs is not None, "configure sets both"
        source = DepthSource(camera.depth, camera.camera_info, inputs.depth, inputs.camera_info, camera.name,
                             camera.depth_health)
        return bind_depth(frame, source, settings, self._warn_once)

    def measure_after_model(self, frame: Frame, camera: Camera, measure: TargetMeasure | None,
                            depth_state: str, should_stop: Callable[[], bool] = lambda: False) -> TargetMeasure | None:
        """
        Return the measure bound before the model ran, or, when its depth had not come yet ("missing"), bound again now.

        A camera's depth often comes a few ms after its colour image, and a frame is taken
        the moment it arrives. Bound before as well, because the depth buffer keeps only the
        last few frames and a long model call may outlive it. A fast model can answer before
        a late depth comes: while the depth stream is still behind the frame, wait for it up
        to ``depth_wait`` (StampedBuffer.wait_near).
        """
        settings = self.depth_settings
        if depth_state == "missing":
            if settings is not None and settings.depth_wait > 0:
                tolerance_ns, deadline = int(settings.depth_tolerance * 1e9), time.monotonic() + settings.depth_wait
                for buffer in (camera.depth, camera.camera_info):
                    if not buffer.wait_near(frame.stamp_ns, tolerance_ns, max(deadline - time.monotonic(), 0.0),
                                            should_stop):
                        break
            measure, _ = self.bind_depth(frame, camera)
        return measure

    def convert(self, result: Any, origin: ResultOrigin, inference_ms: float, measure: TargetMeasure | None,
                camera: Camera | None = None) -> SegmentationResult:
        """
        Return a model result on ``origin``'s frame -> its SegmentationResult, measured with the bound depth.

        The one conversion of commands and tracked frames: each target's centroid and
        geometry come from its visible mask and ``measure`` (None: no depth, no 3-D), and
        are then moved into ``target_frame`` (:meth:`to_target_frame`).
        """
        msg = result_to_msg(result, origin, inference_ms, measure,
                            full_frame_masks=self.params is not None and self.params.full_frame_masks)
        self.to_target_frame(msg, camera)
        return msg

    def to_target_frame(self, msg: SegmentationResult, camera: Camera | None) -> None:
        """
        Move ``msg``'s 3-D values into ``target_frame`` at its image's stamp (worker thread).

        Waits at most ``tf_timeout`` (frame_transform.py); counted per camera and in all.
        """
        params = self.params
        if params is None:
            return
        found = self.frames.apply(msg, params.target_frame, params.tf_timeout, where=camera.name if camera else "")
        if found is not None:
            for stats in (self.stats, camera.stats if camera is not None else None):
                if stats is not None:
                    stats.record_transform(found.transform is not None, msg.transform_error)

    def prepare(self, job: Job) -> Prepared | None:
        """
        Worker thread: choose the request's frame and bind its depth; None when it was answered here.

        Answered here: node not configured, cancelled, no usable frame.
        """
        req: Request = job.payload
        if self.params is None or self.segmenter is None:
            self.finish(req, self.error(req, "node is not configured"))
            return None
        if job.should_stop():
            self.finish(req, self.error(req, job.cancel_reason or "cancelled"))
            return None
        frame, problem = self.resolve_frame(req, job)
        if job.should_stop():
            self.finish(req, self.error(req, job.cancel_reason or "cancelled", frame))
            return None
        if problem:
            self.finish(req, self.error(req, problem, frame))
            return None
        assert frame is not None and frame.rgb is not None
        # Depth and intrinsics are bound now, before the model runs: at 30 Hz the depth
        # buffer holds a third of a second, and a 7B model takes longer than that.
        measure, depth_state = self.bind_depth(frame, req.camera)
        return Prepared(job, req, frame, measure, depth_state)

    def run(self, job: Job) -> None:
        """Worker thread: one command from frame to published result."""
        ready = self.prepare(job)
        if ready is not None:
            self.run_one(ready)

    def run_one(self, ready: Prepared) -> None:
        """One command through ``Segmenter.segment``, with stage and partial-answer feedback."""
        job, req, frame = ready.job, ready.req, ready.frame
        segmenter = self.segmenter
        stage = ["encoding"]

        def on_stage(name: str) -> None:
            stage[0] = name
            if req.on_feedback:
                req.on_feedback(name, "")

        def on_text(text: str) -> None:
            if req.on_feedback:
                req.on_feedback(stage[0], text)

        started = time.monotonic()
        try:
            extra = {"keep_prompts": True} if req.keep_prompts else {}
            result = segmenter.segment(frame.rgb, req.prompt_text, frame_key=frame.key or None,
                                       on_stage=on_stage, on_text=on_text, should_stop=job.should_stop, **extra)
        except Cancelled:
            elapsed = (time.monotonic() - started) * 1000.0
            self.finish(req, self.error(req, job.cancel_reason or "cancelled", frame, elapsed))
            return
        except Exception as exc:  # noqa: BLE001 - a model failure is an answer, not a crash
            out_of_memory = self._model_failed([ready], exc, started)
        else:
            self._deliver(ready, result, (time.monotonic() - started) * 1000.0)
            self._after_model()
            return
        # Outside the except block: the exception, its traceback and the frames it holds
        # (activations, KV cache) are unreachable now and can be freed.
        self._release_after_failure(out_of_memory)

    def run_batch(self, jobs: list[Job]) -> None:
        """
        Worker thread: commands of several cameras answered by one batched model call.

        Each request gets its own frame (its camera's), its own result on its camera's
        topic and exactly one answer. A request cancelled meanwhile is answered at once
        and its row's result dropped; the call itself stops only when every row is
        cancelled. A model without ``segment_many`` answers the requests one by one.
        """
        ready = [r for r in (self.prepare(job) for job in jobs) if r is not None]
        segment_many = getattr(self.segmenter, "segment_many", None)
        if len(ready) <= 1 or segment_many is None:
            for one in ready:
                self.run_one(one)
            return

        def cancelled_rows() -> bool:
            """Answer newly cancelled rows; True when no row is left to compute."""
            for one in ready:
                if one.job.should_stop() and not one.req.finished:
                    self.finish(one.req, self.error(one.req, one.job.cancel_reason or "cancelled", one.frame))
            return all(one.req.finished for one in ready)

        def on_stage(name: str) -> None:
            for one in ready:
                if one.req.on_feedback and not one.req.finished:
                    one.req.on_feedback(name, "")

        started = time.monotonic()
        try:
            results = segment_many([one.frame.rgb for one in ready], [one.req.prompt_text for one in ready],
                                   [one.frame.key or None for one in ready], on_stage=on_stage,
                                   should_stop=cancelled_rows, keep_prompts=[one.req.keep_prompts for one in ready])
        except Cancelled:
            cancelled_rows()
            for one in ready:  # every row was cancelled; this only covers a model raising on its own
                if not one.req.finished:
                    self.finish(one.req, self.error(one.req, "cancelled", one.frame))
            return
        except Exception as exc:  # noqa: BLE001 - a model failure is an answer, not a crash
            out_of_memory = self._model_failed(ready, exc, started)
        else:
            self._deliver_batch(ready, results, started)
            return
        self._release_after_failure(out_of_memory)

    def _deliver_batch(self, ready: list[Prepared], results: list[Any], started: float) -> None:
        elapsed = (time.monotonic() - started) * 1000.0
        with self._batch_lock:
            self._batch_sizes[len(ready)] += 1
        for one, result in zip(ready, results):
            if one.job.should_stop() and not one.req.finished:
                self.finish(one.req, self.error(one.req, one.job.cancel_reason or "cancelled", one.frame, elapsed))
            if not one.req.finished:
                self._deliver(one, result, elapsed)
        del results
        self._after_model()

    def _model_failed(self, rows: list[Prepared], exc: Exception, started: float) -> bool:
        """
        Every request of a failed model call gets ``model failure: ...``; True when out of memory.

        Called inside the caller's ``except`` (for the traceback); the caller gives the
        memory back after it, when the exception is unreachable.
        """
        elapsed = (time.monotonic() - started) * 1000.0
        names = ", ".join(one.req.request_id for one in rows)
        self._logger.error(f"model failure on request {names}: {traceback.format_exc()}")
        for one in rows:
            if not one.req.finished:
                self.finish(one.req, self.error(one.req, f"model failure: {type(exc).__name__}: {exc}",
                                                one.frame, elapsed))
        return is_out_of_memory(exc)

    def _release_after_failure(self, out_of_memory: bool) -> None:
        if out_of_memory and self.params is not None:
            release_memory(self.params.device)

    def _after_model(self) -> None:
        worker = self._worker
        if worker is not None and worker.depth == 0:  # idle: trimming delays no one
            self.heap.maybe_trim()

    def reject(self, job: Job, reason: str) -> None:
        """Answer a queued command the worker will never run (node deactivating)."""
        req: Request = job.payload
        self.finish(req, self.error(req, reason))

    def crashed(self, job: Job, exc: BaseException) -> None:
        """Answer a command the worker's handler raised on, unless a batch did already."""
        req: Request = job.payload
        if req.finished:  # a batch failed after this request was answered
            return
        self._logger.error(f"internal error on request {req.request_id}: "
                           f"{''.join(traceback.format_exception(exc))}")
        self.finish(req, self.error(req, f"internal error: {type(exc).__name__}: {exc}"))

    # ------------------------------------------------------------------ tracked frames
    def track(self, frame: Frame, camera: Camera, track: Track) -> TrackStep | None:
        """
        Re-segment ``frame`` from ``track``'s prompts and state with SAM alone (worker thread).

        By ``Segmenter.track``, measured with ``camera``'s depth; None when no model is loaded.

        A model failure is the step's ``error`` (logged here, memory handed back after an
        out-of-memory), so the track ends with it and the node goes on.
        """
        segmenter = self.segmenter
        if segmenter is None or self.params is None or frame.rgb is None:
            return None
        measure, depth_state = self.bind_depth(frame, camera)
        origin = origin_of(track.request_id, track.command, frame)
        started = time.monotonic()
        try:
            result, new_state = segmenter.track(frame.rgb, track.prompts, track.state,
                                                use_previous_mask=track.settings.use_previous_mask,
                                                frame_key=frame.key or None)
            elapsed = (time.monotonic() - started) * 1000.0
            msg = self.convert(result, origin, elapsed, self.measure_after_model(frame, camera, measure, depth_state),
                               camera)
        except Exception as exc:  # noqa: BLE001 - a model failure ends the track, not the node
            self._logger.error(f"model failure on track {track.request_id}: {traceback.format_exc()}")
            error = f"model failure: {type(exc).__name__}: {exc}"
            out_of_memory = is_out_of_memory(exc)
        else:
            return TrackStep(msg=msg, result=result, state=new_state)
        # Outside the except block, as for commands: what the exception held can be freed.
        self._release_after_failure(out_of_memory)
        return TrackStep(msg=error_result(error, origin), error=error)

    def publish_tracked(self, msg: SegmentationResult, camera: Camera) -> None:
        """Publish a tracked frame's result on ``camera``'s result topic, counted like a command's."""
        self._count_and_publish(msg, camera, f"tracked frame of {msg.request_id}")

    # ------------------------------------------------------------------ delivery
    def _deliver(self, ready: Prepared, result: Any, elapsed: float) -> None:
        """Deliver a model result as the request's one SegmentationResult, overlay and markers."""
        req, frame, camera = ready.req, ready.frame, ready.req.camera
        measure = self.measure_after_model(frame, camera, ready.measure, ready.depth_state, ready.job.should_stop)
        try:
            msg = self.convert(result, origin_of(req.request_id, req.command, frame), elapsed, measure, camera)
        except Exception as exc:  # noqa: BLE001 - e.g. a model returning wrong-sized masks
            self._logger.error(f"could not convert the result of {req.request_id}: {traceback.format_exc()}")
            self.finish(req, self.error(req, f"model failure: {exc}", frame, elapsed))
            return
        if req.on_model_result is not None:
            req.on_model_result(result, frame)
        self.finish(req, msg)
        self.publish_views(frame, result, msg, camera)

    def finish(self, req: Request, msg: SegmentationResult) -> None:
        """Publish the one result of a request on its camera's topic and hand it to its caller."""
        if not req.claim_finish():
            self._logger.error(f"request {req.request_id} answered twice; second answer dropped")
            return
        camera = req.camera
        if not msg.success:
            # repr: user text with newlines or escape codes must not forge log lines.
            where = f"camera {camera.name}: " if camera.name else ""
            self._logger.warning(f"{where}{req.source} command {req.request_id} "
                                 f"{req.command[:80]!r}: {msg.error}")
        self._count_and_publish(msg, camera, f"the result of {req.request_id}")
        if req.on_done is not None:
            req.on_done(msg)

    def _count_and_publish(self, msg: SegmentationResult, camera: Camera, what: str) -> None:
        """
        Count ``msg`` in the node's and ``camera``'s diagnostics, then publish it and its detections.

        A command's result and a tracked frame's go out the same way, so /diagnostics and
        the topics agree whichever produced them; a failed publish (``what`` names it in the
        log) loses that message only, never the request's answer to its caller.
        """
        self.stats.record(msg.success, msg.inference_ms, msg.error)
        camera.stats.record(msg.success, msg.inference_ms, msg.error)
        camera.outputs.publish_result(msg, what)

    def publish_views(self, frame: Frame, result: Any, msg: SegmentationResult, camera: Camera) -> None:
        """Publish what goes beside a successful result on ``camera``'s outputs (camera_outputs.py)."""
        publish_overlay = self.params is not None and self.params.publish_overlay
        camera.outputs.publish_views(frame, result, msg, publish_overlay=publish_overlay)
