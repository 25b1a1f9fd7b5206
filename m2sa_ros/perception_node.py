"""perception_node: camera images + language commands in, labelled masks out.

A thin rclpy lifecycle node over ``m2sa_core.inference.Segmenter`` (docs/ARCHITECTURE.md,
docs/ROS_INTERFACE.md). What it adds is robotics plumbing only:

* lifecycle: configure validates the parameters and loads the model, activate opens
  the topics / service / action and starts the worker, deactivate closes them,
  cleanup frees the model and the GPU cache; ``autostart`` does configure + activate
  at start-up. The lifecycle services and /diagnostics have callback groups of their
  own, so a model that takes minutes to load blocks neither;
* parameters carry ranges in their descriptors; runtime ones apply at once, load-time
  ones say they need a reconfigure (node_params.py);
* keep-latest image (converted once, in its own callback group, never waiting on the
  model); one worker thread with a bounded queue runs commands in order;
* the ``track`` action answers a command once with the full model, then re-segments
  its targets on every new camera frame with SAM alone (``Segmenter.track``) until
  cancel, timeout, every target lost or the node stopping; the per-track decisions
  live in tracks.py, and tracked frames share the one worker queue with commands (at
  most one waiting per track, so commands still get through);
* every accepted command - topic (plain or with a request id), service or action -
  yields exactly one SegmentationResult carrying the command's request id, a success
  or ``success=false`` with a clear ``error``; the result's header is the source
  image's, so planners sync with depth and tf;
* depth and camera_info are bound to a command when its frame is chosen, before the
  model runs, so a slow model loses no centroid; depth in another frame is refused;
* an RViz overlay and centroid markers computed only when someone subscribes, and
  /diagnostics;
* SIGINT (once or twice, as ``ros2 launch`` plus a terminal deliver it) and SIGTERM
  end the node cleanly with exit status 0, every pending command answered.

Run it as ``m2sa-perception --ros-args --params-file config/perception.yaml`` or
``ros2 launch m2sa_ros perception.launch.py``.
"""

from __future__ import annotations

import dataclasses
import gc
import signal
import sys
import threading
import time
import traceback
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

import rclpy
from diagnostic_msgs.msg import DiagnosticArray
from rcl_interfaces.msg import SetParametersResult
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.exceptions import InvalidParameterValueException
from rclpy.executors import MultiThreadedExecutor
from rclpy.lifecycle import LifecycleNode, LifecycleNodeMixin, LifecycleState, TransitionCallbackReturn
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.signals import SignalHandlerOptions
from sensor_msgs.msg import CameraInfo, CompressedImage, Image
from std_msgs.msg import String
from visualization_msgs.msg import MarkerArray

from m2sa_core.cli_errors import cli_entry
from m2sa_core.prompt import sanitize_command
from m2sa_core.types import Cancelled
from m2sa_core.visualize import overlay_targets
from m2sa_ros.action import Segment as SegmentAction
from m2sa_ros.action import Track as TrackAction
from m2sa_ros.centroids import Intrinsics, StampedBuffer, mask_centroid
from m2sa_ros.diagnostics import NodeStats, build_diagnostics, status_level
from m2sa_ros.frames import Frame, LatestFrame
from m2sa_ros.heap import HeapTrimmer, trim_heap_now
from m2sa_ros.image_conversion import (ImageConversionError, compressed_to_rgb, depth_to_metres,
                                       image_to_rgb, rgb_to_msg)
from m2sa_ros.markers import centroid_markers
from m2sa_ros.model_source import ModelSource, resolve_model_source
from m2sa_ros.msg import Command, SegmentationResult
from m2sa_ros.node_params import (PARAMETERS, SPECS, NodeParams, ParameterError, check_params_files, check_value,
                                  descriptor, validate)
from m2sa_ros.result_conversion import error_result, result_to_msg
from m2sa_ros.srv import Segment as SegmentSrv
from m2sa_ros.tracks import CANCELLED, ERROR_PREFIX, LOST, TIMEOUT, Track, TrackSet, TrackSettings
from m2sa_ros.worker import CommandWorker, Job

NODE_NAME = "perception_node"
RESULT_QOS = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
# Commands are tiny and must not be dropped when a planner sends several at once.
COMMAND_QOS = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)

# (params, model source) -> an object with Segmenter's segment() and cache_stats.
SegmenterFactory = Callable[[NodeParams, ModelSource], Any]


def load_segmenter(params: NodeParams, source: ModelSource) -> Any:
    """The production factory: ``Segmenter.from_pretrained`` with the node's parameters."""
    from m2sa_core.inference import Segmenter

    dtype = None
    if params.dtype:
        import torch

        dtype = getattr(torch, params.dtype)
    return Segmenter.from_pretrained(source.source, device=params.device, dtype=dtype,
                                     frame_cache_size=params.frame_cache_size,
                                     max_new_tokens=params.max_new_tokens,
                                     mask_threshold=params.mask_threshold, amodal=params.amodal)


@dataclass(frozen=True)
class TrackFrame:
    """A worker job: the next new camera frame of one track (the newest when it runs)."""

    track: Track


@dataclass
class Request:
    """One command and where its single result goes."""

    request_id: str
    command: str
    source: str  # "topic", "service" or "action": for log lines
    received_ns: int  # node clock at arrival: image age is measured against it
    max_image_age: float = 0.0  # 0 = the node's parameter
    frame: Frame | None = None  # a request's own image; None = the latest camera frame
    on_feedback: Callable[[str, str], None] | None = None  # (stage, partial answer)
    on_done: Callable[[SegmentationResult], None] | None = None
    keep_prompts: bool = False  # a track's command: the model returns its [SEG] prompts
    on_model_result: Callable[[Any, Frame], None] | None = None  # (m2sa_core Result, its frame)
    _finished: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def claim_finish(self) -> bool:
        """True exactly once: the guard behind "one result per command"."""
        with self._lock:
            if self._finished:
                return False
            self._finished = True
            return True


class PerceptionNode(LifecycleNode):
    """The M2SA perception lifecycle node (see the module docstring)."""

    def __init__(self, node_name: str = NODE_NAME, *, segmenter_factory: SegmenterFactory | None = None,
                 **kwargs: Any) -> None:
        # LifecycleNode.__init__ would put the lifecycle services into the node's default
        # (mutually exclusive) group, behind the autostart configure that loads the
        # model: `ros2 lifecycle get` would hang for as long as a 7B model loads.
        Node.__init__(self, node_name, **kwargs)
        LifecycleNodeMixin.__init__(self, enable_communication_interface=True,
                                    callback_group=ReentrantCallbackGroup())
        # Overrides ROS itself refused (out of the descriptor's range): the default is
        # declared meanwhile, and configure fails naming the value given.
        self._refused_overrides: dict[str, Any] = {}
        for spec in PARAMETERS:
            try:
                self.declare_parameter(spec.name, spec.default, descriptor(spec))
            except InvalidParameterValueException:
                override = self._parameter_overrides.get(spec.name)
                self._refused_overrides[spec.name] = override.value if override is not None else None
                self.declare_parameter(spec.name, spec.default, descriptor(spec), ignore_override=True)
        self.add_on_set_parameters_callback(self._check_parameters)
        self.add_post_set_parameters_callback(self._apply_parameters)
        self._factory: SegmenterFactory = segmenter_factory or load_segmenter
        self._params: NodeParams | None = None
        self._source: ModelSource | None = None
        self._segmenter: Any = None
        self._heap = HeapTrimmer(0.0)  # the configured one replaces it
        self._worker: CommandWorker | None = None
        self._active = False
        self._id_prefix = uuid.uuid4().hex[:8]
        self._topic_count = 0
        self._topic_count_lock = threading.Lock()
        self._latest = LatestFrame(key_prefix=f"{self.get_fully_qualified_name()}:{self._id_prefix}")
        self._depth = StampedBuffer[Image](capacity=10)
        self._camera_info = StampedBuffer[CameraInfo](capacity=10)
        self._warned: set[str] = set()
        self._configuring = False
        self._configure_error = ""
        self.stats = NodeStats()
        # In-flight service/action callbacks: deactivate waits for them before it
        # destroys the servers, so no reply is lost mid-send.
        self._inflight = 0
        self._inflight_cond = threading.Condition()
        # Service and action callbacks block an executor thread until their result is
        # ready. main() sizes its executor and sets this cap so blocked calls can never
        # take the threads that image and lifecycle callbacks need (None = no cap).
        self.blocking_call_limit: int | None = None

        self._sensor_group = MutuallyExclusiveCallbackGroup()
        self._command_group = MutuallyExclusiveCallbackGroup()
        self._request_group = ReentrantCallbackGroup()  # blocking service / action callbacks
        self._diag_group = MutuallyExclusiveCallbackGroup()  # never behind a model load
        self._result_pub = None
        self._overlay_pub = None
        self._markers_pub = None
        self._interfaces: list[Any] = []
        self._action_server: ActionServer | None = None
        self._track_server: ActionServer | None = None
        self._tracks = TrackSet()
        self._diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self._diag_timer = self.create_timer(1.0, self._publish_diagnostics, callback_group=self._diag_group)

        autostart = self.get_parameter("autostart").value
        self._autostart_timer = None
        if autostart is True:
            self._autostart_timer = self.create_timer(0.0, self._autostart)
        elif autostart is not False:
            self.get_logger().error(f"parameter autostart={autostart!r}: expected bool; not starting")

    # ------------------------------------------------------------------ lifecycle
    def _autostart(self) -> None:
        self.destroy_timer(self._autostart_timer)
        self._autostart_timer = None
        if self.trigger_configure() != TransitionCallbackReturn.SUCCESS:
            self.get_logger().error("autostart: configure failed (see above); the node stays "
                                    "unconfigured - fix the parameters and configure it again")
            return
        if self.trigger_activate() != TransitionCallbackReturn.SUCCESS:
            self.get_logger().error("autostart: activate failed (see above)")

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._configuring, self._configure_error = True, ""
        try:
            return self._configure(state)
        finally:
            self._configuring = False

    def _configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        try:
            values = {spec.name: self.get_parameter(spec.name).value for spec in PARAMETERS}
            params = validate({**values, **self._refused_overrides})
        except ParameterError as exc:
            self._configure_error = str(exc)
            self.get_logger().error(f"configure failed: {exc}")
            return TransitionCallbackReturn.FAILURE
        try:
            source = resolve_model_source(params.model_path, params.preset)
            if source.warning:
                self.get_logger().warning(source.warning)
            started = time.monotonic()
            segmenter = self._factory(params, source)
        except Exception as exc:  # noqa: BLE001 - any loading problem fails the transition
            self._configure_error = (f"could not load the model ({params.model_path or params.preset or 'default'}) "
                                     f"on {params.device}: {type(exc).__name__}: {exc}")
            self.get_logger().error(f"configure failed: {self._configure_error}")
            self.get_logger().debug(traceback.format_exc())
            return TransitionCallbackReturn.FAILURE
        self._params, self._source, self._segmenter = params, source, segmenter
        self._heap = HeapTrimmer(params.heap_trim_period)
        self.get_logger().info(f"model {source.source} loaded on {params.device} in "
                               f"{time.monotonic() - started:.1f} s")
        self._result_pub = self.create_lifecycle_publisher(SegmentationResult, "result", RESULT_QOS)
        self._overlay_pub = self.create_lifecycle_publisher(Image, "overlay", 1)
        self._markers_pub = self.create_lifecycle_publisher(MarkerArray, "markers", RESULT_QOS)
        self._restart_diagnostics_timer(params.diagnostics_period)
        return super().on_configure(state)

    def _restart_diagnostics_timer(self, period: float) -> None:
        self.destroy_timer(self._diag_timer)
        self._diag_timer = self.create_timer(period, self._publish_diagnostics, callback_group=self._diag_group)

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        params = self._params
        assert params is not None
        ret = super().on_activate(state)  # enables the lifecycle publishers
        if ret != TransitionCallbackReturn.SUCCESS:
            return ret
        self._worker = CommandWorker(self._process, self._reject, params.max_queue,
                                     on_handler_error=self._handler_crashed)
        reliability = (ReliabilityPolicy.RELIABLE if params.image_reliability == "reliable"
                       else ReliabilityPolicy.BEST_EFFORT)
        image_qos = QoSProfile(depth=1, history=HistoryPolicy.KEEP_LAST, reliability=reliability)
        depth_qos = QoSProfile(depth=5, history=HistoryPolicy.KEEP_LAST, reliability=reliability)
        if params.use_compressed:
            image_sub = self.create_subscription(CompressedImage, "image/compressed", self._on_compressed,
                                                 image_qos, callback_group=self._sensor_group)
        else:
            image_sub = self.create_subscription(Image, "image", self._on_image, image_qos,
                                                 callback_group=self._sensor_group)
        self._interfaces = [
            image_sub,
            self.create_subscription(Image, "depth", self._on_depth, depth_qos,
                                     callback_group=self._sensor_group),
            self.create_subscription(CameraInfo, "camera_info", self._on_camera_info, depth_qos,
                                     callback_group=self._sensor_group),
            self.create_subscription(String, "command", self._on_command, COMMAND_QOS,
                                     callback_group=self._command_group),
            self.create_subscription(Command, "command_stamped", self._on_command_stamped, COMMAND_QOS,
                                     callback_group=self._command_group),
            self.create_service(SegmentSrv, "segment", self._on_service, callback_group=self._request_group),
        ]
        self._action_server = ActionServer(
            self, SegmentAction, "segment", execute_callback=self._on_goal,
            goal_callback=lambda _goal: GoalResponse.ACCEPT if self._active else GoalResponse.REJECT,
            cancel_callback=lambda _goal: CancelResponse.ACCEPT,
            callback_group=self._request_group)
        self._track_server = ActionServer(
            self, TrackAction, "track", execute_callback=self._on_track_goal,
            goal_callback=lambda _goal: GoalResponse.ACCEPT if self._active else GoalResponse.REJECT,
            cancel_callback=lambda _goal: CancelResponse.ACCEPT,
            callback_group=self._request_group)
        self._active = True
        self.get_logger().info(f"active: listening on {self._image_topic()}, "
                               f"{self.resolve_topic_name('command')} and "
                               f"{self.resolve_topic_name('command_stamped')}")
        return TransitionCallbackReturn.SUCCESS

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._close_interfaces("node deactivated")
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._release()
        return super().on_cleanup(state)

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._close_interfaces("node shutting down")
        self._release()
        return TransitionCallbackReturn.SUCCESS

    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.get_logger().error(f"error while in state '{state.label}': releasing everything")
        self._close_interfaces("node error")
        self._release()
        return TransitionCallbackReturn.SUCCESS

    def _close_interfaces(self, reason: str) -> None:
        """Stop taking commands, answer every pending one, then drop the interfaces."""
        self._active = False
        self._tracks.end_all(reason)  # before the worker stops: the tracks end with this reason
        if self._worker is not None:
            if not self._worker.stop(f"cancelled: {reason}"):
                self.get_logger().error("the worker did not stop within 30 s (model ignored cancel)")
            self._worker = None
        with self._inflight_cond:
            self._inflight_cond.wait_for(lambda: self._inflight == 0, timeout=10.0)
        for entity in self._interfaces:
            if hasattr(entity, "topic_name"):
                self.destroy_subscription(entity)
            else:
                self.destroy_service(entity)
        self._interfaces = []
        for server in (self._action_server, self._track_server):
            if server is None:
                continue
            # A goal's result goes out after its execute callback returned (from rclpy's
            # result future); destroying the server before that would drop it.
            futures = list(getattr(server, "_result_futures", {}).values())
            deadline = time.monotonic() + 2.0
            while time.monotonic() < deadline and not all(f.done() for f in futures):
                time.sleep(0.01)
            server.destroy()
        self._action_server = self._track_server = None

    def _release(self) -> None:
        """Drop the model and everything it holds, and hand the memory back.

        Dropping the reference is not enough on CUDA: PyTorch's caching allocator keeps
        the freed blocks for itself, so a cleanup followed by configuring another model
        would run out of device memory. Reference cycles (modules, hooks, exceptions
        that saw activations) are collected first so the blocks are really free.
        """
        for pub in (self._result_pub, self._overlay_pub, self._markers_pub):
            if pub is not None:
                self.destroy_lifecycle_publisher(pub)
        self._result_pub = self._overlay_pub = self._markers_pub = None
        device = self._params.device if self._params is not None else "cpu"
        had_model = self._segmenter is not None
        self._segmenter = None
        self._params = None
        self._latest.clear()
        self._depth.clear()
        self._camera_info.clear()
        self._warned.clear()
        if had_model:
            _release_memory(device)
            trim_heap_now()

    def stop(self, reason: str = "node shutting down") -> None:
        """Answer every pending command and close the interfaces; the node stays alive."""
        self._close_interfaces(reason)
        self._wait_results_acked()

    def close(self, reason: str = "node shutting down") -> None:
        """Stop the worker (answering pending commands) and destroy the node."""
        self.stop(reason)
        self.destroy_node()

    def _wait_results_acked(self, timeout_s: float = 2.0) -> None:
        """Give reliable subscribers a moment to acknowledge the last results (shutdown)."""
        pub = self._result_pub
        if pub is None:
            return
        try:
            from rclpy.duration import Duration

            pub.wait_for_all_acked(Duration(nanoseconds=int(timeout_s * 1e9)))
        except Exception:  # noqa: BLE001 - best effort while the process ends
            pass

    # ------------------------------------------------------------------ parameters
    def _check_parameters(self, parameters: list[Parameter]) -> SetParametersResult:
        """Refuse a bad value at ``ros2 param set`` time; say when a value waits for configure."""
        problems, later = [], []
        for parameter in parameters:
            spec = SPECS.get(parameter.name)
            if spec is None:
                continue  # use_sim_time and other rclpy parameters
            _, complaint = check_value(spec, parameter.value)
            if complaint:
                problems.append(complaint)
            elif not spec.runtime:
                later.append(parameter.name)
        if problems:
            return SetParametersResult(successful=False, reason="; ".join(problems))
        reason = ""
        if later and self._segmenter is not None:
            reason = (f"{', '.join(later)}: load-time parameter(s), take effect at the next configure "
                      f"(deactivate, cleanup, configure, activate)")
            self.get_logger().info(reason)
        return SetParametersResult(successful=True, reason=reason)

    def _apply_parameters(self, parameters: list[Parameter]) -> None:
        """Runtime parameters take effect at once on a configured node."""
        for parameter in parameters:
            self._refused_overrides.pop(parameter.name, None)
        params = self._params
        if params is None:
            return
        changes = {}
        for parameter in parameters:
            spec = SPECS.get(parameter.name)
            if spec is not None and spec.runtime:
                changes[spec.name] = check_value(spec, parameter.value)[0]
        if not changes:
            return
        self._params = dataclasses.replace(params, **changes)
        if "heap_trim_period" in changes:
            self._heap = HeapTrimmer(changes["heap_trim_period"])
        if "diagnostics_period" in changes:
            self._restart_diagnostics_timer(changes["diagnostics_period"])
        if "mask_threshold" in changes and hasattr(self._segmenter, "mask_threshold"):
            self._segmenter.mask_threshold = changes["mask_threshold"]
        self.get_logger().info("applied " + ", ".join(f"{k}={v!r}" for k, v in changes.items()))

    # ------------------------------------------------------------------ inputs
    def _image_topic(self) -> str:
        name = "image/compressed" if self._params and self._params.use_compressed else "image"
        return self.resolve_topic_name(name)

    def _on_image(self, msg: Image) -> None:
        try:
            self._latest.put(image_to_rgb(msg, what=self._image_topic()), msg.header)
        except Exception as exc:  # noqa: BLE001 - an exception out of a callback stops the executor
            error = _conversion_error(exc, self._image_topic())
            self._latest.put(None, msg.header, error=error, height=msg.height, width=msg.width)
            self._warn_once(f"image:{error}", f"bad image: {error}")
        self._schedule_tracks()

    def _on_compressed(self, msg: CompressedImage) -> None:
        try:
            self._latest.put(compressed_to_rgb(msg, what=self._image_topic()), msg.header)
        except Exception as exc:  # noqa: BLE001 - an exception out of a callback stops the executor
            error = _conversion_error(exc, self._image_topic())
            self._latest.put(None, msg.header, error=error)
            self._warn_once(f"image:{error}", f"bad image: {error}")
        self._schedule_tracks()

    def _on_depth(self, msg: Image) -> None:
        self._depth.push(_stamp_ns(msg.header), msg)

    def _on_camera_info(self, msg: CameraInfo) -> None:
        self._camera_info.push(_stamp_ns(msg.header), msg)

    def _new_request_id(self) -> str:
        with self._topic_count_lock:
            self._topic_count += 1
            return f"{self._id_prefix}-{self._topic_count}"

    def _on_command(self, msg: String) -> None:
        self._accept(Request(request_id=self._new_request_id(), command=msg.data, source="topic",
                             received_ns=self.get_clock().now().nanoseconds))

    def _on_command_stamped(self, msg: Command) -> None:
        """A command with the planner's request id; its stamp (when set) is when it was given."""
        stamp = _stamp_ns(msg.header)
        self._accept(Request(request_id=msg.request_id or self._new_request_id(), command=msg.text,
                             source="topic", received_ns=stamp if stamp > 0 else self.get_clock().now().nanoseconds))

    def _request_from(self, goal: Any, source: str, request_id: str) -> Request:
        """Request for a service / action goal; an image in the goal is converted here."""
        request_id = goal.request_id or request_id
        request = Request(request_id=request_id, command=goal.command, source=source,
                          received_ns=self.get_clock().now().nanoseconds,
                          max_image_age=float(goal.max_image_age))
        if goal.image.height > 0 or goal.image.width > 0 or len(goal.image.data) > 0:
            header = goal.image.header
            try:
                rgb, error = image_to_rgb(goal.image, what=f"{source} request image"), ""
            except Exception as exc:  # noqa: BLE001 - the request is answered with the reason
                rgb, error = None, _conversion_error(exc, f"{source} request image")
            request.frame = Frame(rgb=rgb, header=header, key="", stamp_ns=_stamp_ns(header),
                                  received_at=time.monotonic(), height=int(goal.image.height),
                                  width=int(goal.image.width), error=error)
        return request

    def _enter_inflight(self) -> bool:
        """Count a blocking call in; False when the cap of blocked executor threads is reached."""
        with self._inflight_cond:
            if self.blocking_call_limit is not None and self._inflight >= self.blocking_call_limit:
                return False
            self._inflight += 1
            return True

    def _on_service(self, request: SegmentSrv.Request, response: SegmentSrv.Response) -> SegmentSrv.Response:
        req = self._request_from(request, "service", f"{self._id_prefix}-srv-{uuid.uuid4().hex[:8]}")
        if not self._enter_inflight():
            response.result = self._too_many_calls(req)
            return response
        try:
            done = threading.Event()
            box: list[SegmentationResult] = []
            req.on_done = lambda msg: (box.append(msg), done.set())
            self._accept(req)
            self._wait(done)
            response.result = box[0] if box else error_result(
                "node shutting down", request_id=req.request_id, command=req.command)
            return response
        finally:
            self._leave_inflight()

    def _on_goal(self, goal_handle: Any) -> Any:
        req = self._request_from(goal_handle.request, "action", uuid.UUID(bytes=bytes(goal_handle.goal_id.uuid)).hex)
        if not self._enter_inflight():
            goal_handle.abort()
            return SegmentAction.Result(result=self._too_many_calls(req))
        try:
            done = threading.Event()
            box: list[SegmentationResult] = []

            def feedback(stage: str, partial: str) -> None:
                fb = SegmentAction.Feedback(stage=stage, partial_answer=partial)
                goal_handle.publish_feedback(fb)

            req.on_feedback = feedback
            req.on_done = lambda msg: (box.append(msg), done.set())
            self._accept(req, stop_when=lambda: goal_handle.is_cancel_requested)
            self._wait(done)
            result = box[0] if box else error_result("node shutting down", request_id=req.request_id,
                                                     command=req.command)
            if goal_handle.is_cancel_requested and result.error.startswith("cancelled"):
                goal_handle.canceled()
            elif result.success:
                goal_handle.succeed()
            else:
                goal_handle.abort()
            return SegmentAction.Result(result=result)
        finally:
            self._leave_inflight()

    # ------------------------------------------------------------------ tracks
    def _on_track_goal(self, goal_handle: Any) -> Any:
        """The ``track`` action: the command once with the full model, then every new frame.

        Blocks its executor thread until the track ends (like the ``segment`` action, it
        counts against ``blocking_call_limit``); the worker delivers the answer and the
        tracked frames as feedback meanwhile. Exactly one final result, with the reason.
        """
        goal = goal_handle.request
        request_id = goal.request_id or uuid.UUID(bytes=bytes(goal_handle.goal_id.uuid)).hex
        req = Request(request_id=request_id, command=goal.command, source="track",
                      received_ns=self.get_clock().now().nanoseconds, keep_prompts=True)
        if not self._enter_inflight():
            msg = self._too_many_calls(req)
            return self._end_goal(goal_handle, msg, 0, ERROR_PREFIX + msg.error)
        try:
            return self._run_track(goal_handle, req)
        finally:
            self._leave_inflight()

    def _run_track(self, goal_handle: Any, req: Request) -> Any:
        try:
            settings = TrackSettings.from_goal(goal_handle.request)
        except ValueError as exc:
            msg = self._error(req, f"bad track goal: {exc}")
            self._finish(req, msg)
            return self._end_goal(goal_handle, msg, 0, ERROR_PREFIX + msg.error)
        track = Track(req.request_id, req.command, settings, time.monotonic(), handle=goal_handle)
        answered = threading.Event()
        answer: list[SegmentationResult] = []
        prompts: list[tuple[Any, str]] = []

        def on_done(msg: SegmentationResult) -> None:
            answer.append(msg)
            answered.set()
            if msg.success and prompts and prompts[0][0] is not None:
                feedback = TrackAction.Feedback(result=msg, frame_seq=0)
                track.answered(prompts[0][0], prompts[0][1], msg, lambda: goal_handle.publish_feedback(feedback))
            elif goal_handle.is_cancel_requested:
                track.end(CANCELLED, last=msg)
            else:
                track.end(ERROR_PREFIX + (msg.error or "the model returned no prompts to track"), last=msg)

        req.on_model_result = lambda result, frame: prompts.append((getattr(result, "prompts", None), frame.key))
        req.on_done = on_done
        self._tracks.add(track)
        try:
            self._accept(req, stop_when=lambda: goal_handle.is_cancel_requested or not track.active)
            while not track.ended.wait(0.05):
                track.check(time.monotonic(), goal_handle.is_cancel_requested)
                if not self.context.ok():
                    track.end("node shutting down")
            self._wait(answered)  # a command still running stops at its next check
        finally:
            self._tracks.remove(track)
        final = track.last if track.last is not None else (
            answer[0] if answer else self._error(req, track.reason))
        return self._end_goal(goal_handle, final, track.frames, track.reason)

    def _end_goal(self, goal_handle: Any, msg: SegmentationResult, frames: int, reason: str) -> Any:
        """Set the goal's status from the reason: cancelled, succeeded (timeout, lost) or aborted."""
        if reason == CANCELLED and goal_handle.is_cancel_requested:
            goal_handle.canceled()
        elif reason in (TIMEOUT, LOST):
            goal_handle.succeed()
        else:
            goal_handle.abort()
        self.get_logger().info(f"track {msg.request_id} ended after {frames} frame(s): {reason}")
        return TrackAction.Result(result=msg, frames=frames, reason=reason)

    def _schedule_tracks(self) -> None:
        """Queue the newest frame for each track that wants it (image callback, after each tracked frame)."""
        worker, frame = self._worker, self._latest.get()
        if worker is None or frame is None or not self._active or frame.error:
            return
        for track in self._tracks.due(frame.key, time.monotonic()):
            if not worker.submit(Job(payload=TrackFrame(track), bounded=False)):
                track.dropped()

    def _process_track_frame(self, track: Track) -> None:
        """Worker thread: one tracked frame of ``track`` on the newest camera frame."""
        segmenter, params, frame = self._segmenter, self._params, self._latest.get()
        if segmenter is None or params is None or frame is None or frame.rgb is None:
            track.dropped()
            return
        if not track.take(frame.key, time.monotonic()):
            return
        centroid_fn, _ = self._centroid_fn(frame)
        started = time.monotonic()
        try:
            result, state = segmenter.track(frame.rgb, track.prompts, track.state,
                                            use_previous_mask=track.settings.use_previous_mask,
                                            frame_key=frame.key or None)
            elapsed = (time.monotonic() - started) * 1000.0
            msg = result_to_msg(result, request_id=track.request_id, command=track.command, header=frame.header,
                                image_shape=frame.rgb.shape, inference_ms=elapsed, centroid_fn=centroid_fn)
        except Exception as exc:  # noqa: BLE001 - a model failure ends the track, not the node
            self.get_logger().error(f"model failure on track {track.request_id}: {traceback.format_exc()}")
            error = f"model failure: {type(exc).__name__}: {exc}"
            out_of_memory = _is_out_of_memory(exc)
            del exc
            last = error_result(error, request_id=track.request_id, command=track.command, header=frame.header,
                                height=frame.height, width=frame.width)
            track.end(ERROR_PREFIX + error, last=last)
            if out_of_memory:
                _release_memory(params.device)
            return

        def deliver(seq: int) -> None:
            self.stats.record(True, msg.inference_ms, "")
            pub = self._result_pub
            if pub is not None:
                pub.publish(msg)
            track.handle.publish_feedback(TrackAction.Feedback(result=msg, frame_seq=seq))

        if track.record(result, state, msg, deliver):
            self._publish_overlay(frame, result)
            self._publish_markers(msg)
        self._schedule_tracks()  # a newer frame may have come while this one ran

    def _too_many_calls(self, req: Request) -> SegmentationResult:
        msg = self._error(req, f"queue full: {self.blocking_call_limit} service/action calls already "
                               "waiting")
        self._finish(req, msg)
        return msg

    def _leave_inflight(self) -> None:
        with self._inflight_cond:
            self._inflight -= 1
            self._inflight_cond.notify_all()

    def _wait(self, done: threading.Event) -> None:
        while not done.wait(0.2):
            if not self.context.ok():
                return

    # ------------------------------------------------------------------ the pipeline
    def _accept(self, req: Request, stop_when: Callable[[], bool] | None = None) -> None:
        """Answer at once (bad command, inactive, queue full) or queue for the worker."""
        params, worker = self._params, self._worker
        # Same cleaning as the prompt builder: control characters alone count as empty.
        command = sanitize_command(req.command)
        if not self._active or params is None or worker is None:
            self._finish(req, error_result("node is not active", request_id=req.request_id,
                                           command=req.command))
            return
        if not command:
            self._finish(req, self._error(req, "empty command"))
            return
        if len(req.command) > params.max_command_length:
            self._finish(req, self._error(
                req, f"command too long: {len(req.command)} characters > max_command_length "
                     f"{params.max_command_length}"))
            return
        if not worker.submit(Job(payload=req, stop_when=stop_when)):
            self._finish(req, self._error(
                req, f"queue full: {worker.max_queue} commands already waiting (max_queue)"))

    def _error(self, req: Request, error: str, frame: Frame | None = None,
               inference_ms: float = 0.0) -> SegmentationResult:
        frame = frame if frame is not None else (req.frame or self._latest.get())
        if frame is None:
            return error_result(error, request_id=req.request_id, command=req.command,
                                inference_ms=inference_ms)
        return error_result(error, request_id=req.request_id, command=req.command, header=frame.header,
                            height=frame.height, width=frame.width, inference_ms=inference_ms)

    def _resolve_frame(self, req: Request, job: Job) -> tuple[Frame | None, str]:
        """The frame a request refers to, or the reason it cannot be used."""
        params = self._params
        assert params is not None
        frame = req.frame
        if frame is None:
            frame = self._latest.get()
            if frame is None and params.wait_for_image > 0:
                if req.on_feedback:
                    req.on_feedback("waiting_for_image", "")
                frame = self._latest.wait(params.wait_for_image, should_stop=job.should_stop)
            if frame is None:
                return None, (f"no image yet: nothing received on {self._image_topic()} "
                              f"(waited {params.wait_for_image:.1f} s)")
        if frame.error:
            return frame, f"bad image: {frame.error}"
        limit = req.max_image_age if req.max_image_age > 0 else params.max_image_age
        if limit > 0 and req.frame is None:
            age = frame.age_s(req.received_ns)
            if age > limit:
                return frame, f"image too old: {age:.2f} s > max_image_age {limit:.2f} s"
        return frame, ""

    def _process(self, job: Job) -> None:
        """Worker thread: one command from frame to published result (or one tracked frame)."""
        if isinstance(job.payload, TrackFrame):
            self._process_track_frame(job.payload.track)
            return
        req: Request = job.payload
        params, segmenter = self._params, self._segmenter
        if params is None or segmenter is None:
            self._finish(req, self._error(req, "node is not configured"))
            return
        if job.should_stop():
            self._finish(req, self._error(req, job.cancel_reason or "cancelled"))
            return
        frame, problem = self._resolve_frame(req, job)
        if job.should_stop():
            self._finish(req, self._error(req, job.cancel_reason or "cancelled", frame))
            return
        if problem:
            self._finish(req, self._error(req, problem, frame))
            return
        assert frame is not None and frame.rgb is not None
        # Depth and intrinsics are bound now, before the model runs: at 30 Hz the depth
        # buffer holds a third of a second, and a 7B model takes longer than that.
        centroid_fn, depth_state = self._centroid_fn(frame)
        stage = ["encoding"]

        def on_stage(name: str) -> None:
            stage[0] = name
            if req.on_feedback:
                req.on_feedback(name, "")

        def on_text(text: str) -> None:
            if req.on_feedback:
                req.on_feedback(stage[0], text)

        started = time.monotonic()
        failed = out_of_memory = False
        try:
            extra = {"keep_prompts": True} if req.keep_prompts else {}
            result = segmenter.segment(frame.rgb, req.command, frame_key=frame.key or None,
                                       on_stage=on_stage, on_text=on_text, should_stop=job.should_stop, **extra)
        except Cancelled:
            elapsed = (time.monotonic() - started) * 1000.0
            self._finish(req, self._error(req, job.cancel_reason or "cancelled", frame, elapsed))
            return
        except Exception as exc:  # noqa: BLE001 - a model failure is an answer, not a crash
            elapsed = (time.monotonic() - started) * 1000.0
            self.get_logger().error(f"model failure on request {req.request_id}: {traceback.format_exc()}")
            self._finish(req, self._error(req, f"model failure: {type(exc).__name__}: {exc}", frame, elapsed))
            failed, out_of_memory = True, _is_out_of_memory(exc)
        if failed:
            if out_of_memory:
                # Outside the except block: the exception, its traceback and the frames
                # it holds (activations, KV cache) are unreachable now and can be freed.
                _release_memory(params.device)
            return
        elapsed = (time.monotonic() - started) * 1000.0
        if depth_state == "missing":  # the matching depth frame may have arrived meanwhile
            centroid_fn, _ = self._centroid_fn(frame)
        try:
            msg = result_to_msg(result, request_id=req.request_id, command=req.command,
                                header=frame.header, image_shape=frame.rgb.shape, inference_ms=elapsed,
                                centroid_fn=centroid_fn)
        except Exception as exc:  # noqa: BLE001 - e.g. a model returning wrong-sized masks
            self.get_logger().error(f"could not convert the result of {req.request_id}: {traceback.format_exc()}")
            self._finish(req, self._error(req, f"model failure: {exc}", frame, elapsed))
            return
        if req.on_model_result is not None:
            req.on_model_result(result, frame)
        self._finish(req, msg)
        self._publish_overlay(frame, result)
        self._publish_markers(msg)
        del result, msg  # before trimming: the answer's masks are garbage now
        worker = self._worker
        if worker is not None and worker.depth == 0:  # idle: trimming delays no one
            self._heap.maybe_trim()

    def _reject(self, job: Job, reason: str) -> None:
        """A queued job the worker will never run (node deactivating)."""
        if isinstance(job.payload, TrackFrame):
            job.payload.track.dropped()  # the track itself ends with the node's reason
            return
        req: Request = job.payload
        self._finish(req, self._error(req, reason))

    def _handler_crashed(self, job: Job, exc: BaseException) -> None:
        if isinstance(job.payload, TrackFrame):
            track = job.payload.track
            self.get_logger().error(f"internal error on track {track.request_id}: "
                                    f"{''.join(traceback.format_exception(exc))}")
            track.dropped()
            track.end(f"{ERROR_PREFIX}internal error: {type(exc).__name__}: {exc}")
            return
        req: Request = job.payload
        self.get_logger().error(f"internal error on request {req.request_id}: "
                                f"{''.join(traceback.format_exception(exc))}")
        self._finish(req, self._error(req, f"internal error: {type(exc).__name__}: {exc}"))

    def _finish(self, req: Request, msg: SegmentationResult) -> None:
        """Publish the one result of a request and hand it to its caller."""
        if not req.claim_finish():
            self.get_logger().error(f"request {req.request_id} answered twice; second answer dropped")
            return
        self.stats.record(msg.success, msg.inference_ms, msg.error)
        if not msg.success:
            # repr: user text with newlines or escape codes must not forge log lines.
            self.get_logger().warning(f"{req.source} command {req.request_id} "
                                      f"{req.command[:80]!r}: {msg.error}")
        pub = self._result_pub
        if pub is not None:
            try:
                pub.publish(msg)
            except Exception as exc:  # noqa: BLE001 - e.g. the context went down meanwhile
                self.get_logger().error(f"could not publish the result of {req.request_id}: {exc}")
        if req.on_done is not None:
            req.on_done(msg)

    # ------------------------------------------------------------------ outputs
    def _centroid_fn(self, frame: Frame) -> tuple[Callable[[Any], Any] | None, str]:
        """Bind the depth frame and intrinsics nearest to ``frame``.

        Returns (centroid function, "bound") or (None, why): "missing" when no depth /
        camera_info is within ``depth_tolerance`` yet (worth another look later),
        "refused" when the ones there cannot be used (logged once).
        """
        params = self._params
        assert params is not None
        tolerance = int(params.depth_tolerance * 1e9)
        depth_msg = self._depth.nearest(frame.stamp_ns, tolerance)
        info = self._camera_info.nearest(frame.stamp_ns, tolerance)
        if depth_msg is None or info is None:
            return None, "missing"
        depth_frame, colour_frame = depth_msg.header.frame_id, frame.header.frame_id
        if depth_frame and colour_frame and depth_frame != colour_frame and not params.allow_depth_frame_mismatch:
            self._warn_once(
                f"depth-frame:{depth_frame}:{colour_frame}",
                f"no centroids: depth on {self.resolve_topic_name('depth')} is in frame '{depth_frame}' but the "
                f"colour image is in '{colour_frame}'; publish depth registered to the colour camera (e.g. "
                f"aligned_depth_to_color), or set allow_depth_frame_mismatch:=true if it is registered anyway")
            return None, "refused"
        try:
            depth = depth_to_metres(depth_msg, what=self.resolve_topic_name("depth"))
            intrinsics = Intrinsics.from_k(info.k, info.width or depth.shape[1], info.height or depth.shape[0])
        except (ImageConversionError, ValueError) as exc:
            self._warn_once(f"depth:{exc}", f"no centroids: {exc}")
            return None, "refused"
        if depth.shape != (frame.height, frame.width):
            self._warn_once(
                f"depth-size:{depth.shape}:{frame.height}x{frame.width}",
                f"no centroids: depth image is {depth.shape[1]}x{depth.shape[0]} but the colour image is "
                f"{frame.width}x{frame.height}; publish depth registered to the colour camera "
                f"(e.g. aligned_depth_to_color)")
            return None, "refused"
        if (intrinsics.height, intrinsics.width) != depth.shape:
            self._warn_once(
                f"info-size:{intrinsics.width}x{intrinsics.height}:{depth.shape}",
                f"no centroids: camera_info is {intrinsics.width}x{intrinsics.height} but depth is "
                f"{depth.shape[1]}x{depth.shape[0]}")
            return None, "refused"

        def centroid(mask: Any) -> Any:
            return mask_centroid(mask, depth, intrinsics, erosion_px=params.centroid_erosion_px)

        return centroid, "bound"

    def _publish_overlay(self, frame: Frame, result: Any) -> None:
        params, pub = self._params, self._overlay_pub
        if params is None or pub is None or not params.publish_overlay or pub.get_subscription_count() == 0:
            return
        try:
            pub.publish(rgb_to_msg(overlay_targets(frame.rgb, result.targets), frame.header))
        except Exception as exc:  # noqa: BLE001 - the overlay is a nicety, never fatal
            self._warn_once(f"overlay:{type(exc).__name__}", f"overlay failed: {exc}")

    def _publish_markers(self, msg: SegmentationResult) -> None:
        pub = self._markers_pub
        if pub is None or pub.get_subscription_count() == 0:
            return
        try:
            pub.publish(centroid_markers(msg))
        except Exception as exc:  # noqa: BLE001 - markers are a nicety, never fatal
            self._warn_once(f"markers:{type(exc).__name__}", f"markers failed: {exc}")

    def lifecycle_state(self) -> str:
        """unconfigured, configuring, inactive or active (what /diagnostics reports)."""
        if self._configuring:
            return "configuring"
        if self._active:
            return "active"
        return "inactive" if self._segmenter is not None else "unconfigured"

    def _publish_diagnostics(self) -> None:
        params, worker, source = self._params, self._worker, self._source
        stats = self.stats.snapshot()
        depth = worker.depth if worker else 0
        state = self.lifecycle_state()
        level, message = status_level(state, bool(source and source.is_preset and self._segmenter is not None),
                                      depth, worker.max_queue if worker else 0, self._configure_error)
        values: dict[str, Any] = {
            "model": source.source if source and self._segmenter is not None else "",
            "device": params.device if params else "",
            "state": state,
            "queue_depth": depth,
            "max_queue": worker.max_queue if worker else (params.max_queue if params else 0),
            "busy": bool(worker and worker.busy),
            "last_latency_ms": stats["last_latency_ms"],
            "mean_latency_ms": stats["mean_latency_ms"],
            "results": stats["results"],
            "errors": stats["errors"],
            "queue_full": stats["queue_full"],
            "last_error": stats["last_error"],
        }
        cache = getattr(self._segmenter, "cache_stats", None) if self._segmenter is not None else None
        if isinstance(cache, dict):
            values.update({f"cache_{k}": v for k, v in cache.items()})
        try:
            self._diag_pub.publish(build_diagnostics(
                f"{self.get_fully_qualified_name()}: m2sa perception", values["device"] or "none",
                level, message, values, stamp=self.get_clock().now().to_msg()))
        except Exception as exc:  # noqa: BLE001 - shutting down
            self.get_logger().debug(f"diagnostics not published: {exc}")

    def _warn_once(self, key: str, text: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            self.get_logger().warning(text)


def _conversion_error(exc: BaseException, what: str) -> str:
    """The text of a conversion failure: ours name the field; anything else names its type."""
    if isinstance(exc, ImageConversionError):
        return str(exc)
    return f"{what}: could not convert the image: {type(exc).__name__}: {exc}"


def _is_out_of_memory(exc: BaseException) -> bool:
    """An allocation failure: torch.OutOfMemoryError (CUDA and other devices) or MemoryError (host)."""
    torch = sys.modules.get("torch")
    if isinstance(exc, MemoryError):
        return True
    return torch is not None and isinstance(exc, getattr(torch, "OutOfMemoryError", ()))


def _release_memory(device: str) -> None:
    """Give back what a failed call held: collect reference cycles, empty the CUDA cache.

    Tensors of a call that raised can sit in a cycle through the exception's traceback,
    so only a collection frees them; on CUDA the allocator then still keeps the blocks
    cached for itself until ``empty_cache()`` hands them back to the device.
    """
    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and device.startswith("cuda") and torch.cuda.is_available() \
            and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def _stamp_ns(header: Any) -> int:
    return int(header.stamp.sec) * 1_000_000_000 + int(header.stamp.nanosec)


class ShutdownRequest:
    """SIGINT / SIGTERM -> one orderly shutdown; repeated signals are only logged.

    ``ros2 launch`` forwards SIGINT to the node while the terminal's Ctrl-C reaches the
    same process group, so the node gets it twice. rclpy's own handler would shut the
    context down on the first one, after which no pending command could be answered
    and the second would kill the process (exit -2). Here the first signal only sets
    an event; main() then answers pending commands and exits 0.
    """

    def __init__(self) -> None:
        self.event = threading.Event()
        self.signal_name = ""
        self.repeats = 0

    def install(self) -> None:
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, self._handle)

    def _handle(self, signum: int, _frame: Any) -> None:
        if self.event.is_set():
            self.repeats += 1
            return
        self.signal_name = signal.Signals(signum).name
        self.event.set()


@cli_entry("m2sa-perception")
def main(args: list[str] | None = None) -> int:
    """Console entry point ``m2sa-perception`` (and ``ros2 run m2sa_ros perception_node``).

    Takes the standard ROS arguments: ``--ros-args -p name:=value --params-file FILE
    -r from:=to``. Exits 0 on SIGINT or SIGTERM after answering every pending command.
    """
    argv = args if args is not None else sys.argv
    check_params_files(argv)
    shutdown = ShutdownRequest()
    shutdown.install()  # before rclpy.init: a signal during start-up is handled too
    rclpy.init(args=argv, signal_handler_options=SignalHandlerOptions.NO)
    node: PerceptionNode | None = None
    executor: MultiThreadedExecutor | None = None
    spinner: threading.Thread | None = None
    try:
        node = PerceptionNode()
        # Threads: sensors, commands, lifecycle services, diagnostics, timers, plus one
        # per service/action call that can usefully wait (the running command and a
        # full queue).
        max_queue = node.get_parameter("max_queue").value
        waiting = max_queue + 1 if isinstance(max_queue, int) and 0 < max_queue <= 64 else 5
        node.blocking_call_limit = waiting
        executor = MultiThreadedExecutor(num_threads=waiting + 5)
        executor.add_node(node)
        spinner = threading.Thread(target=executor.spin, name="m2sa-executor", daemon=True)
        spinner.start()
        while not shutdown.event.wait(0.5):
            if not spinner.is_alive():
                break
        if shutdown.signal_name:
            node.get_logger().info(f"{shutdown.signal_name}: shutting down; answering pending commands")
        # The executor keeps spinning while pending commands are answered, so service
        # and action replies still go out; only then does it stop.
        node.stop(f"node shutting down ({shutdown.signal_name or 'executor stopped'})")
    finally:
        if executor is not None:
            executor.shutdown()
        if spinner is not None:
            spinner.join(timeout=10)
        if node is not None:
            try:
                node.close()
            except Exception as exc:  # noqa: BLE001 - exiting anyway; say why it was unclean
                print(f"perception_node: unclean shutdown: {type(exc).__name__}: {exc}", file=sys.stderr)
        rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
