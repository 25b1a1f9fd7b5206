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
The node as a user runs it.

An installed executable in a process of its own, ended with the signals a terminal
Ctrl-C under ``ros2 launch`` delivers.

In a terminal, Ctrl-C sends SIGINT to the whole foreground process group, so the node
gets it at once. ``ros2 launch`` (launch's ExecuteProcess) forwards a SIGINT of its own
a few hundred ms later when it runs non-interactive (``-n``, a service manager, a
``kill -INT`` of launch); in either mode it sends SIGTERM when the process still runs
``sigterm_timeout`` (5 s) after the Ctrl-C, and SIGKILL 5 s later still.
:func:`ctrl_c_under_launch` sends that sequence, with the second SIGINT's delay as the
variable.

The planner's side as a user runs it too: :func:`run_planner_script` runs
examples/planner_client.py in a process of its own against a node over DDS.
"""

from __future__ import annotations

import os
from pathlib import Path
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Callable

from m2sa_ros.tools.child_process import ChildProcess
from middleware_log import without_middleware_lines

LAUNCH_SIGTERM_AFTER_S = 5.0  # launch's default sigterm_timeout
PENDING = 3  # commands the node holds when the signal comes: one running, two queued
PLANNER_EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "planner_client.py"


class NodeProcess(ChildProcess):
    """An executable node, started at once, whose output is collected line by line on a thread."""

    def __init__(self, argv: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> None:
        super().__init__(argv, env=env, cwd=cwd, collect=True, name="the node")
        self.start()


def start_active_node(argv: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> NodeProcess:
    """Start the node (autostart) and return once it says it is active."""
    node = NodeProcess(argv, env=env, cwd=cwd)
    node.wait_for_line("active: listening", timeout=120)
    return node


def ctrl_c(proc: subprocess.Popen, must_exit: bool = False, timeout: float = 30.0) -> tuple[int, str]:
    """
    SIGINT a process still running (a terminal's Ctrl-C); return its exit code and all it printed.

    A process still there after ``timeout`` s is killed so no test leaves one behind; with
    ``must_exit`` that is a failure naming its output (a node must end on Ctrl-C), else the
    kill's code is returned for the test to judge.
    """
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        if must_exit:
            raise AssertionError(f"the node did not exit on SIGINT:\n{out}")
    return proc.returncode, out


def ctrl_c_under_launch(proc: subprocess.Popen, second_sigint_after: float,
                        sigterm_after: float = LAUNCH_SIGTERM_AFTER_S) -> list[tuple[float, str]]:
    """
    Send SIGINT now, again ``second_sigint_after`` s later, and SIGTERM at ``sigterm_after`` s.

    Each only while the process still runs. Returns what was sent and when (s from the first).
    """
    sent: list[tuple[float, str]] = []
    start = time.monotonic()

    def send_at(at: float, signum: signal.Signals) -> None:
        while proc.poll() is None and time.monotonic() - start < at:
            time.sleep(0.005)
        if proc.poll() is None:
            proc.send_signal(signum)
            sent.append((round(time.monotonic() - start, 3), signum.name))

    send_at(0.0, signal.SIGINT)
    send_at(second_sigint_after, signal.SIGINT)
    send_at(sigterm_after, signal.SIGTERM)
    return sent


def in_background(fn: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    """Run ``fn`` on a thread; its return value lands in the returned list."""
    box: list[Any] = []
    thread = threading.Thread(target=lambda: box.append(fn()), daemon=True)
    thread.start()
    return thread, box


def wait_done(futures: list[Any], node: NodeProcess, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not all(f.done() for f in futures):
        assert time.monotonic() < deadline, f"no answer within {timeout} s:\n{node.output}"
        time.sleep(0.02)


# How long a planner here waits for a goal's response before it sends the goal again, and
# how often it sends it. rmw_fastrtps drops a service response when the server has not yet
# matched the client's response reader within 100 ms (its writer's max_blocking_time), and
# logs "failed to send response (timeout): client will not receive response"
# (ros2/ros2 issue 1253). wait_for_server says only that the client has matched the server;
# on a loaded machine the server's side of the match can come later. The server then holds
# the goal, accepted, and its response never comes. A planner with a goal-response timeout
# sends the goal again, and so does this one.
GOAL_RESPONSE_TIMEOUT_S = 15.0
GOAL_SENDS = 3


def send_goals(client: Any, goals: list[Any], node: NodeProcess,
               feedback_callback: Callable[[Any], None] | None = None) -> list[Any]:
    """
    Send ``goals`` to a node in another process; return their goal handles, in order.

    A goal whose response has not come within GOAL_RESPONSE_TIMEOUT_S is sent again, up to
    GOAL_SENDS times. The node then also holds the unanswered copy, which nobody waits for.
    """
    handles: list[Any] = [None] * len(goals)
    for _ in range(GOAL_SENDS):
        sent = {i: client.send_goal_async(goal, feedback_callback=feedback_callback)
                for i, goal in enumerate(goals) if handles[i] is None}
        deadline = time.monotonic() + GOAL_RESPONSE_TIMEOUT_S
        while not all(f.done() for f in sent.values()) and time.monotonic() < deadline:
            time.sleep(0.02)
        for i, future in sent.items():
            if future.done():
                handles[i] = future.result()
        if all(h is not None for h in handles):
            return handles
    raise AssertionError(f"no goal response within {GOAL_SENDS} x {GOAL_RESPONSE_TIMEOUT_S:.0f} s:\n{node.output}")


def segment_client(client_node: Any, ns: str) -> Any:
    """Return an action client of ``<ns>/segment`` (node_harness.action_client: ros2/rclpy issue 1589)."""
    from m2sa_ros.action import Segment
    from node_harness import action_client

    return action_client(client_node, Segment, f"{ns}/segment")


def hold_pending_goals(client: Any, node: NodeProcess) -> list[Any]:
    """
    PENDING Segment goals the node has accepted and holds (``client``: :func:`segment_client`'s).

    The first runs (it waits for an image that never comes), the others queue behind it.
    Returns their result futures.
    """
    from m2sa_ros.action import Segment

    assert client.wait_for_server(timeout_sec=60), node.output
    handles = send_goals(client, [Segment.Goal(command="I want to turn on the TV", request_id=f"g{i}")
                                  for i in range(PENDING)], node)
    assert all(h.accepted for h in handles), node.output
    return [h.get_result_async() for h in handles]


def assert_clean_exit(node: NodeProcess, sent: list[tuple[float, str]], code: int) -> None:
    out = node.output
    assert code == 0, f"exit {code} after {sent}:\n{out}"
    assert "SIGINT: shutting down" in out, out
    assert "Traceback" not in out, out
    assert "unclean shutdown" not in out, out


def answer_then_ctrl_c(ns: str, node: NodeProcess, ros_context: Any, second_sigint_after: float) -> None:
    """
    Hold PENDING commands, send the Ctrl-C sequence, and check what follows.

    Every command is answered once, naming the signal, and the process exits 0.
    """
    from node_harness import spinning
    from rclpy.node import Node

    client_node = Node("ctrl_c_planner", context=ros_context)
    client = segment_client(client_node, ns)
    try:
        with spinning(ros_context, client_node):
            results = hold_pending_goals(client, node)
            sender, sent = in_background(lambda: ctrl_c_under_launch(node.proc, second_sigint_after))
            wait_done(results, node, 120)  # bounds for a loaded machine: each ends on its event
            code = node.wait(timeout=120)
            sender.join(10)
        assert_clean_exit(node, sent[0], code)
        answers = sorted((r.result().result.result.request_id, r.result().result.result.error) for r in results)
        assert [rid for rid, _ in answers] == [f"g{i}" for i in range(PENDING)], answers  # each exactly once
        assert all(error.startswith("cancelled: node shutting down (SIGINT)") for _, error in answers), answers
    finally:
        node.kill()
        client_node.destroy_node()


def run_planner_script(*args: str) -> subprocess.CompletedProcess:
    """Return the example in a process of its own (same ROS domain as the test's node), Fast DDS's lines left out."""
    done = subprocess.run([sys.executable, str(PLANNER_EXAMPLE), *args], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ))
    done.stdout, done.stderr = without_middleware_lines(done.stdout), without_middleware_lines(done.stderr)
    # An interpreter that aborts at exit prints this and exits 134, whatever the goal did.
    assert "terminate called" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    return done
