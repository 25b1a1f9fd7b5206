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
m2sa_ros.rclpy_support.rclpy_compat: Humble's stand-in for pre/post-set parameter callbacks behaves as rclpy's own.

Humble's rclpy has neither ``add_pre_set_parameters_callback`` nor
``add_post_set_parameters_callback``, and no Humble wheels exist to run it. But a node of
this rclpy with no pre/post callback registered sets parameters exactly as Humble's does
(descriptors, then on-set callbacks, then store), so the emulation is run here on such a
node and every observable outcome compared with the native callbacks doing the same
sets: results, stored values and types, and what pre and post saw and when.
"""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.ros, pytest.mark.integration]


def _probe_node(context, mode: str):
    from m2sa_ros.rclpy_support import rclpy_compat
    from rcl_interfaces.msg import FloatingPointRange, ParameterDescriptor, SetParametersResult
    from rclpy.node import Node
    from rclpy.parameter import Parameter

    node = Node(f"compat_probe_{mode}", context=context)
    node.declare_parameter("gain", 1.0, ParameterDescriptor(
        floating_point_range=[FloatingPointRange(from_value=0.0, to_value=10.0)]))
    node.declare_parameter("label", "a")
    seen: list[tuple] = []

    def pre(parameters):
        seen.append(("pre", [(p.name, p.value) for p in parameters]))
        out = []
        for p in parameters:
            if p.name == "label" and p.value == "drop":
                continue  # a pre-set callback may drop what it will not have set
            if p.name == "gain" and isinstance(p.value, int):
                p = Parameter("gain", value=float(p.value))  # an integer for a double
            out.append(p)
        return out

    def on_set(parameters):
        seen.append(("on_set", [(p.name, p.value) for p in parameters]))
        too_big = [p.name for p in parameters if p.name == "gain" and p.value > 5.0]
        return SetParametersResult(successful=not too_big, reason="too big" if too_big else "")

    def post(parameters):
        # The values must already be stored when post runs.
        seen.append(("post", [(p.name, p.value, node.get_parameter(p.name).value) for p in parameters]))

    if mode == "native":
        if not rclpy_compat.HAS_PRE_POST_SET_CALLBACKS:
            pytest.skip("this rclpy has no native pre/post-set callbacks (Humble)")
        rclpy_compat.add_set_parameters_callbacks(node, pre=pre, on_set=on_set, post=post)
        assert "set_parameters" not in vars(node), "native callbacks expected, not the emulation"
    else:
        node.add_on_set_parameters_callback(on_set)
        rclpy_compat.emulate_pre_post_set_callbacks(node, pre=pre, post=post)
    return node, seen


def _scenario(context, mode: str) -> list:
    """Return the same sets in either mode; returns everything observable, in order."""
    from rcl_interfaces.srv import SetParameters
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.parameter import Parameter

    node, seen = _probe_node(context, mode)
    out: list = []

    def record(what, results):
        results = results if isinstance(results, list) else [results]
        gain = node.get_parameter("gain").value
        out.append((what, [r.successful for r in results], gain, type(gain).__name__,
                    node.get_parameter("label").value, list(seen)))
        seen.clear()

    record("int for double", node.set_parameters([Parameter("gain", value=2)]))
    record("refused by on_set", node.set_parameters([Parameter("gain", value=7.0)]))
    record("refused by range", node.set_parameters([Parameter("gain", value=20.0)]))
    record("two at once", node.set_parameters_atomically([Parameter("gain", value=3),
                                                          Parameter("label", value="b")]))
    record("one by one", node.set_parameters([Parameter("gain", value=1.5), Parameter("label", value="c")]))
    record("all dropped by pre", node.set_parameters_atomically([Parameter("label", value="drop")]))

    # What `ros2 param set` does: the node's ~/set_parameters service.
    client = node.create_client(SetParameters, f"/{node.get_name()}/set_parameters")
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    try:
        assert client.wait_for_service(timeout_sec=5.0)
        request = SetParameters.Request(parameters=[Parameter("gain", value=4).to_parameter_msg()])
        future = client.call_async(request)
        executor.spin_until_future_complete(future, timeout_sec=10.0)
        assert future.done(), "no answer from ~/set_parameters"
        record("service", future.result().results)
    finally:
        executor.shutdown()
        node.destroy_node()
    return out


@pytest.fixture(scope="module")
def outcomes(module_context):
    return {mode: _scenario(module_context, mode) for mode in ("native", "emulated")
            if mode == "emulated" or _native_available()}


def _native_available() -> bool:
    from m2sa_ros.rclpy_support import rclpy_compat

    return rclpy_compat.HAS_PRE_POST_SET_CALLBACKS


def test_emulation_sets_parameters_as_rclpys_own_callbacks(outcomes):
    if "native" not in outcomes:
        pytest.skip("this rclpy has no native pre/post-set callbacks to compare with (Humble)")
    assert outcomes["emulated"] == outcomes["native"]


def test_emulated_callbacks_run_in_order_and_only_for_stored_values(outcomes):
    by_step = {step[0]: step for step in outcomes["emulated"]}

    _, ok, gain, kind, _, seen = by_step["int for double"]
    assert ok == [True] and gain == 2.0 and kind == "float"
    assert seen == [("pre", [("gain", 2)]), ("on_set", [("gain", 2.0)]), ("post", [("gain", 2.0, 2.0)])]

    for step in ("refused by on_set", "refused by range"):
        _, ok, gain, _, _, seen = by_step[step]
        assert ok == [False] and gain == 2.0, step
        assert not [s for s in seen if s[0] == "post"], f"{step}: post ran for a refused value"

    _, ok, gain, _, label, seen = by_step["two at once"]
    assert ok == [True] and (gain, label) == (3.0, "b")
    assert seen[-1] == ("post", [("gain", 3.0, 3.0), ("label", "b", "b")])

    _, ok, _, _, _, seen = by_step["one by one"]
    assert ok == [True, True]
    assert [s[0] for s in seen] == ["pre", "on_set", "post"] * 2

    _, ok, _, _, label, seen = by_step["all dropped by pre"]
    assert ok == [False] and label == "c"
    assert [s[0] for s in seen] == ["pre"]

    _, ok, gain, kind, _, seen = by_step["service"]
    assert ok == [True] and gain == 4.0 and kind == "float"
    assert seen[-1] == ("post", [("gain", 4.0, 4.0)])
