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
What the ``ros2`` CLI shows of the node, checked with the rclpy calls ros2cli makes.

ros2cli is not on PyPI, so each check goes through what ``ros2 param describe / get /
set`` and ``ros2 action send_goal`` use underneath (the parameter services through
rclpy's AsyncParameterClient, an ActionClient) or reads the node's own log (stderr):

* every parameter is declared with its documented type, an empty string array too, and
  an integer given for a double is converted, at start-up and on set, so the type never
  changes;
* a refused parameter set, a deactivate and a goal rejected while inactive each leave one
  log line saying what and why;
* a start with default parameters prints nothing but its INFO lines, and the default
  model path never imports bitsandbytes (whose import warns about CPU kernels).
"""

from __future__ import annotations

import os
from pathlib import Path
import signal
import subprocess
import sys
import threading
from typing import Any

from fake_models import BoxSegmenter
from middleware_log import is_middleware_line
from node_harness import action_client, spinning, wait_until
import pytest

pytestmark = [pytest.mark.ros, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
ENTRY = Path(sys.executable).parent / "m2sa-perception"


def _done(future: Any, what: str) -> Any:
    return wait_until(lambda: future.done() and future.result(), 30, what)


@pytest.fixture
def served(ros_context):
    """Yield a configured, active node (box model) and a client node, both spinning; the parameter client."""
    from m2sa_ros.perception_node import PerceptionNode
    from rclpy.lifecycle import TransitionCallbackReturn
    from rclpy.node import Node
    from rclpy.parameter import Parameter
    from rclpy.parameter_client import AsyncParameterClient

    seg = BoxSegmenter()
    name = f"cli_node_{os.getpid()}"
    node = PerceptionNode(name, context=ros_context, segmenter_factory=lambda _p, _s: seg,
                          parameter_overrides=[Parameter("autostart", value=False)])
    client = Node(f"cli_client_{os.getpid()}", context=ros_context)
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
        with spinning(ros_context, node, client):
            params = AsyncParameterClient(client, name)
            assert params.wait_for_services(timeout_sec=30), "parameter services not found"
            yield node, client, params, seg
    finally:
        client.destroy_node()
        node.close()  # its action servers too: a later test's /track must not find them


def _node_lines(err: str, node: Any) -> list[str]:
    """Return the lines the node itself logged (its logger is its name)."""
    return [line for line in err.splitlines() if f"[{node.get_name()}]" in line]


def test_describe_and_get_show_every_parameter_with_its_declared_type(served):
    from m2sa_ros.params.node_params import PARAMETERS, ros_type
    from rcl_interfaces.msg import ParameterType

    _node, _client, params, _seg = served
    names = [spec.name for spec in PARAMETERS]
    described = _done(params.describe_parameters(names), "DescribeParameters").descriptors
    values = _done(params.get_parameters(names), "GetParameters").values
    for spec, desc, value in zip(PARAMETERS, described, values):
        assert desc.name == spec.name
        assert desc.type == ros_type(spec) and not desc.dynamic_typing, spec.name
        assert value.type == ros_type(spec), f"{spec.name}: get says type {value.type}"
        assert desc.read_only == spec.read_only
        if spec.read_only:  # ros2cli prints its own read-only line from the flag
            assert "read-only" not in desc.description.lower(), desc.description
    cameras = values[names.index("cameras")]
    assert cameras.type == ParameterType.PARAMETER_STRING_ARRAY and list(cameras.string_array_value) == []
    assert described[names.index("cameras")].type == ParameterType.PARAMETER_STRING_ARRAY


def test_an_integer_for_a_double_is_converted_and_the_parameter_stays_a_double(served):
    from rcl_interfaces.msg import ParameterType
    from rclpy.parameter import Parameter

    node, _client, params, seg = served
    result = _done(params.set_parameters([Parameter("mask_threshold", value=1)]), "SetParameters").results[0]
    assert result.successful, result.reason
    value = _done(params.get_parameters(["mask_threshold"]), "GetParameters").values[0]
    assert value.type == ParameterType.PARAMETER_DOUBLE and value.double_value == 1.0
    desc = _done(params.describe_parameters(["mask_threshold"]), "DescribeParameters").descriptors[0]
    assert desc.type == ParameterType.PARAMETER_DOUBLE
    assert seg.mask_threshold == 1.0 and isinstance(seg.mask_threshold, float)
    assert isinstance(node._params.mask_threshold, float)


def test_start_up_overrides_keep_the_declared_types(ros_context):
    """``-p mask_threshold:=1`` and ``-p cameras:=[]`` (what ros2 launch and params files give)."""
    from m2sa_ros.perception_node import PerceptionNode
    import rclpy
    from rclpy.parameter import Parameter

    context = rclpy.Context()
    rclpy.init(context=context, args=["--ros-args", "-p", "mask_threshold:=1", "-p", "cameras:=[]",
                                      "-p", "autostart:=false"])
    try:
        node = PerceptionNode("typed_overrides", context=context)
        threshold, cameras = node.get_parameter("mask_threshold"), node.get_parameter("cameras")
        assert threshold.type_ == Parameter.Type.DOUBLE and threshold.value == 1.0
        assert cameras.type_ == Parameter.Type.STRING_ARRAY and list(cameras.value) == []
        assert not node._refused_overrides
        node.destroy_node()
    finally:
        rclpy.shutdown(context=context)


@pytest.mark.parametrize("name,value,why", [
    ("mask_threshold", "high", "mask_threshold='high': expected float"),  # rclpy's type check refuses
    ("max_queue", 0, "max_queue=0: must be >= 1"),  # rclpy's range check refuses
    ("device", "gpu", "device='gpu': must be cpu, cuda"),  # the node's own check refuses
    ("cameras", ["head"], "cameras: read-only"),
    ("mask_treshold", 1.0, "mask_treshold: no such parameter"),
])
def test_a_refused_parameter_set_logs_one_line_with_what_and_why(served, capfd, name, value, why):
    from rclpy.parameter import Parameter

    node, _client, params, _seg = served
    before = node.get_parameter(name).value if node.has_parameter(name) else None
    capfd.readouterr()
    result = _done(params.set_parameters([Parameter(name, value=value)]), "SetParameters").results[0]
    err = capfd.readouterr().err
    assert not result.successful
    logged = _node_lines(err, node)
    assert len(logged) == 1 and "parameter set refused: " + why in logged[0], err
    if before is not None:
        assert node.get_parameter(name).value == before


def test_an_accepted_parameter_set_logs_no_refusal(served, capfd):
    from rclpy.parameter import Parameter

    node, _client, params, _seg = served
    capfd.readouterr()
    assert _done(params.set_parameters([Parameter("wait_for_image", value=2)]), "SetParameters").results[0].successful
    logged = _node_lines(capfd.readouterr().err, node)
    assert len(logged) == 1 and "applied wait_for_image=2.0" in logged[0], logged


def test_deactivate_and_a_goal_rejected_while_inactive_each_log_one_line(served, capfd):
    from m2sa_ros.action import Segment, Track
    from rclpy.lifecycle import TransitionCallbackReturn

    node, client, _params, _seg = served
    segment = action_client(client, Segment, "segment")
    track = action_client(client, Track, "track")
    try:
        assert segment.wait_for_server(timeout_sec=30) and track.wait_for_server(timeout_sec=30)
        capfd.readouterr()
        assert node.trigger_deactivate() == TransitionCallbackReturn.SUCCESS
        logged = _node_lines(capfd.readouterr().err, node)
        assert len(logged) == 1 and "inactive: no longer taking commands" in logged[0], logged

        for action, client_of in (("/segment", segment), ("/track", track)):
            goal = Segment.Goal(command="turn on the TV") if client_of is segment else Track.Goal(command="mug")
            handle = _done(client_of.send_goal_async(goal), "the goal response")
            assert not handle.accepted
            logged = _node_lines(capfd.readouterr().err, node)
            assert len(logged) == 1 and f"{action} goal rejected: the node is inactive" in logged[0], logged
    finally:
        segment.destroy()
        track.destroy()


# ----------------------------------------------------------------------------- start-up output
def test_the_default_model_path_never_imports_bitsandbytes():
    """Building the default model as the node does; quantization none needs neither bitsandbytes nor peft."""
    code = ("import sys\n"
            "from m2sa_ros.model.model_source import resolve_model_source\n"
            "from m2sa_ros.params.node_params import PARAMETERS, validate\n"
            "from m2sa_ros.perception_node import load_segmenter\n"
            "params = validate({spec.name: spec.default for spec in PARAMETERS})\n"
            "segmenter = load_segmenter(params, resolve_model_source(params.model_path, params.preset))\n"
            "print('loaded', type(segmenter).__name__)\n"
            "print('modules', sorted(m for m in ('bitsandbytes', 'peft') if m in sys.modules))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "loaded Segmenter" in proc.stdout
    assert "modules []" in proc.stdout, proc.stdout
    assert "kernels" not in proc.stderr and "bitsandbytes" not in proc.stderr, proc.stderr


def test_the_node_imports_the_model_stack_only_to_load_a_model():
    """
    Starting the node, up to configure, needs neither torch nor transformers.

    They take seconds to import (transformers brings in torchvision and torch's compiler),
    and a node that refuses its parameters, prints its help or waits unconfigured for a
    lifecycle manager should not make its user wait for a model it has not loaded.
    """
    code = ("import sys\n"
            "import m2sa_ros.main, m2sa_ros.perception_node\n"
            "from m2sa_ros.params.node_params import PARAMETERS, validate\n"
            "validate({spec.name: spec.default for spec in PARAMETERS})\n"
            "print('modules', sorted(m for m in ('torch', 'transformers', 'segment_anything') if m in sys.modules))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "modules []" in proc.stdout, proc.stdout


def test_a_start_with_default_parameters_prints_only_info_lines():
    """`m2sa-perception` with no argument: the shipped model, autostart, until active."""
    if not ENTRY.exists():
        pytest.skip(f"{ENTRY} not installed (pip install -e .)")
    proc = subprocess.Popen([str(ENTRY)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ), cwd=ROOT)
    lines: list[str] = []
    active = threading.Event()

    def read() -> None:
        for line in proc.stdout:
            if not is_middleware_line(line):  # Fast DDS's own, not the node's
                lines.append(line.rstrip("\n"))
            if "active: listening on" in line:
                active.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        reached = active.wait(180)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        reader.join(10)
    assert reached, "\n".join(lines)
    start = lines[:next(i for i, line in enumerate(lines) if "active: listening on" in line) + 1]
    assert all(line.startswith("[INFO]") for line in start), "\n".join(start)
    assert any("models/m2sa-tiny-synth loaded" in line for line in start), "\n".join(start)
