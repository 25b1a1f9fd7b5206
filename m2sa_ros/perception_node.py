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
perception_node: camera images + language commands in, labelled masks out.

A thin rclpy lifecycle node over ``m2sa_core.inference.Segmenter`` (docs/ARCHITECTURE.md,
docs/ROS_INTERFACE.md). What it adds is robotics plumbing only. This module is the
lifecycle and the wiring; each concern it wires is a module of its own, in the room
(sub-package of m2sa_ros) named for it:

* lifecycle: configure validates the parameters (params/node_params.py,
  params/ros_parameters.py) and the QoS overrides (params/qos_entities.py, which creates
  every topic) and loads the model (model/model_source.py), activate opens
  the topics / service / actions and starts the worker (worker.py), deactivate closes the
  topics and service (the actions stay until cleanup, refusing goals while inactive),
  cleanup frees the model and the GPU cache (model/memory.py); ``autostart`` does
  configure + activate at start-up. From activate to deactivate the node keeps the bond
  heartbeat Nav2's lifecycle manager watches (rclpy_support/lifecycle_bond.py). The
  lifecycle services and /diagnostics have callback groups of their own, so a model that
  takes minutes to load blocks neither;
* inputs: the keep-latest image, converted once in its own callback group, never
  waiting on the model (cameras/latest_frame.py, messages/image_conversion.py); depth and
  camera_info buffers (depth/stamped_buffer.py), bound to a command's frame and measuring
  its targets' centroids and 3-D geometry (depth/depth_binding.py,
  m2sa_core/geometry/target.py, messages/geometry_conversion.py);
* every accepted command - topic (plain or with a request id), service or action - is
  made a Request (command_intake.py) and yields exactly one SegmentationResult with the
  command's request id and the source image's header (pipeline.py), published on its
  camera's outputs (cameras/camera_outputs.py); service and action callbacks wait for it,
  within a cap (rclpy_support/blocking_calls.py); the ``track`` action follows a command's targets
  frame by frame (tracking/); /diagnostics (diagnostics/);
* ``stop()`` / ``close()`` answer every pending command first and let the answers leave
  (rclpy_support/shutdown_delivery.py): the process around the node (main.py) calls them
  on SIGINT or SIGTERM and exits 0;
* ``cameras: [head, wrist]`` serves several cameras from the one model, each under
  ``<camera>/`` with a queue of its own (cameras/camera_state.py); commands of several cameras that
  wait together are answered by one batched model call (``Segmenter.segment_many``).

Run it as ``m2sa-perception --ros-args --params-file config/perception.yaml`` or
``ros2 launch m2sa_ros perception.launch.py``.
"""
from __future__ import annotations

from collections import Counter
import functools
import time
import traceback
from typing import Any, Callable
import uuid

from m2sa_ros.action import Segment as SegmentAction
from m2sa_ros.action import Track as TrackAction
from m2sa_ros.cameras.camera_outputs import CameraOutputs
from m2sa_ros.cameras.camera_state import Camera
from m2sa_ros.cameras.transport_names import COMPRESSED, COMPRESSED_DEPTH
from m2sa_ros.command_intake import CommandIntake
from m2sa_ros.diagnostics.camera_health import camera_health, CameraHealthSettings
from m2sa_ros.diagnostics.node_status import build_diagnostics_array, node_statuses, NodeStats
from m2sa_ros.messages.image_conversion import compressed_to_rgb, conversion_error, image_to_rgb, stamp_ns
from m2sa_ros.model.memory import release_memory, trim_heap_now
from m2sa_ros.model.model_source import load_segmenter, ModelSource, resolve_model_source
from m2sa_ros.msg import Command
from m2sa_ros.params.node_params import (
    check_value,
    depth_transport_of,
    image_transport_of,
    NodeParams,
    ParameterError,
    PARAMETERS,
    SPECS,
    validate,
)
from m2sa_ros.params.qos_entities import QosEntities
from m2sa_ros.params.ros_parameters import check_set, declare_parameters, prepare_set
from m2sa_ros.pipeline import CommandPipeline, Prepared, Request
from m2sa_ros.rclpy_support.blocking_calls import BlockingCalls
from m2sa_ros.rclpy_support.goal_status_repeat import GoalStatusRepeater, REPEAT_PERIOD_S
from m2sa_ros.rclpy_support.lifecycle_bond import LifecycleBond
from m2sa_ros.rclpy_support.rclpy_compat import add_set_parameters_callbacks
from m2sa_ros.rclpy_support.shutdown_delivery import ActionResultGrace, ShutdownDeadline, wait_results_acked
from m2sa_ros.srv import Segment as SegmentSrv
from m2sa_ros.tracking.track_action import TrackGoals
from m2sa_ros.worker import CommandWorker
from rcl_interfaces.msg import SetParametersResult
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.lifecycle import LifecycleNode, LifecycleNodeMixin, LifecycleState, TransitionCallbackReturn
from rclpy.node import Node
from rclpy.parameter import Parameter
from sensor_msgs.msg import CameraInfo, CompressedImage, Image
from std_msgs.msg import String

# Request and Prepared are imported from here by callers of the node.
__all__ = ["NODE_NAME", "PerceptionNode", "Prepared", "Request", "SegmenterFactory", "load_segmenter"]

NODE_NAME = "perception_node"

# (params, model source) -> an object with Segmenter's segment() and cache_stats.
SegmenterFactory = Callable[[NodeParams, ModelSource], Any]


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
        self._refused_overrides: dict[str, Any] = declare_parameters(self)
        self._factory: SegmenterFactory = segmenter_factory or load_segmenter
        self._source: ModelSource | None = None
        self._id_prefix = uuid.uuid4().hex[:8]
        # The single camera of today until configure reads ``cameras``.
        self._cameras: list[Camera] = [self._new_camera("")]
        self._warned: set[str] = set()
        self._result_grace = ActionResultGrace()  # shutdown: ended goals' results leave first
        self._shutdown = ShutdownDeadline()  # one budget for all of stop()'s and close()'s waits
        self._bond = LifecycleBond(self)  # Nav2's lifecycle manager: heartbeat while active
        self._configuring = False
        self._configure_error = ""
        self.stats = NodeStats()  # all cameras; each camera has its own too
        self.batch_sizes: Counter[int] = Counter()  # batched model calls by their size (several cameras)
        self._pipeline = CommandPipeline(self.get_logger(), self.stats, self.batch_sizes,
                                         topic_name=self.resolve_topic_name, warn_once=self._warn_once)
        # After the pipeline, which the checks read. Pre- and post-set callbacks arrived in
        # Iron's rclpy; rclpy_compat gives them on Humble.
        add_set_parameters_callbacks(self, pre=functools.partial(prepare_set, self), on_set=self._check_parameters,
                                     post=self._apply_parameters)
        self._calls = BlockingCalls()  # service/action callbacks waiting for their result
        self._intake = CommandIntake(self._pipeline, self._calls, now_ns=lambda: self.get_clock().now().nanoseconds,
                                     alive=self.context.ok, id_prefix=self._id_prefix,
                                     default_camera=lambda: self._cameras[0])
        self._tracking = TrackGoals(self._pipeline, self._calls, self.get_logger(),
                                    now_ns=lambda: self.get_clock().now().nanoseconds, alive=self.context.ok)

        self._request_group = ReentrantCallbackGroup()  # blocking service / action callbacks
        self._diag_group = MutuallyExclusiveCallbackGroup()  # never behind a model load
        self._entities = QosEntities(self, lambda: self._pipeline.params, self._warn_once)
        self._diag_pub = self._entities.diagnostics_publisher()
        self._diag_timer = self.create_timer(1.0, self._publish_diagnostics, callback_group=self._diag_group)
        # Goal statuses again while goals run: a client that took the first status before
        # the goal response (and so dropped it) learns its goal executes (goal_status_repeat.py).
        self._status_repeater = GoalStatusRepeater()
        self._status_repeat_timer = self.create_timer(REPEAT_PERIOD_S, self._status_repeater.repeat,
                                                      callback_group=MutuallyExclusiveCallbackGroup())

        autostart = self._refused_overrides.get("autostart", self.get_parameter("autostart").value)
        self._autostart_timer = None
        if autostart is True:
            self._autostart_timer = self.create_timer(0.0, self._autostart)
        elif autostart is not False:
            self.get_logger().error(f"parameter autostart={autostart!r}: expected bool; not starting")

    @property
    def blocking_call_limit(self) -> int | None:
        """
        How many service/action callbacks may wait for a result at once (None = no cap).

        main() sizes its executor and sets this so blocked calls can never take the
        threads that image and lifecycle callbacks need.
        """
        return self._calls.limit

    @blocking_call_limit.setter
    def blocking_call_limit(self, limit: int | None) -> None:
        self._calls.limit = limit

    # ------------------------------------------------------------------ cameras
    def _new_camera(self, name: str) -> Camera:
        camera = Camera(name, key_prefix=f"{self.get_fully_qualified_name()}:{self._id_prefix}")
        # Per camera: one camera's image conversion or command burst never waits on another's.
        camera.sensor_group = MutuallyExclusiveCallbackGroup()
        camera.command_group = MutuallyExclusiveCallbackGroup()
        return camera

    @property
    def cameras(self) -> list[Camera]:
        """Return the cameras served: one nameless camera unless ``cameras`` names several."""
        return list(self._cameras)

    def camera(self, name: str = "") -> Camera:
        """Return a camera by name ("" = the first, the single camera's)."""
        if not name:
            return self._cameras[0]
        for camera in self._cameras:
            if camera.name == name:
                return camera
        raise KeyError(f"no camera {name!r} (cameras: {[c.name for c in self._cameras]})")

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
            self._entities.check_overrides(params)
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
        self._source = source
        self._pipeline.load(segmenter, params)
        self._pipeline.listen(self)  # tf2's listener only for a node that moves its results
        self.get_logger().info(f"model {source.source} loaded on {params.device} in "
                               f"{time.monotonic() - started:.1f} s")
        if tuple(c.name for c in self._cameras) != (params.cameras or ("",)):
            self._cameras = [self._new_camera(name) for name in params.cameras or ("",)]
        detections = self._entities.detection_types(params)
        for camera in self._cameras:
            camera.inputs = self._entities.inputs_of(camera.name, params)
            camera.outputs = self._entities.camera_outputs(camera.topic, detections)
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
        # Each job carries its handler (the pipeline for commands, the track action for
        # tracked frames): the node wires the worker and dispatches nothing itself.
        # Open (active) before any subscription opens: a client may send a command the moment
        # it sees the command subscription matched, while the rest of activation still runs.
        self._pipeline.open(CommandWorker(params.max_queue, lanes=tuple(c.lane for c in self._cameras),
                                          max_batch=params.max_batch if several else 1))
        now_ns = self.get_clock().now().nanoseconds
        for camera in self._cameras:
            camera.arrivals.start(now_ns)  # silence is measured from here until the first image
            self._open_camera(camera, params)
        listening = "; ".join(f"{self._pipeline.image_topic(c)}, {self.resolve_topic_name(c.topic('command'))} and "
                              f"{self.resolve_topic_name(c.topic('command_stamped'))}" for c in self._cameras)
        self.get_logger().info(f"active: listening on {listening}")
        self._bond.start()  # last, as nav2_util::LifecycleNode does: the manager bonds once activate returns
        return TransitionCallbackReturn.SUCCESS

    def _open_camera(self, camera: Camera, params: NodeParams) -> None:
        """Subscriptions, service and actions of one camera, under its namespace."""
        on, subscribe = functools.partial, self._entities.subscribe
        sensors = camera.sensor_group
        inputs = camera.inputs
        assert inputs is not None, "configure names a camera's inputs"
        if image_transport_of(params) == COMPRESSED:
            image_sub = subscribe(CompressedImage, inputs.image, on(self._on_compressed, camera=camera), sensors,
                                  role="image")
        else:
            image_sub = subscribe(Image, inputs.image, on(self._on_image, camera=camera), sensors, role="image")
        # compressedDepth (image_transport's, beside the raw topic) is decoded when bound, not here:
        # only the depth nearest a command's frame is ever decoded.
        depth_type = CompressedImage if depth_transport_of(params) == COMPRESSED_DEPTH else Image
        camera.interfaces = [
            image_sub,
            subscribe(depth_type, inputs.depth, on(self._on_depth, camera=camera), sensors, role="depth"),
            subscribe(CameraInfo, inputs.camera_info, on(self._on_camera_info, camera=camera), sensors,
                      role="camera_info"),
            subscribe(String, camera.topic("command"), on(self._intake.on_command, camera=camera),
                      camera.command_group),
            subscribe(Command, camera.topic("command_stamped"), on(self._intake.on_command_stamped, camera=camera),
                      camera.command_group),
            self.create_service(SegmentSrv, camera.topic("segment"), on(self._intake.on_service, camera=camera),
                                callback_group=self._request_group),
        ]
        if camera.action_server is not None:
            return  # kept from an earlier activation: it refused goals while inactive
        # The actions live from the first activate to cleanup, refusing goals while the
        # node is inactive (as nav2's lifecycle action servers do): rclpy sends a result
        # from an executor task after the execute callback returns, so destroying the
        # server at deactivate could drop the result of a goal that deactivate ended.
        camera.action_server = ActionServer(
            self, SegmentAction, camera.topic("segment"),
            execute_callback=self._repeating_statuses(on(self._intake.on_goal, camera=camera)),
            goal_callback=on(self._goal_response, camera.topic("segment")),
            cancel_callback=lambda _goal: CancelResponse.ACCEPT,
            callback_group=self._request_group)
        camera.track_server = ActionServer(
            self, TrackAction, camera.topic("track"),
            execute_callback=self._repeating_statuses(on(self._tracking.execute, camera=camera)),
            goal_callback=on(self._goal_response, camera.topic("track")),
            cancel_callback=lambda _goal: CancelResponse.ACCEPT,
            callback_group=self._request_group)

    def _repeating_statuses(self, execute: Callable[[Any], Any]) -> Callable[[Any], Any]:
        """Return ``execute`` with its goal's statuses published again while it runs."""
        def run(goal_handle: Any) -> Any:
            with self._status_repeater.running(goal_handle):
                return execute(goal_handle)
        return run

    def _goal_response(self, action: str, _goal: Any) -> GoalResponse:
        """
        Accept a goal while active; else refuse it and log why.

        rclpy's action client only learns "rejected", with no reason, so the node's log
        is the one place that can say it was the lifecycle state.
        """
        if self._pipeline.active:
            return GoalResponse.ACCEPT
        self.get_logger().warning(f"{self.resolve_topic_name(action)} goal rejected: the node is "
                                  f"{self.lifecycle_state()}, it takes goals only while active")
        return GoalResponse.REJECT

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._close_interfaces("node deactivated")
        for camera in self._cameras:
            camera.arrivals.stop()
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
        self._pipeline.close(reason, self._cameras)  # inactive, the tracks ended, then the worker stopped
        self._calls.wait_idle(10.0)
        for camera in self._cameras:
            self._close_camera(camera)
        self._bond.stop()  # after the answers, as Nav2's nodes destroy theirs at the end of deactivate

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

    def _wait_action_results_sent(self) -> None:
        self._result_grace.wait(self._action_servers(), timeout_s=self._shutdown.left())

    def _destroy_actions(self) -> None:
        """
        Destroy the action servers once the results of ended goals have gone out.

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
        """
        Drop the model and everything it holds, and hand the memory back.

        Dropping the reference is not enough on CUDA: PyTorch's caching allocator keeps
        the freed blocks for itself, so a cleanup followed by configuring another model
        would run out of device memory. Reference cycles (modules, hooks, exceptions
        that saw activations) are collected first so the blocks are really free.
        """
        for camera in self._cameras:
            for pub in camera.outputs.publishers():
                self.destroy_lifecycle_publisher(pub)
            camera.outputs = CameraOutputs()
            camera.clear()
        device = self._params.device if self._params is not None else "cpu"
        had_model = self._pipeline.unload()  # tf2's listener too
        self._warned.clear()
        if had_model:
            release_memory(device)
            trim_heap_now()

    def stop(self, reason: str = "node shutting down") -> None:
        """
        Answer every pending command and close the interfaces; the node stays alive.

        Its answers go out while the caller's executor still spins the node: the result
        topic's subscribers acknowledge them, and goals' results leave their servers. From
        here on every wait of the node shares one budget inside launch's sigterm_timeout.
        """
        self._shutdown.start()
        self._close_interfaces(reason)
        wait_results_acked((camera.outputs.result for camera in self._cameras), timeout_s=self._shutdown.left())
        self._wait_action_results_sent()

    def close(self, reason: str = "node shutting down") -> None:
        """Stop the worker (answering pending commands) and destroy the node."""
        self.stop(reason)
        self._destroy_actions()
        self.destroy_node()

    def destroy_node(self) -> None:
        """Destroy the node; a bond still beating is ended first (its thread would publish on a destroyed node)."""
        self._bond.stop()
        super().destroy_node()

    @property
    def _params(self) -> NodeParams | None:
        """Return the configured parameters (None while unconfigured); the pipeline owns them."""
        return self._pipeline.params

    @property
    def _segmenter(self) -> Any:
        """Return the loaded model (None while unconfigured); the pipeline owns it."""
        return self._pipeline.segmenter

    # ------------------------------------------------------------------ parameters
    def _check_parameters(self, parameters: list[Parameter]) -> SetParametersResult:
        return check_set(parameters, loaded=self._segmenter is not None, logger=self.get_logger())

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
        self._pipeline.update_params(changes)
        if changes.get("target_frame"):
            self._pipeline.listen(self)
        if "diagnostics_period" in changes:
            self._restart_diagnostics_timer(changes["diagnostics_period"])
        self.get_logger().info("applied " + ", ".join(f"{k}={v!r}" for k, v in changes.items()))

    # ------------------------------------------------------------------ inputs
    def _on_image(self, msg: Image, camera: Camera | None = None) -> None:
        (camera or self._cameras[0]).arrivals.tick(self.get_clock().now().nanoseconds)
        self._take_frame(msg, image_to_rgb, camera or self._cameras[0], height=msg.height, width=msg.width)

    def _on_compressed(self, msg: CompressedImage, camera: Camera | None = None) -> None:
        """Keep the frame encoded: it is decoded when a command or a track takes it (latest_frame.py)."""
        camera = camera or self._cameras[0]
        camera.arrivals.tick(self.get_clock().now().nanoseconds)
        topic = self._pipeline.image_topic(camera)

        def decode() -> tuple[Any, str]:
            try:
                return compressed_to_rgb(msg, what=topic), ""
            except Exception as exc:  # noqa: BLE001 - the frame's error, answered to its command
                error = conversion_error(exc, topic)
                self._warn_once(f"image:{camera.name}:{error}", f"bad image: {error}")
                return None, error

        camera.latest.put_pending(decode, msg.header)
        self._tracking.schedule(camera)

    def _take_frame(self, msg: Any, convert: Callable[..., Any], camera: Camera, **size: int) -> None:
        """Keep the converted image as the camera's latest, or the reason it could not be converted."""
        topic = self._pipeline.image_topic(camera)
        try:
            camera.latest.put(convert(msg, what=topic), msg.header)
        except Exception as exc:  # noqa: BLE001 - an exception out of a callback stops the executor
            error = conversion_error(exc, topic)
            camera.latest.put(None, msg.header, error=error, **size)
            self._warn_once(f"image:{camera.name}:{error}", f"bad image: {error}")
        self._tracking.schedule(camera)

    def _on_depth(self, msg: Image | CompressedImage, camera: Camera | None = None) -> None:
        (camera or self._cameras[0]).depth.push(stamp_ns(msg.header), msg)

    def _on_camera_info(self, msg: CameraInfo, camera: Camera | None = None) -> None:
        (camera or self._cameras[0]).camera_info.push(stamp_ns(msg.header), msg)

    # ------------------------------------------------------------------ outputs
    def lifecycle_state(self) -> str:
        """unconfigured, configuring, inactive or active (what /diagnostics reports)."""
        if self._configuring:
            return "configuring"
        if self._pipeline.active:
            return "active"
        return "inactive" if self._segmenter is not None else "unconfigured"

    def _publish_diagnostics(self) -> None:
        params, source, segmenter = self._params, self._source, self._segmenter
        loaded = segmenter is not None
        now_ns = self.get_clock().now().nanoseconds
        name, state = f"{self.get_fully_qualified_name()}: m2sa perception", self.lifecycle_state()
        statuses = node_statuses(
            name, self._cameras, self._pipeline.worker,
            state=state, configure_error=self._configure_error,
            untrained=bool(source and source.is_preset and loaded),
            # the shipped checkpoint, as the production loader loads it (a test's injected model is its own)
            toy=bool(source and source.is_shipped and loaded and self._factory is load_segmenter),
            model=source.source if source and loaded else "", device=params.device if params else "",
            max_queue=params.max_queue if params else 0, stats=self.stats, batches=self._pipeline.batch_counts(),
            cache=getattr(segmenter, "cache_stats", None) if loaded else None,
            now_ns=now_ns, failed_commands_error=params.failed_commands_error if params else 0)
        limits = self._pipeline.health_settings or CameraHealthSettings()
        several = len(self._cameras) > 1
        for camera in self._cameras:
            newest = camera.latest.peek()  # the stamp only: a compressed frame stays undecoded
            statuses += camera_health(f"{name} ({camera.name})" if several else name,
                                      self._pipeline.image_topic(camera), camera.arrivals,
                                      None if newest is None else newest.stamp_ns, now_ns, limits,
                                      active=state == "active", state=state)
        try:
            self._diag_pub.publish(build_diagnostics_array(
                statuses, params.device if params else "none", stamp=self.get_clock().now().to_msg()))
        except Exception as exc:  # noqa: BLE001 - shutting down
            self.get_logger().debug(f"diagnostics not published: {exc}")

    def _warn_once(self, key: str, text: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            self.get_logger().warning(text)
