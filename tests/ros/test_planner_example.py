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
examples/planner_client.py against a live node.

Request ids, feedback, masks, centroids and the press point and approach direction
in one round trip, and cancel; a command about something not in view is an outcome with
nothing to act on, and says what is missing (interfaces v6).

The script is also run as a user runs it, a process of its own talking to the node
over DDS: its exit status and what it prints, with and without a cancel, in brief and
with no action server at all (each of these once ended in an abort at exit).
"""

from __future__ import annotations

import importlib.util

from fake_models import AbsentBoxes, SlowBoxes
from node_harness import CX, CY, FX, FY, give_a_frame_with_depth, planner_node, spinning
from node_process import PLANNER_EXAMPLE, run_planner_script
import pytest

pytestmark = [pytest.mark.ros, pytest.mark.integration]


def _load_example():
    import sys

    spec = importlib.util.spec_from_file_location("planner_client", PLANNER_EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules["planner_client"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def live_node(ros_context):
    from rclpy.node import Node

    seg = SlowBoxes()
    node = planner_node(ros_context, seg, "/arm_camera")
    client = Node("planner", context=ros_context)
    try:
        with spinning(ros_context, node, client, threads=8):
            try:
                give_a_frame_with_depth(node)
                yield node, client, seg
            finally:
                seg.hold.set()  # before the executor stops: a held generation would keep it busy
    finally:
        client.destroy_node()
        node.close()


def test_round_trip_with_request_id_feedback_masks_and_centroids(live_node):
    node, client, _seg = live_node
    example = _load_example()
    planner = example.PlannerClient(client, "/arm_camera")
    assert planner.wait_for_server(30)
    outcome = planner.segment("the whole mug, please", request_id="grasp-42", timeout_s=60)
    assert (outcome.status, outcome.request_id, outcome.error) == ("succeeded", "grasp-42", "")
    assert [stage for stage, _ in outcome.feedback][:2] == ["encoding", "generating"]
    (target,) = outcome.targets
    assert target.shape == "complete" and target.mask.sum() == 100 and target.visible_pixels == 80
    assert target.bbox == (8, 6, 10, 8)
    assert target.centroid is not None and target.centroid[2] == pytest.approx(2.0)
    assert "mug_1: complete mask, 100 px" in example.describe(outcome)
    # A press planner's inputs: the visible 10x8 box's face at 2 m (fx = fy = 40), met head-on.
    u, v = 8 + 4.5, 6 + 3.5
    assert target.press_point == pytest.approx(((u - CX) * 2.0 / FX, (v - CY) * 2.0 / FY, 2.0), abs=1e-6)
    assert target.approach == pytest.approx((0.0, 0.0, -1.0), abs=1e-6)
    assert target.size == pytest.approx((9 * 2.0 / FX, 7 * 2.0 / FY, 0.0), abs=1e-6)
    assert target.points.shape == (80, 3)  # the visible pixels only, 5 cm apart: one point per 5 mm voxel
    assert ("press/grasp at (-0.150, -0.100, 2.000) m, approach along (+0.000, +0.000, -1.000) (towards the "
            "camera), box 45.0 x 35.0 x 0.0 cm, 80 points") in example.describe(outcome)


def test_cancel_returns_a_cancelled_outcome(live_node):
    _node, client, seg = live_node
    example = _load_example()
    planner = example.PlannerClient(client, "/arm_camera")
    assert planner.wait_for_server(30)
    seg.hold.clear()  # generation never ends by itself
    outcome = planner.segment("the whole mug, please", request_id="grasp-43", cancel_after_s=0.3, timeout_s=60)
    assert outcome.status == "canceled" and outcome.error.startswith("cancelled") and not outcome.targets


# --------------------------------------------------------------------------- the script, as a user runs it
PRESS_LINE = ("press/grasp at (-0.150, -0.100, 2.000) m, approach along (+0.000, +0.000, -1.000) (towards the "
              "camera), box 45.0 x 35.0 x 0.0 cm, 80 points")


def test_script_prints_the_press_point_and_exits_0(live_node):
    done = run_planner_script("the whole mug, please", "--namespace", "/arm_camera", "--request-id", "grasp-50")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "request grasp-50: succeeded"
    assert any(line.strip().startswith("mug_1: complete mask, 100 px, box (8, 6, 10, 8)") for line in lines), lines
    assert f"    {PRESS_LINE}" in lines, lines
    assert any(line.startswith("  feedback: encoding -> generating") for line in lines), lines


def test_script_brief_prints_labels_and_press_points_only(live_node):
    done = run_planner_script("the whole mug, please", "--namespace", "/arm_camera", "--request-id", "grasp-51",
                              "--brief")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == [
        "request grasp-51: succeeded",
        "  answer: It is the mug_1.",
        "  mug_1: press at (-0.150, -0.100, 2.000) m, approach (+0.000, +0.000, -1.000)",
    ], done.stdout


def test_script_cancel_is_a_clean_exit_0(live_node):
    _node, _client, seg = live_node
    seg.hold.clear()  # generation never ends by itself: only the cancel ends the goal
    done = run_planner_script("the whole mug, please", "--namespace", "/arm_camera", "--request-id", "grasp-52",
                              "--cancel-after", "0.5")
    assert done.returncode == 0, done.stdout + done.stderr
    first = done.stdout.splitlines()[0]
    assert first.startswith("request grasp-52: canceled (cancelled"), done.stdout
    assert "press/grasp" not in done.stdout  # a cancelled goal has no targets


def test_an_absent_target_is_nothing_to_act_on_and_the_script_says_what_is_missing(ros_context):
    from m2sa_core.inference.absence import absent_answer
    from rclpy.node import Node

    node = planner_node(ros_context, AbsentBoxes("microwave"), "/arm_camera")
    client = Node("planner", context=ros_context)
    try:
        with spinning(ros_context, node, client, threads=8):
            give_a_frame_with_depth(node)
            example = _load_example()
            planner = example.PlannerClient(client, "/arm_camera")
            assert planner.wait_for_server(30)
            outcome = planner.segment("press the microwave's start button", request_id="press-1", timeout_s=60)
            assert (outcome.status, outcome.outcome, outcome.missing, outcome.targets) == (
                "succeeded", "absent", "microwave", [])
            assert example.describe(outcome).splitlines()[1:] == [
                f"  answer: {absent_answer('microwave')}", "  outcome: absent",
                "  nothing to act on: no microwave in view (re-plan or ask)"]
            present = planner.segment("the mug", request_id="grasp-60", timeout_s=60)
            assert (present.outcome, present.missing, len(present.targets)) == ("targets", "", 1)
            assert "  outcome: targets" in example.describe(present).splitlines()

            done = run_planner_script("press the microwave's start button", "--namespace", "/arm_camera",
                                      "--request-id", "press-2", "--brief")
            assert done.returncode == 0, done.stdout + done.stderr  # answered: there is nothing to do
            assert done.stdout.splitlines() == [
                "request press-2: succeeded", f"  answer: {absent_answer('microwave')}",
                "  nothing to act on: no microwave in view (re-plan or ask)"], done.stdout
    finally:
        client.destroy_node()
        node.close()


def test_outcome_of_a_node_older_than_v6_falls_back_to_success_and_targets():
    from m2sa_ros.msg import SegmentationResult, Target

    example = _load_example()
    old = SegmentationResult(success=True)  # outcome left OUTCOME_UNSET, as a v5 node's reads
    assert old.outcome == SegmentationResult.OUTCOME_UNSET and example.outcome_of(old) == "absent"
    old.targets.append(Target(label="mug_1"))
    assert example.outcome_of(old) == "targets"
    assert example.outcome_of(SegmentationResult(success=False, error="queue full")) == "failed"
    for value, name in ((1, "targets"), (2, "absent"), (3, "failed")):
        assert example.outcome_of(SegmentationResult(success=value != 3, outcome=value)) == name
    outcome = example.Outcome(request_id="r", status="succeeded", outcome="absent")
    assert example.nothing_to_act_on(outcome) == "nothing to act on: the answer names no target (re-plan or ask)"


def test_script_without_an_action_server_says_so_and_exits_0():
    done = run_planner_script("the mug", "--namespace", "/nobody_serves_here", "--timeout", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == ""
    assert done.stderr.splitlines() == ["no action server /nobody_serves_here/segment within 2 s"], done.stderr


class _LosingClient:
    """An action client whose first ``lost`` goal responses never come, as rmw_fastrtps drops them."""

    def __init__(self, lost: int) -> None:
        self.lost, self.sent = lost, []

    def send_goal_async(self, goal, feedback_callback=None):
        from rclpy.task import Future

        self.sent.append(goal.request_id)
        future = Future()
        if len(self.sent) > self.lost:
            future.set_result(type("Handle", (), {"accepted": False})())  # answered: rejected
        return future


@pytest.mark.parametrize("lost, status", [(1, "rejected"), (3, "aborted")])
def test_a_goal_response_that_never_comes_is_sent_again_then_reported(monkeypatch, lost, status):
    from m2sa_ros.action import Segment

    example = _load_example()
    monkeypatch.setattr(example, "GOAL_RESPONSE_TIMEOUT_S", 0.2)
    planner = example.PlannerClient.__new__(example.PlannerClient)
    planner._action, planner.client = Segment, _LosingClient(lost)
    outcome = planner.segment("the mug", request_id="lost-1", timeout_s=5.0)
    assert planner.client.sent == ["lost-1"] * min(lost + 1, example.GOAL_SENDS)
    assert outcome.status == status, outcome
    if status == "aborted":
        assert outcome.error == f"no goal response to {example.GOAL_SENDS} sends of 0.2 s each", outcome
