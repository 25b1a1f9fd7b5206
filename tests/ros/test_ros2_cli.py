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
The node driven from a shell with the real ``ros2``, as a user at a terminal drives it.

The ``ros2`` of ros2cli and its verbs, built from ros-src/*.repos by make setup; the node started
with ``ros2 run`` from a colcon install space, every answer read from what the verb
prints.

* ``ros2 lifecycle set / get``: the node waits unconfigured (``autostart:=false``), is
  configured and activated, and refuses a transition it does not have, naming the ones it has;
* ``ros2 param get / describe``: every parameter's documented type, description, range
  and read-only mark (node_params.py), as the verbs print them;
* ``ros2 param set``: a value applied at once, an integer for a double stored as a
  double, and refused sets (out of range, wrong type, read-only) with the reason printed
  and one line in the node's log;
* ``ros2 action send_goal --feedback``: the goal's feedback, and Ctrl-C (SIGINT to the
  verb) cancels the goal, whose one result is "cancelled" (``ros2 topic echo --once``);
* ``ros2 service call`` on a frame from ``m2sa-camera``; ``ros2 interface show``.

The output formats are those of ros2cli 0.36 (Kilted) and 0.32 (Jazzy); where they part,
both are read.
"""

from __future__ import annotations

from contextlib import contextmanager
import os
from pathlib import Path
import re
import signal
import subprocess
import time
from typing import Any, Iterator

from middleware_log import without_middleware_lines
from node_harness import held_parameters, spinning, wait_until
import pytest
from ros_install import LaunchProcess, ROOT, ros2, ros2_daemon_sees
import yaml

pytestmark = [pytest.mark.ros, pytest.mark.slow, pytest.mark.integration]

NODE = "perception_node"
# The verbs find the node in the ros2 daemon's graph, which has listed it before the first
# verb runs (ros2_daemon_sees); the param verbs still wait up to this long for it.
FIND_NODE = ("--timeout", "20")


@pytest.fixture(scope="module")
def shell(ros_shell, tmp_path_factory) -> dict[str, str]:
    logs = tmp_path_factory.mktemp("ros_log")
    return {**ros_shell, "ROS_LOG_DIR": str(logs), "RCUTILS_COLORIZED_OUTPUT": "0"}


@pytest.fixture(scope="module")
def node(shell, module_context) -> Any:
    """
    ``ros2 run m2sa_ros perception_node`` at a terminal, unconfigured, under a namespace of its own.

    Yields (fully qualified name, the process); Ctrl-C ends it, with exit status 0.
    """
    from lifecycle_msgs.srv import GetState
    from rclpy.node import Node

    ns = f"/cli_{os.getpid()}"
    run = LaunchProcess(["ros2", "run", "m2sa_ros", NODE, "--ros-args", "-r", f"__ns:={ns}",
                         "-p", "autostart:=false", "-p", "wait_for_image:=30.0"], shell, terminal=True)
    probe = Node("cli_start_probe", context=module_context)
    try:
        client = probe.create_client(GetState, f"{ns}/{NODE}/get_state")
        wait_until(lambda: client.wait_for_service(timeout_sec=0.5) or run.proc.poll() is not None, 120,
                   "the node's lifecycle services")
        assert run.proc.poll() is None, run.output
        probe.destroy_node()
        ros2_daemon_sees(shell, f"{ns}/{NODE}")
        yield f"{ns}/{NODE}", run
        run.ctrl_c()
        assert run.wait(timeout=30) == 0, run.output
    finally:
        run.kill()


def _lifecycle(shell: dict[str, str], verb: str, fqn: str, *args: str) -> subprocess.CompletedProcess:
    """Run ``ros2 lifecycle <verb> <fqn> ...`` as at a terminal."""
    return ros2(shell, "lifecycle", verb, fqn, *args)


def _lifecycle_get(shell: dict[str, str], fqn: str) -> subprocess.CompletedProcess:
    return _lifecycle(shell, "get", fqn)


def _state(shell: dict[str, str], fqn: str) -> str:
    got = _lifecycle_get(shell, fqn)
    assert got.returncode == 0, got.stdout + got.stderr
    return got.stdout.strip()


def _active(context: Any, fqn: str) -> None:
    """
    Bring the node to active from wherever the lifecycle test left it, in-process.

    No ``ros2 lifecycle`` verb is under test here (the lifecycle test proves them), and each
    is a process of its own, which costs seconds.
    """
    from lifecycle_msgs.msg import State, Transition
    from lifecycle_msgs.srv import ChangeState, GetState
    from rclpy.node import Node

    probe = Node("cli_lifecycle_probe", context=context)
    try:
        with spinning(context, probe, threads=1):
            get_state = probe.create_client(GetState, f"{fqn}/get_state")
            change_state = probe.create_client(ChangeState, f"{fqn}/change_state")
            assert get_state.wait_for_service(timeout_sec=60) and change_state.wait_for_service(timeout_sec=60)

            def state() -> int:
                future = get_state.call_async(GetState.Request())
                wait_until(future.done, 60, f"{fqn}'s lifecycle state")
                return future.result().current_state.id

            for when, transition in ((State.PRIMARY_STATE_UNCONFIGURED, Transition.TRANSITION_CONFIGURE),
                                     (State.PRIMARY_STATE_INACTIVE, Transition.TRANSITION_ACTIVATE)):
                if state() == when:
                    future = change_state.call_async(ChangeState.Request(transition=Transition(id=transition)))
                    wait_until(future.done, 120, f"{fqn}'s transition {transition}")
                    assert future.result().success, transition
            assert state() == State.PRIMARY_STATE_ACTIVE
    finally:
        probe.destroy_node()


def test_lifecycle_set_and_get_take_the_waiting_node_to_active(shell, node):
    fqn, run = node
    assert _state(shell, fqn) == "unconfigured [1]"
    assert "loaded on" not in run.output  # autostart:=false: nothing loaded yet

    bogus = _lifecycle(shell, "set", fqn, "activate")
    assert bogus.returncode != 0
    # ros2cli names the transitions the state has: from unconfigured, configure and shutdown.
    listed = re.findall(r"^- (\w+) \[(\d+)\]$", bogus.stderr + bogus.stdout, re.MULTILINE)
    assert "Unknown transition requested" in bogus.stderr + bogus.stdout, bogus.stderr
    assert ("configure", "1") in listed and ("shutdown", "5") in listed, listed
    # Still unconfigured: configure, which only that state has, succeeds next.

    for transition, state in (("configure", "inactive [2]"), ("activate", "active [3]")):
        done = _lifecycle(shell, "set", fqn, transition)
        assert done.returncode == 0 and done.stdout.strip() == "Transitioning successful", done.stdout + done.stderr
        assert _state(shell, fqn) == state
    run.wait_for_line("active: listening", timeout=10)


# ros2 param get's line for each type, then how the value is written (ros2param/api).
GET_LINE = {"boolean": "Boolean value is: {}", "integer": "Integer value is: {}", "double": "Double value is: {}",
            "string": "String value is: {}", "string array": "String values are: {}"}


def _type_name(spec: Any) -> str:
    """Return the type as ``ros2 param describe`` names it (ros2param.api.get_parameter_type_string)."""
    return {bool: "boolean", int: "integer", float: "double", str: "string",
            list: "string array"}[type(spec.default)]


def _describe(shell: dict[str, str], fqn: str, names: list[str]) -> dict[str, dict[str, str]]:
    """``ros2 param describe`` of several parameters, read back into {name: {field: value}}."""
    out = ros2(shell, "param", "describe", fqn, *names, *FIND_NODE)
    assert out.returncode == 0, out.stdout + out.stderr
    described: dict[str, dict[str, str]] = {}
    current: dict[str, str] = {}
    for line in out.stdout.splitlines():
        if line.startswith("Parameter name: "):
            current = described.setdefault(line.removeprefix("Parameter name: "), {})
        elif ": " in line and line.startswith("  "):
            key, value = line.strip().split(": ", 1)
            current[key] = value
    return described


def test_param_get_and_describe_show_every_parameter_as_declared(shell, node):
    from m2sa_ros.params.node_params import descriptor, PARAMETERS

    fqn, _run = node
    described = _describe(shell, fqn, [spec.name for spec in PARAMETERS])
    assert set(described) == {spec.name for spec in PARAMETERS}
    for spec in PARAMETERS:
        shown = described[spec.name]
        assert shown["Type"] == _type_name(spec), (spec.name, shown)
        assert shown["Description"] == descriptor(spec).description, spec.name
        if spec.minimum is not None:
            assert float(shown["Min value"]) == spec.minimum and float(shown["Max value"]) == spec.maximum, shown
        else:
            assert "Min value" not in shown, shown
        assert (shown.get("Read only") == "true") == spec.read_only, (spec.name, shown)

    by_name = {spec.name: spec for spec in PARAMETERS}
    # One of each type; the node runs on the defaults but for wait_for_image (-p at ros2 run).
    expected = {"max_queue": by_name["max_queue"].default, "device": by_name["device"].default,
                "publish_overlay": by_name["publish_overlay"].default, "cameras": [], "wait_for_image": 30.0}
    for name, value in expected.items():
        got = ros2(shell, "param", "get", fqn, name, *FIND_NODE)
        # ros2param writes the value with Python's str(): True, 4, 0.0, cpu, [].
        assert got.stdout.strip() == GET_LINE[_type_name(by_name[name])].format(value), (name, got.stdout, got.stderr)


def _set(shell: dict[str, str], fqn: str, name: str, value: str) -> str:
    out = ros2(shell, "param", "set", fqn, name, value, *FIND_NODE)
    return (out.stdout + out.stderr).strip()


@contextmanager
def _parameter_client(context: Any, fqn: str) -> Iterator[Any]:
    """
    Yield an rclpy parameter client of the node ``fqn``, on the module's context.

    What the node holds is read and reset in-process, where no ``ros2`` verb is under test:
    each verb is a process of its own, which costs seconds.
    """
    from rclpy.node import Node
    from rclpy.parameter_client import AsyncParameterClient

    probe = Node("cli_parameter_probe", context=context)
    try:
        with spinning(context, probe, threads=1):
            client = AsyncParameterClient(probe, fqn)
            assert client.wait_for_services(timeout_sec=60), f"{fqn}'s parameter services"
            yield client
    finally:
        probe.destroy_node()


def test_param_set_applies_converts_and_refuses_with_the_reason(shell, node, module_context):
    from rclpy.parameter import Parameter

    fqn, run = node
    _active(module_context, fqn)
    with _parameter_client(module_context, fqn) as client:
        try:
            # What the node then holds is read in-process: `ros2 param get` is proven above.
            assert _set(shell, fqn, "mask_threshold", "0.25") == "Set parameter successful"
            assert held_parameters(client, ["mask_threshold"]) == {"mask_threshold": 0.25}
            run.wait_for_line("applied mask_threshold=0.25", timeout=10)  # a runtime parameter, applied at once
            # ros2cli sends "1" as an integer; the node stores it as the double it is declared as.
            assert _set(shell, fqn, "mask_threshold", "1") == "Set parameter successful"
            [held] = held_parameters(client, ["mask_threshold"]).values()
            assert type(held) is float and held == 1.0, held

            # (parameter, value, what rclpy's refusal says, how the node's log names it, the value kept)
            refused = [("mask_threshold", "500.0", "out of range", "mask_threshold=500.0", 1.0),
                       ("max_queue", "many", "Wrong parameter type", "max_queue", 4),
                       ("cameras", "[head]", "read-only", "cameras", [])]
            for name, value, reason, named, kept in refused:
                said = _set(shell, fqn, name, value)
                assert said.startswith("Setting parameter failed") and reason in said, (name, said)
                # The node says what and why in its own log, in one line.
                lines = [line for line in run.lines if "parameter set refused" in line and named in line]
                assert len(lines) == 1, (name, lines)
            held = held_parameters(client, [name for name, *_ in refused])
            assert held == {name: kept for name, _value, _reason, _named, kept in refused}
        finally:
            future = client.set_parameters([Parameter("mask_threshold", value=0.0)])
            wait_until(future.done, 60, "the node's set_parameters answer")


# Tries of the Ctrl-C below. ros2cli of Jazzy and Kilted exits as soon as it has sent the
# cancel request, without waiting for its answer (ros2/rclpy issue 1390), and now and then
# the request dies with its process before the node has it: the goal then waits out its
# wait_for_image and ends "no image yet", as it would for a user. A node that never cancels
# fails every try.
CTRL_C_TRIES = 3


def _ctrl_c_send_goal(shell: dict[str, str], ns: str, probe: Any, statuses: list[dict[str, int]],
                      readers: list[int], request_id: str) -> tuple[LaunchProcess, dict[str, Any]]:
    """
    ``ros2 action send_goal --feedback``, Ctrl-C once the goal waits, and the goal's one result.

    Returns the verb (its output) and the result ``ros2 topic echo --once`` printed.
    """
    from action_msgs.msg import GoalStatus

    readers.clear()  # counts from before this echo (an earlier try's) say nothing about it
    echo = subprocess.Popen(["ros2", "topic", "echo", "--once", f"{ns}/result", "m2sa_ros/msg/SegmentationResult",
                             "--no-daemon"], env=shell, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    goal = None
    try:
        # The echo's reader must be matched by the node's result writer before the goal's one
        # result is published: a reader seen in the graph is not yet one the writer sends to
        # (each pair of participants discovers the other on its own), and a volatile writer
        # drops a result for a reader it has not matched. The node counts its matched readers
        # in /diagnostics (result_subscribers); the echo's is the only one.
        wait_until(lambda: (readers and readers[-1] >= 1) or echo.poll() is not None, 60,
                   f"the node's result writer to match ros2 topic echo's reader (result_subscribers {readers[-1:]})")
        assert echo.poll() is None, echo.stdout.read()
        goal = LaunchProcess(["ros2", "action", "send_goal", "--feedback", f"{ns}/segment", "m2sa_ros/action/Segment",
                              f"{{command: 'I want to turn on the TV', request_id: {request_id}}}"], shell)
        goal_id = goal.wait_for_line("Goal accepted with ID", timeout=60).split(":", 1)[1].strip()
        accepted_at = len(statuses)
        # No image comes: the goal waits for one (wait_for_image 30 s) and says so.
        stage = goal.wait_for_line("stage: ", timeout=30)
        assert stage.strip() == "stage: waiting_for_image", goal.output
        # ros2cli cancels at Ctrl-C only a goal its goal handle knows as accepted or executing,
        # from the status topic. It printed the goal's acceptance, so its handle exists, and a
        # status published after that reaches it: the node publishes its goals' statuses again
        # each second while they run (goal_status_repeat.py). Without that, a client that took
        # the first statuses before the goal response dropped them, and Ctrl-C left the goal
        # running. Two executing statuses after the acceptance: the second is a repeat.
        executing = GoalStatus.STATUS_EXECUTING
        wait_until(lambda: sum(seen.get(goal_id) == executing for seen in statuses[accepted_at:]) >= 2,
                   10, f"goal {goal_id}'s status published again after its acceptance")
        time.sleep(0.5)  # the user's reaction; the same status reaches ros2cli meanwhile
        goal.proc.send_signal(signal.SIGINT)  # Ctrl-C at the terminal running the verb
        goal.wait(timeout=30)
        assert "Canceling goal..." in goal.output, goal.output
        out, _ = echo.communicate(timeout=60)  # within wait_for_image (30 s) of a lost cancel
    finally:
        if goal is not None:
            goal.kill()
        if echo.poll() is None:
            echo.kill()
            echo.wait()
    return goal, yaml.safe_load(without_middleware_lines(out).split("\n---")[0])


def test_action_send_goal_shows_feedback_and_ctrl_c_cancels_the_goal(shell, node, module_context):
    from action_msgs.msg import GoalStatusArray
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.node import Node
    from rclpy.qos import qos_profile_action_status_default

    fqn, run = node
    _active(module_context, fqn)
    ns = fqn.rsplit("/", 1)[0]
    # On the module's context: one DDS participant fewer. With LOCALHOST discovery Fast DDS
    # announces a participant to the first four participant indexes of the domain only, so
    # two processes beyond those (here: the node, echo, send_goal) would not find each other.
    probe = Node("cli_graph_probe", context=module_context)
    statuses: list[dict[str, int]] = []  # each status array the server published: {goal id: status}
    probe.create_subscription(
        GoalStatusArray, f"{ns}/segment/_action/status",
        lambda msg: statuses.append({bytes(s.goal_info.goal_id.uuid).hex(): s.status for s in msg.status_list}),
        qos_profile_action_status_default)
    readers: list[int] = []  # the node's result_subscribers, from each /diagnostics message
    probe.create_subscription(
        DiagnosticArray, "/diagnostics",
        lambda msg: readers.extend(int(kv.value) for status in msg.status if status.name.startswith(fqn)
                                   for kv in status.values if kv.key == "result_subscribers"), 10)
    lost = []
    try:
        with spinning(module_context, probe, threads=1):
            for attempt in range(CTRL_C_TRIES):
                request_id = f"cli-goal-{attempt}"
                goal, result = _ctrl_c_send_goal(shell, ns, probe, statuses, readers, request_id)
                # One result for the goal, and no other.
                assert result["request_id"] == request_id and result["success"] is False, result
                if result["error"] != "cancelled":
                    assert result["error"].startswith("no image yet"), result
                    lost.append(goal.output)
                    continue
                break
    finally:
        probe.destroy_node()
    assert result["error"] == "cancelled", f"no cancel of {CTRL_C_TRIES} reached the node:\n" + "\n".join(lost)
    # ros2cli sends the cancel request, but the SIGINT has already shut its rclpy context
    # down, so the ros2cli of Jazzy and Kilted never reads the answer: it prints "Exception
    # while canceling goal: None" (exit 1) or, when its spin for the answer meets the shut-down
    # context, ends with no word (ExternalShutdownException, exit 15), or, when that spin builds
    # its wait set on the shut-down context, prints rcl's "context is not valid" (exit 1). A
    # ros2cli with a SIGINT handler of its own prints "Goal canceled.". The node's side is what
    # matters, but the verb still ends in one of those four ways.
    said = goal.output
    assert ("Goal canceled." in said or "Exception while canceling goal: None" in said
            or goal.proc.returncode == signal.SIGTERM
            or (goal.proc.returncode == 1 and "context is not valid" in said)), (goal.proc.returncode, said)
    run.wait_for_line(f"action command {request_id} 'I want to turn on the TV': cancelled", timeout=10)


def test_service_call_answers_on_the_cameras_frame(shell, node, module_context):
    fqn, _run = node
    _active(module_context, fqn)
    ns = fqn.rsplit("/", 1)[0]
    camera = LaunchProcess(["m2sa-camera", "--synthetic", "--namespace", ns, "--rate", "5"], shell)
    try:
        call = ros2(shell, "service", "call", f"{ns}/segment", "m2sa_ros/srv/Segment",
                    "{command: 'I want to turn on the TV', request_id: cli-srv}", timeout=180)
    finally:
        camera.ctrl_c()
        camera.wait(timeout=30)
    assert call.returncode == 0, call.stdout[-3000:] + call.stderr
    assert "requester: making request: m2sa_ros.srv.Segment_Request(command='I want to turn on the TV'" in call.stdout
    response = call.stdout.split("response:", 1)[1]
    assert "request_id='cli-srv'" in response and "success=True" in response, response[:2000]
    # The answer is about the camera's frame: its header is the camera's.
    assert "frame_id='camera_color_optical_frame'" in response, response[:2000]
    assert re.search(r"answer='[^']+'", response), response[:2000]


@pytest.mark.parametrize("interface", ["srv/Segment", "action/Segment", "action/Track", "msg/Command",
                                       "msg/SegmentationResult", "msg/Target"])
def test_interface_show_prints_the_installed_definition(shell, interface):
    shown = ros2(shell, "interface", "show", f"m2sa_ros/{interface}")
    assert shown.returncode == 0, shown.stderr
    # Nested types are expanded below their field, indented with tabs; the rest is the file.
    top = [line.rstrip() for line in shown.stdout.splitlines() if not line.startswith("\t") and line.strip()]
    source = Path(ROOT, f"{interface}.{interface.split('/')[0]}")
    assert top == [line.rstrip() for line in source.read_text().splitlines() if line.strip()]
