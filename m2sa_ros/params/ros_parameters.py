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
The node's parameters on the ROS side: declared with their types, every set screened.

node_params.py says what the parameters are and checks values without ROS; this is
where they meet rclpy. Declaring takes care of what rclpy would get wrong on its own
(an empty string array typed as bytes) and remembers the overrides it refused, so
configure can name the value given instead of failing on a default. A set is screened
before rclpy's own checks, because rclpy tells only the client why it refused: the
node's log says it once, whichever check refuses. An override the node does not declare
(``mask_treshold``) would be ignored without a word by rclpy; it gets one warning naming
the nearest declared name.
"""

from __future__ import annotations

import difflib
from typing import Any

from m2sa_ros.params.node_params import check_value, descriptor, PARAMETERS, ParamSpec, ros_value, SPECS
from rcl_interfaces.msg import SetParametersResult
from rclpy.exceptions import InvalidParameterTypeException, InvalidParameterValueException
from rclpy.node import Node
from rclpy.parameter import Parameter


def declare_parameters(node: Node) -> dict[str, Any]:
    """
    Declare every parameter on ``node``; the overrides ROS refused, by name (out of range, wrong type).

    The default is declared in place of a refused override meanwhile, and configure
    fails naming the value given.
    """
    refused: dict[str, Any] = {}
    for spec in PARAMETERS:
        override = node._parameter_overrides.get(spec.name)
        try:
            _declare(node, spec, spec.default if override is None else ros_value(spec, override.value))
        except (InvalidParameterValueException, InvalidParameterTypeException):
            refused[spec.name] = override.value if override is not None else None
            _declare(node, spec, spec.default)
    warn_unknown_overrides(node)
    return refused


# rclpy declares a QoS override's parameter when the publisher or subscription it names is
# created (m2sa_ros/params/topic_qos.py checks those); every other parameter exists by now.
QOS_OVERRIDES_PREFIX = "qos_overrides."


def unknown_overrides(given: list[str], declared: list[str]) -> list[tuple[str, str | None]]:
    """
    (override, nearest declared name or None) for each start-up override not declared.

    ``difflib``'s ratio (0.6 and up) finds a typo's parameter (``mask_treshold`` ->
    ``mask_threshold``, ``max_que`` -> ``max_queue``) and nothing for an unrelated name.
    """
    known = set(declared)
    return [(name, next(iter(difflib.get_close_matches(name, declared, n=1)), None))
            for name in given if name not in known and not name.startswith(QOS_OVERRIDES_PREFIX)]


def warn_unknown_overrides(node: Node) -> list[str]:
    """
    Warn once per override the node does not declare; return their names.

    An override comes from ``-p``, a params file for this node or ``/**``, or a launch
    file. The node starts anyway:
    rclpy ignores them, which left a mistyped name without effect and without a word.
    """
    declared = sorted(node.list_parameters([], 0).names)  # ours and rclpy's (use_sim_time, ...)
    # rclpy keeps the start-up overrides in _parameter_overrides, with no public accessor.
    unknown = unknown_overrides(list(node._parameter_overrides), declared)
    for name, nearest in unknown:
        hint = f"did you mean {nearest}?" if nearest else "`ros2 param list` shows the node's parameters"
        node.get_logger().warning(f"parameter '{name}' is not a parameter of this node and is ignored; {hint}")
    return [name for name, _ in unknown]


def _declare(node: Node, spec: ParamSpec, value: Any) -> None:
    """
    Declare one parameter with ``value``, statically typed as its descriptor says.

    An empty string array needs three steps: rclpy infers a type from the value, and an
    empty list infers as a byte array. So it is declared by type (no value yet), given
    a typed empty value, and only then marked read-only. Called before the set callbacks
    are registered, so none of them runs.
    """
    if not isinstance(spec.default, list) or value:
        node.declare_parameter(spec.name, value, descriptor(spec), ignore_override=True)
        return
    writable = descriptor(spec)  # rclpy keeps the descriptor object it is given
    writable.read_only = False
    node.declare_parameter(spec.name, Parameter.Type.STRING_ARRAY, writable, ignore_override=True)
    node.set_parameters([Parameter(spec.name, Parameter.Type.STRING_ARRAY, [])])
    if spec.read_only:
        node.set_descriptor(spec.name, descriptor(spec))


def prepare_set(node: Node, parameters: list[Parameter]) -> list[Parameter]:
    """
    Before any set: an integer for a double becomes a float; a set that will be refused is logged.

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
        problem = _set_problem(node, parameter, spec)
        if problem:
            problems.append(problem)
        prepared.append(parameter)
    if problems:
        node.get_logger().warning("parameter set refused: " + "; ".join(problems))
    return prepared


def _set_problem(node: Node, parameter: Parameter, spec: ParamSpec | None) -> str | None:
    """Why setting ``parameter`` will be refused, or None: what rclpy and ``check_set`` check."""
    if not node.has_parameter(parameter.name):
        return f"{parameter.name}: no such parameter"
    desc = node.describe_parameter(parameter.name)
    if desc.read_only:
        return f"{parameter.name}: read-only, set at start-up only (-p, a params file or a launch argument)"
    if spec is not None:
        return check_value(spec, parameter.value)[1]
    if not desc.dynamic_typing and parameter.type_.value != desc.type:
        return f"{parameter.name}={parameter.value!r}: expected {Parameter.Type(desc.type).name.lower()}"
    return None


def check_set(parameters: list[Parameter], *, loaded: bool, logger: Any) -> SetParametersResult:
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
    if later and loaded:
        reason = (f"{', '.join(later)}: load-time parameter(s), take effect at the next configure "
                  f"(deactivate, cleanup, configure, activate)")
        logger.info(reason)
    return SetParametersResult(successful=True, reason=reason)
