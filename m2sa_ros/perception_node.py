"""perception_node: camera images + language commands in, labelled masks out.

A thin rclpy lifecycle node over ``m2sa_core.inference.Segmenter`` (docs/ARCHITECTURE.md,
docs/ROS_INTERFACE.md). What it adds is robotics plumbing only:

* lifecycle: configure validates the parameters and loads the model, activate opens
  the topics / service / actions and starts the worker, deactivate closes the topics
  and service (the actions stay until cleanup, refusing goals while inactive), cleanup
  frees the model and the GPU cache; ``autostart`` does configure + activate
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
* ``stop()`` / ``close()`` answer every pending command first: the process around the
  node (main.py) calls them on SIGINT or SIGTERM and exits 0;
* ``cameras: [head, wrist]`` serves several cameras from the one model: each camera's
  topics, service and actions live under ``<camera>/`` (cameras.py), each has a queue
  of its own in the worker, served round-robin, and commands of several cameras that
  wait together are answered by one batched model call (``Segmenter.segment_many``).

Run it as ``m2sa-perception --ros-args --params-file config/perception.yaml`` or
``ros2 launch m2sa_ros perception.launch.py``.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import sys
import threading
import time
import traceback
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

from diagnostic_msgs.msg import DiagnosticArray
from rcl_interfaces.msg import SetParametersResult
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.exceptions import InvalidParameterTypeException, InvalidParameterValueException
from rclpy.lifecycle import LifecycleNode, LifecycleNodeMixin, LifecycleState, TransitionCallbackReturn
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import CameraInfo, CompressedImage, Image
from std_msgs.msg import String
from visualization_msgs.msg import MarkerArray

from m2sa_core.prompt import sanitize_command
from m2sa_core.types import Cancelled
from m2sa_core.visualize import overlay_targets
from m2sa_ros.action import Segment as SegmentAction
from m2sa_ros.action import Track as TrackAction
from m2sa_ros.cameras import Camera
from m2sa_ros.centroids import Intrinsics, mask_centroid
from m2sa_ros.diagnostics import NodeStats, build_diagnostics_array, status_level
from m2sa_ros.frames import Frame
from m2sa_ros.heap import HeapTrimmer, trim_heap_now
from m2sa_ros.image_conversion import (ImageConversionError, compressed_to_rgb, depth_to_metres,
                                       image_to_rgb, rgb_to_msg)
from m2sa_ros.feedback import AnswerFeedback
from m2sa_ros.markers import centroid_markers
from m2sa_ros.model_source import ModelSource, resolve_model_source
from m2sa_ros.msg import Command, SegmentationResult
from m2sa_ros.node_params import (PARAMETERS, SPECS, NodeParams, ParameterError, ParamSpec, check_value,
                                  descriptor, ros_value, validate)
from m2sa_ros.rclpy_compat import add_set_parameters_callbacks
from m2sa_ros.result_conversion import error_result, result_to_msg
from m2sa_ros.srv import Segment as SegmentSrv
from m2sa_ros.tracks import CANCELLED, ERROR_PREFIX, LOST, TIMEOUT, Track, TrackSettings
from m2sa_ros.worker import CommandWorker, Job

NODE_NAME = "perception_node"
RESULT_QOS = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
# Commands are tiny and must not be dropped when a planner sends several at once.
COMMAND_QOS = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)

# (params, model source) -> an object with Segmenter's segment() and cache_stats.
SegmenterFactory = Callable[[NodeParams, ModelSource], Any]


def load_segmenter(params: NodeParams, source: ModelSource) -> Any:
    """The production factory: ``Segmenter.from_pretrained`` with the node's parameters."""
    from m2sa_core.inference import Segmenter, dtype_from_name

    import torch

    if params.cpu_threads:
        torch.set_num_threads(params.cpu_threads)  # process-wide: the node is the model's only user
    dtype = dtype_from_name(params.dtype)
    return Segmenter.from_pretrained(source.source, device=params.device, dtype=dtype,
                                     frame_cache_size=params.frame_cache_size,
                                     max_new_tokens=params.max_new_tokens,
                                     mask_threshold=params.mask_threshold, amodal=params.amodal,
                                     duplicate_iou=None if params.duplicate_iou < 0 else params.duplicate_iou,
                                     quantization=params.quantization)


@dataclass(frozen=True)
class TrackFrame:
    """A worker job: the next new camera frame of one track (the newest when it runs)."""

    track: Track
    camera: Camera


@dataclass
class Prepared:
    """A request ready for the model: its frame chosen, depth bound (see ``_prepare``)."""

    job: Job
    req: "Request"
    frame: Frame
    centroid_fn: Callable[[Any], Any] | None
    depth_state: str


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
    _finished: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def finished(self) -> bool:
        """Answered already (a batch skips such a row's result)."""
        with self._lock:
            return self._finished

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
        # Overrides ROS itself refused (out of the descriptor's range, of the wrong type):
        # the default is declared meanwhile, and configure fails naming the value given.
        self._refused_overrides: dict[str, Any] = {}
        for spec in PARAMETERS:
            override = self._parameter_overrides.get(spec.name)
            try:
                self._declare(spec, spec.default if override is None else ros_value(spec, override.value))
            except (InvalidParameterValueException, InvalidParameterTypeException):
                self._refused_overrides[spec.name] = override.value if override is not None else None
                self._declare(spec, spec.default)
        # Pre- and post-set callbacks arrived in Iron's rclpy; rclpy_compat gives them on Humble.
        add_set_parameters_callbacks(self, pre=self._prepare_parameters, on_set=self._check_parameters,
                                     post=self._apply_parameters)
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
        # The single camera of today until configure reads ``cameras``.
        self._cameras: list[Camera] = [self._new_camera("")]
        self._warned: set[str] = set()
        self._configuring = False
        self._configure_error = ""
        self.stats = NodeStats()  # all cameras; each camera has its own too
        self.batch_sizes: Counter[int] = Counter()  # batched model calls by their size (several cameras)
        self._batch_lock = threading.Lock()  # the worker counts, the diagnostics timer reads
        # In-flight service/action callbacks: deactivate waits for them before it
        # destroys the servers, so no reply is lost mid-send.
        self._inflight = 0
        self._inflight_cond = threading.Condition()
        # Service and action callbacks block an executor thread until their result is
        # ready. main() sizes its executor and sets this cap so blocked calls can never
        # take the threads that image and lifecycle callbacks need (None = no cap).
        self.blocking_call_limit: int | None = None

        self._request_group = ReentrantCallbackGroup()  # blocking service / action callbacks
        self._diag_group = MutuallyExclusiveCallbackGroup()  # never behind a model load
        self._diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self._diag_timer = self.create_timer(1.0, self._publish_diagnostics, callback_group=self._diag_group)

        autostart = self._refused_overrides.get("autostart", self.get_parameter("autostart").value)
        self._autostart_timer = None
        if autostart is True:
            self._autostart_timer = self.create_timer(0.0, self._autostart)
        elif autostart is not False:
            self.get_logger().error(f"parameter autostart={autostart!r}: expected bool; not starting")

    # ------------------------------------------------------------------ cameras
    def _new_camera(self, name: str) -> Camera:
        camera = Camera(name, key_prefix=f"{self.get_fully_qualified_name()}:{self._id_prefix}")
        # Per camera: one camera's image conversion or command burst never waits on another's.
        camera.sensor_group = MutuallyExclusiveCallbackGroup()
        camera.command_group = MutuallyExclusiveCallbackGroup()
        return camera

    @property
    def cameras(self) -> list[Camera]:
        """The cameras served: one nameless camera unless ``cameras`` names several."""
        return list(self._cameras)

    def camera(self, name: str = "") -> Camera:
        """A camera by name ("" = the first, the single camera's)."""
        if not name:
            return self._cameras[0]
        for camera in self._cameras:
            if camera.name == name:
                return camera
        raise KeyError(f"no camera {name!r} (cameras: {[c.name for c in self._cameras]})")

    # The single camera's state under its former names (tests and tools reach for them).
    @property
    def _latest(self) -> Any:
        return self._cameras[0].latest

    @property
    def _depth(self) -> Any:
        return self._cameras[0].depth

    @property
    def _camera_info(self) -> Any:
        return self._cameras[0].camera_info

    @property
    def _tracks(self) -> Any:
        return self._cameras[0].tracks

    @property
    def _result_pub(self) -> Any:
        return self._cameras[0].result_pub

    @property
    def _overlay_pub(self) -> Any:
        return self._cameras[0].overlay_pub

    @property
    def _markers_pub(self) -> Any:
        return self._cameras[0].markers_pub

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
        if tuple(c.name for c in self._cameras) != (params.cameras or ("",)):
            self._cameras = [self._new_camera(name) for name in params.cameras or ("",)]
        for camera in self._cameras:
            camera.result_pub = self.create_lifecycle_publisher(SegmentationResult, camera.topic("result"),
                                                                RESULT_QOS)
            camera.overlay_pub = self.create_lifecycle_publisher(Image, camera.topic("overlay"), 1)
            camera.markers_pub = self.create_lifecycle_publisher(MarkerArray, camera.topic("markers"), RESULT_QOS)
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
        several = len(self._cameras) > 1
        self._worker = CommandWorker(self._process, self._reject, params.max_queue,
                                     on_handler_error=self._handler_crashed,
                                     lanes=tuple(c.lane for c in self._cameras),
                                     batch_handler=self._process_batch if several else None,
                                     max_batch=params.max_batch if several else 1)
        # Active before any subscription opens: a client may send a command the moment it
        # sees the command subscription matched, while the rest of activation still runs.
        self._active = True
        for camera in self._cameras:
            self._open_camera(camera, params)
        listening = "; ".join(f"{self._image_topic(c)}, {self.resolve_topic_name(c.topic('command'))} and "
                              f"{self.resolve_topic_name(c.topic('command_stamped'))}" for c in self._cameras)
        self.get_logger().info(f"active: listening on {listening}")
        return TransitionCallbackReturn.SUCCESS

    def _open_camera(self, camera: Camera, params: NodeParams) -> None:
        """Subscriptions, service and actions of one camera, under its namespace."""
        reliability = (ReliabilityPolicy.RELIABLE if params.image_reliability == "reliable"
                       else ReliabilityPolicy.BEST_EFFORT)
        image_qos = QoSProfile(depth=1, history=HistoryPolicy.KEEP_LAST, reliability=reliability)
        depth_qos = QoSProfile(depth=5, history=HistoryPolicy.KEEP_LAST, reliability=reliability)
        on = functools.partial
        if params.use_compressed:
            image_sub = self.create_subscription(CompressedImage, camera.topic("image/compressed"),
                                                 on(self._on_compressed, camera=camera), image_qos,
                                                 callback_group=camera.sensor_group)
        else:
            image_sub = self.create_subscription(Image, camera.topic("image"), on(self._on_image, camera=camera),
                                                 image_qos, callback_group=camera.sensor_group)
        camera.interfaces = [
            image_sub,
            self.create_subscription(Image, camera.topic("depth"), on(self._on_depth, camera=camera), depth_qos,
                                     callback_group=camera.sensor_group),
            self.create_subscription(CameraInfo, camera.topic("camera_info"), on(self._on_camera_info, camera=camera),
                                     depth_qos, callback_group=camera.sensor_group),
            self.create_subscription(String, camera.topic("command"), on(self._on_command, camera=camera),
                                     COMMAND_QOS, callback_group=camera.command_group),
            self.create_subscription(Command, camera.topic("command_stamped"),
                                     on(self._on_command_stamped, camera=camera), COMMAND_QOS,
                                     callback_group=camera.command_group),
            self.create_service(SegmentSrv, camera.topic("segment"), on(self._on_service, camera=camera),
                                callback_group=self._request_group),
        ]
        if camera.action_server is not None:
            return  # kept from an earlier activation: it refused goals while inactive
        # The actions live from the first activate to cleanup, refusing goals while the
        # node is inactive (as nav2's lifecycle action servers do): rclpy sends a result
        # from an executor task after the execute callback returns, so destroying the
        # server at deactivate could drop the result of a goal that deactivate ended.
        camera.action_server = ActionServer(
            self, SegmentAction, camera.topic("segment"), execute_callback=on(self._on_goal, camera=camera),
            goal_callback=on(self._goal_response, camera.topic("segment")),
            cancel_callback=lambda _goal: CancelResponse.ACCEPT,
            callback_group=self._request_group)
        camera.track_server = ActionServer(
            self, TrackAction, camera.topic("track"), execute_callback=on(self._on_track_goal, camera=camera),
            goal_callback=on(self._goal_response, camera.topic("track")),
            cancel_callback=lambda _goal: CancelResponse.ACCEPT,
            callback_group=self._request_group)

    def _goal_response(self, action: str, _goal: Any) -> GoalResponse:
        """Accept a goal while active; else refuse it and log why.

        rclpy's action client only learns "rejected", with no reason, so the node's log
        is the one place that can say it was the lifecycle state.
        """
        if self._active:
            return GoalResponse.ACCEPT
        self.get_logger().warning(f"{self.resolve_topic_name(action)} goal rejected: the node is "
                                  f"{self.lifecycle_state()}, it takes goals only while active")
        return GoalResponse.REJECT

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._close_interfaces("node deactivated")
        self.get_logger().info("inactive: no longer taking commands or goals (pending ones were answered "
                               "'cancelled: node deactivated'); the model stays loaded, activate to resume")
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._destroy_actions()
        self._release()
        return super().on_cleanup(state)

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._close_interfaces("node shutting down")
        self._destroy_actions()
        self._release()
        return TransitionCallbackReturn.SUCCESS

    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.get_logger().error(f"error while in state '{state.label}': releasing everything")
        self._close_interfaces("node error")
        self._destroy_actions()
        self._release()
        return TransitionCallbackReturn.SUCCESS

    def _close_interfaces(self, reason: str) -> None:
        """Stop taking commands, answer every pending one, then drop the interfaces."""
        self._active = False
        for camera in self._cameras:
            camera.tracks.end_all(reason)  # before the worker stops: the tracks end with this reason
        if self._worker is not None:
            if not self._worker.stop(f"cancelled: {reason}"):
                self.get_logger().error("the worker did not stop within 30 s (model ignored cancel)")
            self._worker = None
        with self._inflight_cond:
            self._inflight_cond.wait_for(lambda: self._inflight == 0, timeout=10.0)
        for camera in self._cameras:
            self._close_camera(camera)

    def _close_camera(self, camera: Camera) -> None:
        for entity in camera.interfaces:
            if hasattr(entity, "topic_name"):
                self.destroy_subscription(entity)
            else:
                self.destroy_service(entity)
        camera.interfaces = []

    def _action_servers(self) -> list[Any]:
        return [s for camera in self._cameras for s in (camera.action_server, camera.track_server)
                if s is not None]

    def _wait_action_results_sent(self, timeout_s: float = 2.0) -> None:
        """Wait until the results of ended goals have had time to go out.

        A goal's result leaves from an executor task that rclpy schedules when the
        result future completes, so a completed future is not yet a sent result; the
        grace after the futures covers that task. It only helps while an executor
        still spins the node, which is why stop() waits here before main() shuts the
        executor down.
        """
        futures = [f for server in self._action_servers() for f in getattr(server, "_result_futures", {}).values()]
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not all(f.done() for f in futures):
            time.sleep(0.01)
        if futures:
            time.sleep(0.2)

    def _destroy_actions(self) -> None:
        """Destroy the action servers once the results of ended goals have gone out.

        Called at cleanup, shutdown and close, long after deactivate ended the goals
        in the usual sequence.
        """
        servers = self._action_servers()
        self._wait_action_results_sent()
        for server in servers:
            server.destroy()
        for camera in self._cameras:
            camera.action_server = camera.track_server = None

    def _release(self) -> None:
        """Drop the model and everything it holds, and hand the memory back.

        Dropping the reference is not enough on CUDA: PyTorch's caching allocator keeps
        the freed blocks for itself, so a cleanup followed by configuring another model
        would run out of device memory. Reference cycles (modules, hooks, exceptions
        that saw activations) are collected first so the blocks are really free.
        """
        for camera in self._cameras:
            for pub in (camera.result_pub, camera.overlay_pub, camera.markers_pub):
                if pub is not None:
                    self.destroy_lifecycle_publisher(pub)
            camera.result_pub = camera.overlay_pub = camera.markers_pub = None
            camera.clear()
        device = self._params.device if self._params is not None else "cpu"
        had_model = self._segmenter is not None
        self._segmenter = None
        self._params = None
        self._warned.clear()
        if had_model:
            _release_memory(device)
            trim_heap_now()

    def stop(self, reason: str = "node shutting down") -> None:
        """Answer every pending command and close the interfaces; the node stays alive.

        Its answers go out while the caller's executor still spins the node: the result
        topic's subscribers acknowledge them, and goals' results leave their servers.
        """
        self._close_interfaces(reason)
        self._wait_results_acked()
        self._wait_action_results_sent()

    def close(self, reason: str = "node shutting down") -> None:
        """Stop the worker (answering pending commands) and destroy the node."""
        self.stop(reason)
        self._destroy_actions()
        self.destroy_node()

    def _wait_results_acked(self, timeout_s: float = 2.0) -> None:
        """Give reliable subscribers a moment to acknowledge the last results (shutdown)."""
        from rclpy.duration import Duration

        deadline = time.monotonic() + timeout_s
        for camera in self._cameras:
            pub = camera.result_pub
            if pub is None:
                continue
            try:
                left = max(0.0, deadline - time.monotonic())
                pub.wait_for_all_acked(Duration(nanoseconds=int(left * 1e9)))
            except Exception:  # noqa: BLE001 - best effort while the process ends
                pass

    # ------------------------------------------------------------------ parameters
    def _declare(self, spec: ParamSpec, value: Any) -> None:
        """Declare one parameter with ``value``, statically typed as its descriptor says.

        An empty string array needs three steps: rclpy infers a type from the value, and an
        empty list infers as a byte array. So it is declared by type (no value yet), given
        a typed empty value, and only then marked read-only. Called before the set callbacks
        are registered, so none of them runs.
        """
        if not isinstance(spec.default, list) or value:
            self.declare_parameter(spec.name, value, descriptor(spec), ignore_override=True)
            return
        writable = descriptor(spec)  # rclpy keeps the descriptor object it is given
        writable.read_only = False
        self.declare_parameter(spec.name, Parameter.Type.STRING_ARRAY, writable, ignore_override=True)
        self.set_parameters([Parameter(spec.name, Parameter.Type.STRING_ARRAY, [])])
        if spec.read_only:
            self.set_descriptor(spec.name, descriptor(spec))

    def _prepare_parameters(self, parameters: list[Parameter]) -> list[Parameter]:
        """Before any set: an integer for a double becomes a float; a set that will be refused is logged.

        rclpy checks type, range and read-only itself, before the node's own checks, and
        tells only the client; one warning here names every refused value and why, once,
        whichever check refuses it.
        """
        prepared, problems = [], []
        for parameter in parameters:
            spec = SPECS.get(parameter.name)
            if spec is not None:
                value = ros_value(spec, parameter.value)
                if value is not parameter.value:
                    parameter = Parameter(parameter.name, value=value)
            problem = self._set_problem(parameter, spec)
            if problem:
                problems.append(problem)
            prepared.append(parameter)
        if problems:
            self.get_logger().warning("parameter set refused: " + "; ".join(problems))
        return prepared

    def _set_problem(self, parameter: Parameter, spec: ParamSpec | None) -> str | None:
        """Why setting ``parameter`` will be refused, or None: what rclpy and ``_check_parameters`` check."""
        if not self.has_parameter(parameter.name):
            return f"{parameter.name}: no such parameter"
        desc = self.describe_parameter(parameter.name)
        if desc.read_only:
            return f"{parameter.name}: read-only, set at start-up only (-p, a params file or a launch argument)"
        if spec is not None:
            return check_value(spec, parameter.value)[1]
        if not desc.dynamic_typing and parameter.type_.value != desc.type:
            return f"{parameter.name}={parameter.value!r}: expected {Parameter.Type(desc.type).name.lower()}"
        return None

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
        if "duplicate_iou" in changes and hasattr(self._segmenter, "duplicate_iou"):
            value = changes["duplicate_iou"]  # -1: back to the model's own setting
            self._segmenter.duplicate_iou = self._segmenter.model.config.duplicate_instance_iou if value < 0 else value
        self.get_logger().info("applied " + ", ".join(f"{k}={v!r}" for k, v in changes.items()))

    # ------------------------------------------------------------------ inputs
    def _image_topic(self, camera: Camera | None = None) -> str:
        camera = camera or self._cameras[0]
        name = "image/compressed" if self._params and self._params.use_compressed else "image"
        return self.resolve_topic_name(camera.topic(name))

    def _on_image(self, msg: Image, camera: Camera | None = None) -> None:
        camera = camera or self._cameras[0]
        try:
            camera.latest.put(image_to_rgb(msg, what=self._image_topic(camera)), msg.header)
        except Exception as exc:  # noqa: BLE001 - an exception out of a callback stops the executor
            error = _conversion_error(exc, self._image_topic(camera))
            camera.latest.put(None, msg.header, error=error, height=msg.height, width=msg.width)
            self._warn_once(f"image:{camera.name}:{error}", f"bad image: {error}")
        self._schedule_tracks(camera)

    def _on_compressed(self, msg: CompressedImage, camera: Camera | None = None) -> None:
        camera = camera or self._cameras[0]
        try:
            camera.latest.put(compressed_to_rgb(msg, what=self._image_topic(camera)), msg.header)
        except Exception as exc:  # noqa: BLE001 - an exception out of a callback stops the executor
            error = _conversion_error(exc, self._image_topic(camera))
            camera.latest.put(None, msg.header, error=error)
            self._warn_once(f"image:{camera.name}:{error}", f"bad image: {error}")
        self._schedule_tracks(camera)

    def _on_depth(self, msg: Image, camera: Camera | None = None) -> None:
        (camera or self._cameras[0]).depth.push(_stamp_ns(msg.header), msg)

    def _on_camera_info(self, msg: CameraInfo, camera: Camera | None = None) -> None:
        (camera or self._cameras[0]).camera_info.push(_stamp_ns(msg.header), msg)

    def _new_request_id(self) -> str:
        with self._topic_count_lock:
            self._topic_count += 1
            return f"{self._id_prefix}-{self._topic_count}"

    def _on_command(self, msg: String, camera: Camera | None = None) -> None:
        self._accept(Request(request_id=self._new_request_id(), command=msg.data, source="topic",
                             received_ns=self.get_clock().now().nanoseconds, camera=camera))

    def _on_command_stamped(self, msg: Command, camera: Camera | None = None) -> None:
        """A command with the planner's request id; its stamp (when set) is when it was given."""
        stamp = _stamp_ns(msg.header)
        self._accept(Request(request_id=msg.request_id or self._new_request_id(), command=msg.text,
                             source="topic", received_ns=stamp if stamp > 0 else self.get_clock().now().nanoseconds,
                             camera=camera))

    def _request_from(self, goal: Any, source: str, request_id: str, camera: Camera | None = None) -> Request:
        """Request for a service / action goal; an image in the goal is converted here."""
        request_id = goal.request_id or request_id
        request = Request(request_id=request_id, command=goal.command, source=source,
                          received_ns=self.get_clock().now().nanoseconds,
                          max_image_age=float(goal.max_image_age), camera=camera or self._cameras[0])
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

    def _on_service(self, request: SegmentSrv.Request, response: SegmentSrv.Response,
                    camera: Camera | None = None) -> SegmentSrv.Response:
        req = self._request_from(request, "service", f"{self._id_prefix}-srv-{uuid.uuid4().hex[:8]}", camera)
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

    def _on_goal(self, goal_handle: Any, camera: Camera | None = None) -> Any:
        req = self._request_from(goal_handle.request, "action", uuid.UUID(bytes=bytes(goal_handle.goal_id.uuid)).hex,
                                 camera)
        if not self._enter_inflight():
            goal_handle.abort()
            return SegmentAction.Result(result=self._too_many_calls(req))
        try:
            done = threading.Event()
            box: list[SegmentationResult] = []

            feedback = AnswerFeedback(lambda stage, partial: goal_handle.publish_feedback(
                SegmentAction.Feedback(stage=stage, partial_answer=partial)))
            req.on_feedback = feedback.update
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
    def _on_track_goal(self, goal_handle: Any, camera: Camera | None = None) -> Any:
        """The ``track`` action: the command once with the full model, then every new frame.

        Blocks its executor thread until the track ends (like the ``segment`` action, it
        counts against ``blocking_call_limit``); the worker delivers the answer and the
        tracked frames as feedback meanwhile. Exactly one final result, with the reason.
        """
        goal = goal_handle.request
        request_id = goal.request_id or uuid.UUID(bytes=bytes(goal_handle.goal_id.uuid)).hex
        req = Request(request_id=request_id, command=goal.command, source="track",
                      received_ns=self.get_clock().now().nanoseconds, keep_prompts=True,
                      camera=camera or self._cameras[0])
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
        camera = req.camera or self._cameras[0]
        track = Track(req.request_id, req.command, settings, time.monotonic(), handle=goal_handle,
                      camera=camera.name)
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
        camera.tracks.add(track)
        try:
            self._accept(req, stop_when=lambda: goal_handle.is_cancel_requested or not track.active)
            while not track.ended.wait(0.05):
                track.check(time.monotonic(), goal_handle.is_cancel_requested)
                if not self.context.ok():
                    track.end("node shutting down")
            self._wait(answered)  # a command still running stops at its next check
        finally:
            camera.tracks.remove(track)
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

    def _schedule_tracks(self, camera: Camera | None = None) -> None:
        """Queue the newest frame for each track that wants it (image callback, after each tracked frame)."""
        camera = camera or self._cameras[0]
        worker, frame = self._worker, camera.latest.get()
        if worker is None or frame is None or not self._active or frame.error:
            return
        for track in camera.tracks.due(frame.key, time.monotonic()):
            job = Job(payload=TrackFrame(track, camera), bounded=False, lane=camera.lane, batchable=False)
            if not worker.submit(job):
                track.dropped()

    def _process_track_frame(self, track: Track, camera: Camera) -> None:
        """Worker thread: one tracked frame of ``track`` on the newest frame of its camera."""
        segmenter, params, frame = self._segmenter, self._params, camera.latest.get()
        if segmenter is None or params is None or frame is None or frame.rgb is None:
            track.dropped()
            return
        if not track.take(frame.key, time.monotonic()):
            return
        centroid_fn, _ = self._centroid_fn(frame, camera)
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
            camera.stats.record(True, msg.inference_ms, "")
            pub = camera.result_pub
            if pub is not None:
                pub.publish(msg)
            track.handle.publish_feedback(TrackAction.Feedback(result=msg, frame_seq=seq))

        if track.record(result, state, msg, deliver):
            self._publish_overlay(frame, result, camera)
            self._publish_markers(msg, camera)
        self._schedule_tracks(camera)  # a newer frame may have come while this one ran

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
        if req.camera is None:
            req.camera = self._cameras[0]
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
        if not worker.submit(Job(payload=req, stop_when=stop_when, lane=req.camera.lane)):
            where = f" for camera {req.camera.name}" if req.camera.name else ""
            self._finish(req, self._error(
                req, f"queue full: {worker.max_queue} commands already waiting{where} (max_queue)"))

    def _error(self, req: Request, error: str, frame: Frame | None = None,
               inference_ms: float = 0.0) -> SegmentationResult:
        camera = req.camera or self._cameras[0]
        frame = frame if frame is not None else (req.frame or camera.latest.get())
        if frame is None:
            return error_result(error, request_id=req.request_id, command=req.command,
                                inference_ms=inference_ms)
        return error_result(error, request_id=req.request_id, command=req.command, header=frame.header,
                            height=frame.height, width=frame.width, inference_ms=inference_ms)

    def _resolve_frame(self, req: Request, job: Job) -> tuple[Frame | None, str]:
        """The frame a request refers to, or the reason it cannot be used."""
        params = self._params
        assert params is not None
        camera = req.camera or self._cameras[0]
        frame = req.frame
        if frame is None:
            frame = camera.latest.get()
            if frame is None and params.wait_for_image > 0:
                if req.on_feedback:
                    req.on_feedback("waiting_for_image", "")
                frame = camera.latest.wait(params.wait_for_image, should_stop=job.should_stop)
            if frame is None:
                return None, (f"no image yet: nothing received on {self._image_topic(camera)} "
                              f"(waited {params.wait_for_image:.1f} s)")
        if frame.error:
            return frame, f"bad image: {frame.error}"
        limit = req.max_image_age if req.max_image_age > 0 else params.max_image_age
        if limit > 0 and req.frame is None:
            age = frame.age_s(req.received_ns)
            if age > limit:
                return frame, f"image too old: {age:.2f} s > max_image_age {limit:.2f} s"
        return frame, ""

    def _prepare(self, job: Job) -> Prepared | None:
        """Worker thread: choose the request's frame and bind its depth; None when it was answered here.

        Answered here: node not configured, cancelled, no usable frame.
        """
        req: Request = job.payload
        if self._params is None or self._segmenter is None:
            self._finish(req, self._error(req, "node is not configured"))
            return None
        if job.should_stop():
            self._finish(req, self._error(req, job.cancel_reason or "cancelled"))
            return None
        frame, problem = self._resolve_frame(req, job)
        if job.should_stop():
            self._finish(req, self._error(req, job.cancel_reason or "cancelled", frame))
            return None
        if problem:
            self._finish(req, self._error(req, problem, frame))
            return None
        assert frame is not None and frame.rgb is not None
        # Depth and intrinsics are bound now, before the model runs: at 30 Hz the depth
        # buffer holds a third of a second, and a 7B model takes longer than that.
        centroid_fn, depth_state = self._centroid_fn(frame, req.camera)
        return Prepared(job, req, frame, centroid_fn, depth_state)

    def _process(self, job: Job) -> None:
        """Worker thread: one command from frame to published result (or one tracked frame)."""
        if isinstance(job.payload, TrackFrame):
            self._process_track_frame(job.payload.track, job.payload.camera)
            return
        ready = self._prepare(job)
        if ready is not None:
            self._run_one(ready)

    def _run_one(self, ready: Prepared) -> None:
        """One command through ``Segmenter.segment``, with stage and partial-answer feedback."""
        job, req, frame = ready.job, ready.req, ready.frame
        segmenter = self._segmenter
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
            result = segmenter.segment(frame.rgb, req.command, frame_key=frame.key or None,
                                       on_stage=on_stage, on_text=on_text, should_stop=job.should_stop, **extra)
        except Cancelled:
            elapsed = (time.monotonic() - started) * 1000.0
            self._finish(req, self._error(req, job.cancel_reason or "cancelled", frame, elapsed))
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

    def _process_batch(self, jobs: list[Job]) -> None:
        """Worker thread: commands of several cameras answered by one batched model call.

        Each request gets its own frame (its camera's), its own result on its camera's
        topic and exactly one answer. A request cancelled meanwhile is answered at once
        and its row's result dropped; the call itself stops only when every row is
        cancelled. A model without ``segment_many`` answers the requests one by one.
        """
        ready = [r for r in (self._prepare(job) for job in jobs if not isinstance(job.payload, TrackFrame))
                 if r is not None]
        for job in jobs:  # the worker never batches tracked frames; should one come, it still runs
            if isinstance(job.payload, TrackFrame):
                self._process(job)
        segment_many = getattr(self._segmenter, "segment_many", None)
        if len(ready) <= 1 or segment_many is None:
            for one in ready:
                self._run_one(one)
            return

        def cancelled_rows() -> bool:
            """Answer newly cancelled rows; True when no row is left to compute."""
            for one in ready:
                if one.job.should_stop() and not one.req.finished:
                    self._finish(one.req, self._error(one.req, one.job.cancel_reason or "cancelled", one.frame))
            return all(one.req.finished for one in ready)

        def on_stage(name: str) -> None:
            for one in ready:
                if one.req.on_feedback and not one.req.finished:
                    one.req.on_feedback(name, "")

        started = time.monotonic()
        try:
            results = segment_many([one.frame.rgb for one in ready], [one.req.command for one in ready],
                                   [one.frame.key or None for one in ready], on_stage=on_stage,
                                   should_stop=cancelled_rows, keep_prompts=[one.req.keep_prompts for one in ready])
        except Cancelled:
            cancelled_rows()
            for one in ready:  # every row was cancelled; this only covers a model raising on its own
                if not one.req.finished:
                    self._finish(one.req, self._error(one.req, "cancelled", one.frame))
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
            self.batch_sizes[len(ready)] += 1
        for one, result in zip(ready, results):
            if one.job.should_stop() and not one.req.finished:
                self._finish(one.req, self._error(one.req, one.job.cancel_reason or "cancelled", one.frame, elapsed))
            if not one.req.finished:
                self._deliver(one, result, elapsed)
        del results
        self._after_model()

    def _model_failed(self, rows: list[Prepared], exc: Exception, started: float) -> bool:
        """Every request of a failed model call gets ``model failure: ...``; True when out of memory.

        Called inside the caller's ``except`` (for the traceback); the caller gives the
        memory back after it, when the exception is unreachable.
        """
        elapsed = (time.monotonic() - started) * 1000.0
        names = ", ".join(one.req.request_id for one in rows)
        self.get_logger().error(f"model failure on request {names}: {traceback.format_exc()}")
        for one in rows:
            if not one.req.finished:
                self._finish(one.req, self._error(one.req, f"model failure: {type(exc).__name__}: {exc}",
                                                  one.frame, elapsed))
        return _is_out_of_memory(exc)

    def _release_after_failure(self, out_of_memory: bool) -> None:
        if out_of_memory and self._params is not None:
            _release_memory(self._params.device)

    def _deliver(self, ready: Prepared, result: Any, elapsed: float) -> None:
        """A model result -> the request's one SegmentationResult, overlay and markers."""
        req, frame, centroid_fn = ready.req, ready.frame, ready.centroid_fn
        camera = req.camera or self._cameras[0]
        if ready.depth_state == "missing":  # the matching depth frame may have arrived meanwhile
            centroid_fn, _ = self._centroid_fn(frame, camera)
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
        self._publish_overlay(frame, result, camera)
        self._publish_markers(msg, camera)

    def _after_model(self) -> None:
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
        if req.finished:  # a batch failed after this request was answered
            return
        self.get_logger().error(f"internal error on request {req.request_id}: "
                                f"{''.join(traceback.format_exception(exc))}")
        self._finish(req, self._error(req, f"internal error: {type(exc).__name__}: {exc}"))

    def _finish(self, req: Request, msg: SegmentationResult) -> None:
        """Publish the one result of a request on its camera's topic and hand it to its caller."""
        if not req.claim_finish():
            self.get_logger().error(f"request {req.request_id} answered twice; second answer dropped")
            return
        camera = req.camera or self._cameras[0]
        self.stats.record(msg.success, msg.inference_ms, msg.error)
        camera.stats.record(msg.success, msg.inference_ms, msg.error)
        if not msg.success:
            # repr: user text with newlines or escape codes must not forge log lines.
            where = f"camera {camera.name}: " if camera.name else ""
            self.get_logger().warning(f"{where}{req.source} command {req.request_id} "
                                      f"{req.command[:80]!r}: {msg.error}")
        pub = camera.result_pub
        if pub is not None:
            try:
                pub.publish(msg)
            except Exception as exc:  # noqa: BLE001 - e.g. the context went down meanwhile
                self.get_logger().error(f"could not publish the result of {req.request_id}: {exc}")
        if req.on_done is not None:
            req.on_done(msg)

    # ------------------------------------------------------------------ outputs
    def _centroid_fn(self, frame: Frame, camera: Camera | None = None) -> tuple[Callable[[Any], Any] | None, str]:
        """Bind the depth frame and intrinsics of ``camera`` nearest to ``frame``.

        Returns (centroid function, "bound") or (None, why): "missing" when no depth /
        camera_info is within ``depth_tolerance`` yet (worth another look later),
        "refused" when the ones there cannot be used (logged once).
        """
        params = self._params
        assert params is not None
        camera = camera or self._cameras[0]
        depth_topic = self.resolve_topic_name(camera.topic("depth"))
        tolerance = int(params.depth_tolerance * 1e9)
        depth_msg = camera.depth.nearest(frame.stamp_ns, tolerance)
        info = camera.camera_info.nearest(frame.stamp_ns, tolerance)
        if depth_msg is None or info is None:
            return None, "missing"
        depth_frame, colour_frame = depth_msg.header.frame_id, frame.header.frame_id
        if depth_frame and colour_frame and depth_frame != colour_frame and not params.allow_depth_frame_mismatch:
            self._warn_once(
                f"depth-frame:{camera.name}:{depth_frame}:{colour_frame}",
                f"no centroids: depth on {depth_topic} is in frame '{depth_frame}' but the "
                f"colour image is in '{colour_frame}'; publish depth registered to the colour camera (e.g. "
                f"aligned_depth_to_color), or set allow_depth_frame_mismatch:=true if it is registered anyway")
            return None, "refused"
        try:
            depth = depth_to_metres(depth_msg, what=depth_topic)
            intrinsics = Intrinsics.from_k(info.k, info.width or depth.shape[1], info.height or depth.shape[0])
        except (ImageConversionError, ValueError) as exc:
            self._warn_once(f"depth:{camera.name}:{exc}", f"no centroids: {exc}")
            return None, "refused"
        if depth.shape != (frame.height, frame.width):
            self._warn_once(
                f"depth-size:{camera.name}:{depth.shape}:{frame.height}x{frame.width}",
                f"no centroids: depth image is {depth.shape[1]}x{depth.shape[0]} but the colour image is "
                f"{frame.width}x{frame.height}; publish depth registered to the colour camera "
                f"(e.g. aligned_depth_to_color)")
            return None, "refused"
        if (intrinsics.height, intrinsics.width) != depth.shape:
            self._warn_once(
                f"info-size:{camera.name}:{intrinsics.width}x{intrinsics.height}:{depth.shape}",
                f"no centroids: camera_info is {intrinsics.width}x{intrinsics.height} but depth is "
                f"{depth.shape[1]}x{depth.shape[0]}")
            return None, "refused"

        def centroid(mask: Any) -> Any:
            return mask_centroid(mask, depth, intrinsics, erosion_px=params.centroid_erosion_px)

        return centroid, "bound"

    def _publish_overlay(self, frame: Frame, result: Any, camera: Camera | None = None) -> None:
        params, pub = self._params, (camera or self._cameras[0]).overlay_pub
        if params is None or pub is None or not params.publish_overlay or pub.get_subscription_count() == 0:
            return
        try:
            pub.publish(rgb_to_msg(overlay_targets(frame.rgb, result.targets), frame.header))
        except Exception as exc:  # noqa: BLE001 - the overlay is a nicety, never fatal
            self._warn_once(f"overlay:{type(exc).__name__}", f"overlay failed: {exc}")

    def _publish_markers(self, msg: SegmentationResult, camera: Camera | None = None) -> None:
        pub = (camera or self._cameras[0]).markers_pub
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
        """One status for the single camera; one per camera, named after it, with several."""
        params, worker, source = self._params, self._worker, self._source
        state = self.lifecycle_state()
        untrained = bool(source and source.is_preset and self._segmenter is not None)
        several = len(self._cameras) > 1
        cache = getattr(self._segmenter, "cache_stats", None) if self._segmenter is not None else None
        statuses = []
        for camera in self._cameras:
            stats = camera.stats.snapshot() if several else self.stats.snapshot()
            depth = worker.depth_of(camera.lane) if worker else 0
            level, message = status_level(state, untrained, depth, worker.max_queue if worker else 0,
                                          self._configure_error)
            values: dict[str, Any] = {
                "model": source.source if source and self._segmenter is not None else "",
                "device": params.device if params else "",
                "state": state,
                "queue_depth": depth,
                "max_queue": worker.max_queue if worker else (params.max_queue if params else 0),
                "busy": bool(worker and worker.busy_with(camera.lane)),
                "last_latency_ms": stats["last_latency_ms"],
                "mean_latency_ms": stats["mean_latency_ms"],
                "results": stats["results"],
                "errors": stats["errors"],
                "queue_full": stats["queue_full"],
                "last_error": stats["last_error"],
            }
            if several:
                # The model and its batches are shared: the same figures under every camera.
                with self._batch_lock:
                    batches = dict(self.batch_sizes)
                values = {"camera": camera.name, **values, "cameras": ", ".join(c.name for c in self._cameras),
                          "batched_calls": sum(batches.values()),
                          "batched_commands": sum(n * k for n, k in batches.items())}
            if isinstance(cache, dict):
                values.update({f"cache_{k}": v for k, v in cache.items()})
            name = f"{self.get_fully_qualified_name()}: m2sa perception"
            statuses.append((f"{name} ({camera.name})" if several else name, level, message, values))
        try:
            self._diag_pub.publish(build_diagnostics_array(
                statuses, params.device if params else "none", stamp=self.get_clock().now().to_msg()))
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


def __getattr__(name: str) -> Any:
    """``main`` moved to m2sa_ros.main with the process's shutdown handling; the old
    import path keeps working for one release, with a warning."""
    if name in ("main", "ShutdownRequest", "GIL_SWITCH_INTERVAL_S", "prefer_the_model_thread"):
        import warnings

        from m2sa_ros import main as process

        warnings.warn(f"m2sa_ros.perception_node.{name} moved to m2sa_ros.main.{name}", DeprecationWarning,
                      stacklevel=2)
        return getattr(process, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
