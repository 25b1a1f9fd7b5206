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
The node's subscriptions and publishers, each created with its topic's QoS (topic_qos.py).

:class:`QosEntities` is the one place the node creates a topic entity: every one gets the
node's default QoS for its topic and rclpy's overriding options, and a default that changed
since the entity's parameters were declared is followed (``follow_default``). A camera's
publishers come out in its :class:`~m2sa_ros.cameras.camera_outputs.CameraOutputs`, the
object the pipeline publishes on. Before
configure creates any, :meth:`QosEntities.check_overrides` names every given override rclpy
would refuse mid-transition, and warns once about overrides of topics the node does not have.
"""

from __future__ import annotations

from typing import Any, Callable

from diagnostic_msgs.msg import DiagnosticArray
from m2sa_ros.cameras.camera_outputs import CameraOutputs
from m2sa_ros.cameras.transport_names import camera_inputs, camera_topic, CameraInputs
from m2sa_ros.messages.detection_conversion import detection_types
from m2sa_ros.msg import SegmentationResult
from m2sa_ros.params.node_params import depth_transport_of, image_transport_of, NodeParams, ParameterError
from m2sa_ros.params.topic_qos import (
    camera_entities,
    default_qos,
    follow_default,
    overridable,
    override_problems,
    PUBLISHER,
    SUBSCRIPTION,
    unknown_overrides,
)
from rclpy.qos import QoSProfile
from sensor_msgs.msg import Image, PointCloud2
from visualization_msgs.msg import MarkerArray


class QosEntities:
    """
    Create ``node``'s topic entities with their QoS; ``params()`` is the node's configured parameters or None.

    ``image_reliability`` (read from ``params()``) is the default reliability of the
    sensor subscriptions; ``warn_once(key, text)`` reports unknown overrides.
    """

    def __init__(self, node: Any, params: Callable[[], NodeParams | None],
                 warn_once: Callable[[str, str], None]) -> None:
        self._node = node
        self._params = params
        self._warn_once = warn_once

    def qos(self, topic: str, entity: str, role: str | None = None) -> QoSProfile:
        """
        ``topic``'s default QoS, its declared-but-not-given overrides brought to that default.

        ``role`` is the node's own name of the topic (``image``), which chooses the default
        where ``topic`` is the name image_transport gave it (``/camera/color/image_raw``).
        """
        params = self._params()
        profile = default_qos(role or topic, entity, params.image_reliability if params else "best_effort")
        follow_default(self._node, self._node.resolve_topic_name(topic), entity, profile)
        return profile

    def subscribe(self, msg_type: Any, topic: str, callback: Callable[[Any], None], group: Any,
                  role: str | None = None) -> Any:
        """Return a subscription with ``topic``'s default QoS, overridable per topic (qos_overrides.*)."""
        return self._node.create_subscription(msg_type, topic, callback, self.qos(topic, SUBSCRIPTION, role),
                                              qos_overriding_options=overridable(), callback_group=group)

    def lifecycle_publisher(self, msg_type: Any, topic: str) -> Any:
        """Return a lifecycle publisher with ``topic``'s default QoS, overridable per topic (qos_overrides.*)."""
        return self._node.create_lifecycle_publisher(msg_type, topic, self.qos(topic, PUBLISHER),
                                                     qos_overriding_options=overridable())

    def camera_outputs(self, topic: Callable[[str], str], detection_types: tuple[Any, Any] | None) -> CameraOutputs:
        """
        Create a camera's publishers (``topic("result")`` its relative names) in the object the pipeline is handed.

        The detections' two only when their types are given (:meth:`detection_types`).
        """
        publisher = self.lifecycle_publisher
        outputs = CameraOutputs(result=publisher(SegmentationResult, topic("result")),
                                labels=publisher(Image, topic("labels")), overlay=publisher(Image, topic("overlay")),
                                markers=publisher(MarkerArray, topic("markers")),
                                points=publisher(PointCloud2, topic("target_points")),
                                log_error=self._node.get_logger().error, warn_once=self._warn_once)
        if detection_types is not None:
            outputs.detections_2d = publisher(detection_types[0], topic("detections_2d"))
            outputs.detections_3d = publisher(detection_types[1], topic("detections_3d"))
        return outputs

    def detection_types(self, params: NodeParams) -> tuple[Any, Any] | None:
        """
        vision_msgs' two array types when ``publish_detections`` asks for them and vision_msgs is there.

        vision_msgs is imported only here, only when ``publish_detections`` is on: it is
        optional, and a robot without it gets one warning and the node's other outputs.
        """
        if not params.publish_detections:
            return None
        try:
            return detection_types()
        except ImportError as exc:
            self._node.get_logger().warning(f"publish_detections: vision_msgs is not installed ({exc}), so no "
                                            "detections_2d / detections_3d; install it (ros-<distro>-vision-msgs) "
                                            "or set publish_detections:=false")
            return None

    def diagnostics_publisher(self) -> Any:
        """
        Create the /diagnostics publisher, whose QoS can be overridden too.

        A bad override of it is said and its default kept (the node is being built: there is
        no transition to fail).
        """
        node, profile = self._node, default_qos("/diagnostics", PUBLISHER, "")
        problems = override_problems(node, [("/diagnostics", PUBLISHER)])
        if problems:
            node.get_logger().error(f"invalid QoS override(s): {'; '.join(problems)}; /diagnostics keeps its "
                                    "default QoS")
            return node.create_publisher(DiagnosticArray, "/diagnostics", profile)
        return node.create_publisher(DiagnosticArray, "/diagnostics", profile, qos_overriding_options=overridable())

    def inputs_of(self, camera_name: str, params: NodeParams) -> CameraInputs:
        """Return the topics camera ``camera_name``'s image, depth and camera_info come on (transport_names.py)."""
        resolve = self._node.resolve_topic_name
        image, depth, info = (camera_topic(camera_name, t) for t in ("image", "depth", "camera_info"))
        return camera_inputs(resolve, lambda t: resolve(t, only_expand=True),
                             image=image, depth=depth, camera_info=info,
                             image_transport=image_transport_of(params), depth_transport=depth_transport_of(params))

    def check_overrides(self, params: NodeParams) -> None:
        """
        Raise ParameterError naming every given QoS override rclpy would refuse.

        Rclpy refuses it when the entity is created (mid-transition, with a traceback). One
        warning for overrides of topics the node does not have (a typo there would be
        silently ignored).
        """
        node, entities = self._node, [("/diagnostics", PUBLISHER)]
        for name in params.cameras or ("",):
            entities += [(node.resolve_topic_name(topic), entity) for topic, entity in camera_entities(
                lambda t, name=name: camera_topic(name, t), self.inputs_of(name, params),
                detections=params.publish_detections)]
        problems = override_problems(node, entities)
        if problems:
            raise ParameterError("invalid QoS overrides: " + "; ".join(problems))
        unknown = unknown_overrides(node, entities)
        if unknown:
            self._warn_once("qos:" + ",".join(unknown), "QoS override(s) for no topic of this node, ignored: "
                            + ", ".join(unknown))
