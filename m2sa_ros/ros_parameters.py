"""The node's parameters on the ROS side: declared with their types, every set screened.

node_params.py says what the parameters are and checks values without ROS; this is
where they meet rclpy. Declaring takes care of what rclpy would get wrong on its own
(an empty string array typed as bytes) and remembers the overrides it refused, so
configure can name the value given instead of failing on a default. A set is screened
before rclpy's own checks, because rclpy tells only the client why it refused: the
node's log says it once, whichever check refuses.
"""

from __future__ import annotations

from typing import Any

from rcl_interfaces.msg import SetParametersResult
from rclpy.exceptions import InvalidParameterTypeException, InvalidParameterValueException
from rclpy.node import Node
from rclpy.parameter import Parameter

from m2sa_ros.node_params import PARAMETERS, SPECS, ParamSpec, check_value, descriptor, ros_value


def declare_parameters(node: Node) -> dict[str, Any]:
    """Declare every parameter on ``node``; the overrides ROS refused, by name (out of range, wrong type).

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
    return refused


def _declare(node: Node, spec: ParamSpec, value: Any) -> None:
    """Declare one parameter with ``value``, statically typed as its descriptor says.

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
