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
Each topic's QoS: the node's defaults, and the per-topic overrides ROS users expect.

Every subscription and publisher of the node is created with rclpy's QoS overriding
options (``QoSOverridingOptions.with_default_policies()``: history, depth, reliability),
so each has read-only parameters ``qos_overrides.<topic>.<subscription|publisher>.<policy>``
(the fully qualified topic, as ``ros2 param list`` shows them), given at start-up like any
QoS override: ``--ros-args -p qos_overrides./camera/depth.subscription.reliability:=reliable``
makes the depth reliable while the image stays best effort. Without an override an entity
gets the node's default for it (below); ``image_reliability`` stays what it was, the
default reliability of the image, depth and camera_info subscriptions.

Two things rclpy leaves to the node:

* **A bad value.** rclpy raises from ``create_subscription`` on an unknown policy name,
  in the middle of a lifecycle transition. :func:`override_problems` checks the given
  overrides first, so configure fails with one line naming each bad one, and
  :func:`unknown_overrides` names overrides of topics the node does not have (a typo
  would otherwise be silently ignored).
* **A default that changed.** The parameters are declared once, with the default of the
  entity's first creation; publishers are created again at every configure and
  subscriptions at every activate. When ``image_reliability`` changed in between (it is a
  load-time parameter: set while unconfigured, read at the next configure), a parameter
  the user did not give would keep the old default. :func:`follow_default` declares such a
  parameter afresh. A parameter the user gave is never touched.

Profiles are built fresh for every entity: rclpy writes the overrides into the profile it
is given, so a shared profile would carry one topic's override to the next.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.qos_overriding_options import QoSOverridingOptions

PUBLISHER, SUBSCRIPTION = "publisher", "subscription"
PREFIX = "qos_overrides."


def overridable() -> QoSOverridingOptions:
    """Return the options every entity of the node is created with: history, depth and reliability."""
    return QoSOverridingOptions.with_default_policies()


POLICIES: tuple[str, ...] = tuple(kind.name.lower() for kind in overridable().policy_kinds)
# What each policy accepts: this rclpy's enum names, lower case, as the parameters hold them.
_CHOICES = {"reliability": tuple(m.lower() for m in ReliabilityPolicy.__members__ if m != "UNKNOWN"),
            "history": tuple(m.lower() for m in HistoryPolicy.__members__ if m != "UNKNOWN")}


# --------------------------------------------------------------------------- the node's defaults
def sensor_qos(image_reliability: str, depth: int) -> QoSProfile:
    """
    Image, depth and camera_info: keep-last ``depth``, reliability from ``image_reliability``.

    Best effort by default (sensor-data QoS: a late frame is worth less than the next);
    ``image_reliability: reliable`` for bag replay, where every frame counts.
    """
    reliability = ReliabilityPolicy.RELIABLE if image_reliability == "reliable" else ReliabilityPolicy.BEST_EFFORT
    return QoSProfile(depth=depth, history=HistoryPolicy.KEEP_LAST, reliability=reliability)


def image_qos(image_reliability: str) -> QoSProfile:
    """Return the colour image: only the newest frame matters (keep-latest)."""
    return sensor_qos(image_reliability, 1)


def depth_qos(image_reliability: str) -> QoSProfile:
    """Depth and camera_info: a few, so the one nearest the colour frame's stamp is still there."""
    return sensor_qos(image_reliability, 5)


def command_qos() -> QoSProfile:
    """Commands are tiny and must not be dropped when a planner sends several at once."""
    return QoSProfile(depth=100, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE)


def result_qos() -> QoSProfile:
    """Results, label images, markers, target points and detections: reliable, a few queued."""
    return QoSProfile(depth=10, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE)


def overlay_qos() -> QoSProfile:
    """Return the overlay is for eyes: the newest only."""
    return QoSProfile(depth=1, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE)


def diagnostics_qos() -> QoSProfile:
    """/diagnostics, as diagnostic_updater publishes it (reliable, depth 10)."""
    return QoSProfile(depth=10, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE)


def default_qos(topic: str, entity: str, image_reliability: str) -> QoSProfile:
    """
    Return a fresh default profile for the node's ``topic`` (relative or absolute) as ``entity``.

    Subscriptions by the topic's last name: the image (and image/compressed), depth (and
    depth/compressedDepth) and camera_info are sensors, command and command_stamped are
    commands. Publishers: the overlay and /diagnostics have their own; every other output
    (result, labels, markers, target_points, detections) is a result.
    """
    name = topic.rstrip("/")
    if entity == SUBSCRIPTION:
        if name.endswith(("image", "image/compressed")):
            return image_qos(image_reliability)
        if name.endswith(("depth", "depth/compressedDepth", "camera_info")):
            return depth_qos(image_reliability)
        return command_qos()
    if name.endswith("overlay"):
        return overlay_qos()
    if name == "/diagnostics":
        return diagnostics_qos()
    return result_qos()


def camera_entities(topic: Any, sensors: Any, *, detections: bool) -> list[tuple[str, str]]:
    """
    (topic, entity) of every subscription and publisher one camera has.

    ``sensors`` holds the image, depth and camera_info topics as image_transport names them
    (transport_names.CameraInputs); ``topic`` names the rest (a Camera's ``topic``). What
    configure checks the given overrides against.
    """
    outputs = ["result", "labels", "overlay", "markers", "target_points"]
    if detections:
        outputs += ["detections_2d", "detections_3d"]
    return ([(t, SUBSCRIPTION) for t in (sensors.image, sensors.depth, sensors.camera_info)]
            + [(topic(t), SUBSCRIPTION) for t in ("command", "command_stamped")]
            + [(topic(t), PUBLISHER) for t in outputs])


# --------------------------------------------------------------------------- the parameters
def parameter_name(topic: str, entity: str, policy: str) -> str:
    """``qos_overrides.<topic>.<entity>.<policy>``, as rclpy declares it (``topic`` fully qualified)."""
    return f"{PREFIX}{topic}.{entity}.{policy}"


def policy_value(profile: QoSProfile, policy: str) -> Any:
    """Return the value a profile's policy has as a parameter ("best_effort", 5, ...)."""
    value = getattr(profile, policy)
    return value.name.lower() if hasattr(value, "name") else value


def _given(node: Any) -> dict[str, Any]:
    """
    Return the overrides given at start-up (-p, a params file, a launch file), by name.

    rclpy keeps them in ``_parameter_overrides`` (ros_parameters.declare_parameters reads
    them there too); it has no public accessor.
    """
    return {name: p.value for name, p in getattr(node, "_parameter_overrides", {}).items()
            if name.startswith(PREFIX)}


def value_problem(policy: str, value: Any) -> str | None:
    """Why ``value`` cannot be ``policy``'s, or None."""
    if policy == "depth":
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            return "must be an integer >= 0"
        return None
    choices = _CHOICES.get(policy)
    if choices is not None and (not isinstance(value, str) or value.lower() not in choices):
        return "must be one of " + ", ".join(choices)
    return None


def override_problems(node: Any, entities: Iterable[tuple[str, str]]) -> list[str]:
    """One line per given override of ``entities`` ((topic, entity) pairs) that rclpy would refuse."""
    given = _given(node)
    problems = []
    for topic, entity in entities:
        for policy in POLICIES:
            name = parameter_name(topic, entity, policy)
            if name in given:
                problem = value_problem(policy, given[name])
                if problem:
                    problems.append(f"{name}={given[name]!r}: {problem}")
    return problems


def unknown_overrides(node: Any, entities: Iterable[tuple[str, str]]) -> list[str]:
    """Return the given ``qos_overrides.*`` that name none of ``entities``' policies (typos, other nodes' topics)."""
    known = {parameter_name(topic, entity, policy) for topic, entity in entities for policy in POLICIES}
    return sorted(name for name in _given(node) if name not in known)


def follow_default(node: Any, topic: str, entity: str, profile: QoSProfile) -> list[str]:
    """
    Declare afresh the parameters of ``topic``'s ``entity`` that hold an old default.

    A parameter the user did not give, declared at an earlier creation with another
    default than ``profile``'s, is undeclared so that rclpy declares it again with this
    one. rclpy's QoS parameters are read-only and ``undeclare_parameter`` refuses
    read-only ones, so the stored descriptor's mark is lifted first (rclpy keeps it in
    ``_descriptors``; nothing else ever changes it). Returns the names declared afresh.
    """
    given = _given(node)
    refreshed = []
    for policy in POLICIES:
        name = parameter_name(topic, entity, policy)
        if name in given or not node.has_parameter(name):
            continue
        if node.get_parameter(name).value == policy_value(profile, policy):
            continue
        descriptors = getattr(node, "_descriptors", None)
        if descriptors is None or name not in descriptors:
            continue  # another rclpy: the old default stays (the QoS then says so in the graph)
        descriptors[name].read_only = False
        node.undeclare_parameter(name)
        refreshed.append(name)
    return refreshed


def qos_parameters(node: Any) -> dict[str, Any]:
    """Every ``qos_overrides.*`` parameter the node has declared, by name (what ``ros2 param list`` shows)."""
    found = node.get_parameters_by_prefix(PREFIX.rstrip("."))
    return {f"{PREFIX}{suffix}": parameter.value for suffix, parameter in sorted(found.items())}
