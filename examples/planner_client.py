#!/usr/bin/env python3

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
A grasp planner's side of the M2SA perception node: the `segment` action.

What a planner does with the node, in one readable file:

* send a goal with its own ``request_id`` (so the result, which also goes out on the
  node's ``result`` topic, can be matched to this request in logs and bags);
* follow the feedback (stage and the answer as it is generated) and cancel a goal
  that takes too long;
* consume the result: per target, the mask the command asked for (``mask_type``: the
  visible pixels, or the complete shape), decoded to a full-frame numpy mask by
  ``m2sa_ros.messages.mask_encoding`` (masks travel cropped to their box as PNGs, interfaces
  v5), its box, the 3-D centroid (in ``geometry_frame_id``, below) when depth is
  available, and with a pose
  (``has_pose``) what a press or grasp planner acts on: the press / grasp point (the
  centre of the target's box face towards the camera), the approach direction (the
  box's z axis: the visible surface's normal, pointing towards the camera; the tool
  moves along its reverse), the box's size and the target's points (a PointCloud2 for
  GPD, Contact-GraspNet or a MoveIt grasp generator);
* read the result's ``outcome`` first (interfaces v6): ``targets`` is something to act on;
  ``absent`` means the answer names no target - the command asked about something not in
  view ("press the microwave's start button" with no microwave), ``missing`` says what -
  and the planner must not act, but re-plan or ask; ``failed`` is an error (retry or
  report); ``unset`` is a node older than v6, where success and an empty target list are
  all there is to go on (:func:`outcome_of`).

    python3 examples/planner_client.py "I want to turn on the TV" --namespace /front_camera
    python3 examples/planner_client.py "what can I cut bread with?" --cancel-after 0.5
    python3 examples/planner_client.py "I want to turn on the TV" --brief   # the answer only
    python3 examples/planner_client.py "I want to turn on the TV" --frame base_link  # node: target_frame:=base_link
    python3 examples/planner_client.py "press the microwave's start button"   # none in view: nothing to act on

The 3-D values are in the result's ``geometry_frame_id``: the optical frame, or the node's
``target_frame`` (tf2 at the image's stamp). ``--frame base_link`` says the planner needs
them in base_link: a result in another frame (no target_frame on the node, or its
transform missing or late: ``transform_error``) is then refused, exit status 1.

Exit status: 0 when the goal succeeded (an absent target included: the node answered, and
said there is nothing to act on) or was cancelled as asked (--cancel-after), and when
no action server answered (said on stderr: no goal was sent); 1 when the goal was rejected or
aborted; 130 on Ctrl-C. The executor's
thread is stopped and joined before the action client, the node and the context go, in
that order: a thread still inside the executor when the context is torn down aborts the
interpreter at exit ("terminate called without an active exception").
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
import sys
import threading
import time
from typing import Any
import uuid

import numpy as np


@dataclass
class GraspTarget:
    """What the planner keeps of one target."""

    label: str
    shape: str  # "visible" or "complete": which mask the command asked for
    mask: np.ndarray  # bool H x W: the requested shape
    visible_pixels: int
    bbox: tuple[int, int, int, int]  # x, y, width, height of the visible mask
    centroid: tuple[float, float, float] | None  # metres, in geometry_frame_id; None without depth
    score: float
    # With a pose (registered depth and enough valid points), else None / 0:
    press_point: tuple[float, float, float] | None = None  # metres, in geometry_frame_id
    approach: tuple[float, float, float] | None = None  # unit, towards the camera
    size: tuple[float, float, float] | None = None  # the box's extents along its x, y, z (metres)
    points: np.ndarray | None = None  # (N, 3) float32, the visible points (empty with target_points off)


@dataclass
class Outcome:
    request_id: str
    status: str  # succeeded, aborted, canceled, rejected
    answer: str = ""
    error: str = ""
    truncated: bool = False
    frame_id: str = ""
    geometry_frame_id: str = ""  # the frame of the 3-D values (v4): frame_id, or the node's target_frame
    transform_error: str = ""  # why they are not in the node's target_frame (v4)
    outcome: str = ""  # v6: "targets", "absent" or "failed" (outcome_of)
    missing: str = ""  # v6, with "absent": what the answer says is not there ("" when it names nothing)
    targets: list[GraspTarget] = field(default_factory=list)
    feedback: list[tuple[str, str]] = field(default_factory=list)


def outcome_of(result: Any) -> str:
    """
    Return what a planner may do with a SegmentationResult: "targets", "absent" or "failed".

    ``outcome`` says it (interfaces v6). A node older than v6 leaves it OUTCOME_UNSET;
    then a failure is ``success`` false, and a success with no targets is taken as absent:
    there is nothing to act on either way.
    """
    from m2sa_ros.msg import SegmentationResult

    names = {SegmentationResult.OUTCOME_TARGETS: "targets", SegmentationResult.OUTCOME_ABSENT: "absent",
             SegmentationResult.OUTCOME_FAILED: "failed"}
    outcome = getattr(result, "outcome", SegmentationResult.OUTCOME_UNSET)
    if outcome in names:
        return names[outcome]
    if not result.success:
        return "failed"
    return "targets" if result.targets else "absent"


def nothing_to_act_on(outcome: Outcome) -> str:
    """Return the line a planner logs for an absent target instead of acting: what is not in view."""
    what = f"no {outcome.missing} in view" if outcome.missing else "the answer names no target"
    return f"nothing to act on: {what} (re-plan or ask)"


def grasp_targets(result: Any) -> list[GraspTarget]:
    """Turn a SegmentationResult into the planner's targets (requested shape, box, centroid, approach)."""
    from m2sa_ros.messages.cloud_conversion import cloud_to_points
    from m2sa_ros.messages.geometry_conversion import approach
    from m2sa_ros.messages.mask_encoding import amodal_target_mask, target_mask
    from m2sa_ros.msg import Target

    targets = []
    for t in result.targets:
        visible = target_mask(t, result.height, result.width)  # full frame, bool
        amodal = amodal_target_mask(t, result.height, result.width) if t.mask_type == Target.MASK_AMODAL else None
        complete = amodal is not None
        press = approach(t)  # None without a pose
        targets.append(GraspTarget(
            label=t.label, shape="complete" if complete else "visible",
            mask=amodal if complete else visible, visible_pixels=int(visible.sum()),
            bbox=(t.bbox.x_offset, t.bbox.y_offset, t.bbox.width, t.bbox.height),
            centroid=(t.centroid.x, t.centroid.y, t.centroid.z) if t.has_centroid else None,
            score=float(t.score), press_point=press[0] if press else None, approach=press[1] if press else None,
            size=(t.size.x, t.size.y, t.size.z) if t.has_pose else None,
            points=cloud_to_points(t.points) if t.has_pose else None))
    return targets


# The node accepts or rejects a goal at once; a goal response that has not come within
# this time was lost, and the goal is sent again. rmw_fastrtps drops a service response when
# the server has not yet matched the client's response reader within 100 ms ("failed to
# send response (timeout): client will not receive response", ros2/ros2 issue 1253), which
# happens on a loaded machine right after the client found the server. The node then holds
# the lost copy too; it answers it when it runs, to nobody.
GOAL_RESPONSE_TIMEOUT_S = 10.0
GOAL_SENDS = 3


class PlannerClient:
    """An action client of ``<namespace>/segment`` with request ids, feedback and cancel."""

    def __init__(self, node: Any, namespace: str = "") -> None:
        from m2sa_ros.action import Segment
        from rclpy.action import ActionClient

        self.node = node
        self._action = Segment
        self.client = ActionClient(node, Segment, f"{namespace.rstrip('/')}/segment")

    def wait_for_server(self, timeout_s: float = 30.0) -> bool:
        return self.client.wait_for_server(timeout_sec=timeout_s)

    def segment(self, command: str, *, request_id: str | None = None, cancel_after_s: float | None = None,
                timeout_s: float = 120.0, max_image_age: float = 0.0) -> Outcome:
        """Send one goal and wait for its outcome; the node's executor must be spinning elsewhere."""
        from action_msgs.msg import GoalStatus

        request_id = request_id or f"planner-{uuid.uuid4().hex[:8]}"
        outcome = Outcome(request_id=request_id, status="rejected")
        goal = self._action.Goal(command=command, request_id=request_id, max_image_age=float(max_image_age))

        def on_feedback(msg: Any) -> None:
            outcome.feedback.append((msg.feedback.stage, msg.feedback.partial_answer))

        handle = None
        for _ in range(GOAL_SENDS):
            handle = _wait(self.client.send_goal_async(goal, feedback_callback=on_feedback),
                           min(GOAL_RESPONSE_TIMEOUT_S, timeout_s))
            if handle is not None:
                break
        if handle is None:
            outcome.status = "aborted"
            outcome.error = f"no goal response to {GOAL_SENDS} sends of {GOAL_RESPONSE_TIMEOUT_S:g} s each"
            return outcome
        if not handle.accepted:
            return outcome
        result_future = handle.get_result_async()
        if cancel_after_s is not None and _wait(result_future, cancel_after_s) is None:
            _wait(handle.cancel_goal_async(), timeout_s)
        response = _wait(result_future, timeout_s)
        if response is None:
            outcome.status, outcome.error = "aborted", f"no result within {timeout_s:.0f} s"
            return outcome
        result = response.result.result
        outcome.status = {GoalStatus.STATUS_SUCCEEDED: "succeeded", GoalStatus.STATUS_CANCELED: "canceled"}.get(
            response.status, "aborted")
        outcome.answer, outcome.error, outcome.truncated = result.answer, result.error, result.truncated
        outcome.frame_id = result.header.frame_id
        outcome.geometry_frame_id = getattr(result, "geometry_frame_id", "") or result.header.frame_id
        outcome.transform_error = getattr(result, "transform_error", "")
        outcome.outcome, outcome.missing = outcome_of(result), getattr(result, "missing", "")
        if result.request_id != request_id:  # the node echoes the id on every path
            outcome.error = f"result for request '{result.request_id}', expected '{request_id}'"
            outcome.status = "aborted"
            return outcome
        outcome.targets = grasp_targets(result)
        return outcome


def _wait(future: Any, timeout_s: float) -> Any:
    done = threading.Event()
    future.add_done_callback(lambda _f: done.set())
    if not done.wait(timeout_s):
        return None
    return future.result()


def describe(outcome: Outcome) -> str:
    lines = [f"request {outcome.request_id}: {outcome.status}"
             + (f" ({outcome.error})" if outcome.error else "")]
    if outcome.answer:
        lines.append(f"  answer: {outcome.answer}" + (" [truncated]" if outcome.truncated else ""))
    if outcome.outcome:
        lines.append(f"  outcome: {outcome.outcome}")
    if outcome.outcome == "absent":
        lines.append(f"  {nothing_to_act_on(outcome)}")
    if outcome.transform_error:
        lines.append(f"  3-D values stay in {outcome.geometry_frame_id}: {outcome.transform_error}")
    for t in outcome.targets:
        where = ("no depth" if t.centroid is None else
                 f"centroid ({t.centroid[0]:+.3f}, {t.centroid[1]:+.3f}, {t.centroid[2]:.3f}) m in "
                 f"{outcome.geometry_frame_id or outcome.frame_id}")
        lines.append(f"  {t.label}: {t.shape} mask, {int(t.mask.sum())} px, box {t.bbox}, score {t.score:.2f}, {where}")
        if t.press_point is not None and t.approach is not None and t.size is not None:
            (px, py, pz), (ax, ay, az) = t.press_point, t.approach
            points = 0 if t.points is None else len(t.points)
            ax, ay, az = (round(c, 3) + 0.0 for c in (ax, ay, az))  # no "-0.000"
            lines.append(f"    press/grasp at ({px:+.3f}, {py:+.3f}, {pz:.3f}) m{_in_frame(outcome)}, approach along "
                         f"({ax:+.3f}, {ay:+.3f}, {az:+.3f}) (towards the camera), box "
                         f"{t.size[0] * 100:.1f} x {t.size[1] * 100:.1f} x {t.size[2] * 100:.1f} cm, {points} points")
        elif t.centroid is not None:
            lines.append("    no pose: too few valid depth points under the visible mask")
    stages = [stage for stage, _ in outcome.feedback]
    if stages:
        lines.append("  feedback: " + " -> ".join(dict.fromkeys(stages)))
    return "\n".join(lines)


def _in_frame(outcome: Outcome) -> str:
    """
    " in base_link" when the 3-D values are in another frame than the camera's (the node's target_frame).

    "" in the optical frame, which the centroid's line names already.
    """
    frame = outcome.geometry_frame_id
    return f" in {frame}" if frame and frame != outcome.frame_id else ""


def describe_brief(outcome: Outcome) -> str:
    """
    Return the answer and, per target, its label and press point.

    What a person at a terminal wants to read, where ``ros2 action send_goal`` prints
    every mask's pixels.
    """
    lines = [f"request {outcome.request_id}: {outcome.status}" + (f" ({outcome.error})" if outcome.error else "")]
    if outcome.answer:
        lines.append(f"  answer: {outcome.answer}" + (" [truncated]" if outcome.truncated else ""))
    if outcome.outcome == "absent":
        lines.append(f"  {nothing_to_act_on(outcome)}")
    if outcome.transform_error:
        lines.append(f"  3-D values stay in {outcome.geometry_frame_id}: {outcome.transform_error}")
    for t in outcome.targets:
        if t.press_point is not None and t.approach is not None:
            (px, py, pz), (ax, ay, az) = t.press_point, (round(c, 3) + 0.0 for c in t.approach)
            where = (f"press at ({px:+.3f}, {py:+.3f}, {pz:.3f}) m{_in_frame(outcome)}, "
                     f"approach ({ax:+.3f}, {ay:+.3f}, {az:+.3f})")
        else:
            where = "no press point (no depth)" if t.centroid is None else "no press point (too few depth points)"
        lines.append(f"  {t.label}: {where}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from rclpy.signals import SignalHandlerOptions

    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("command", help="the language command, e.g. 'I want to turn on the TV'")
    parser.add_argument("--namespace", default="", help="the perception node's namespace")
    parser.add_argument("--request-id", default=None, help="id to tag the request with (default: a fresh one)")
    parser.add_argument("--cancel-after", type=float, default=None, help="cancel the goal after this many seconds")
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="seconds to wait for the action server, and again for the result")
    parser.add_argument("--brief", action="store_true",
                        help="print only the answer and each target's label and press point")
    parser.add_argument("--frame", default="",
                        help="the frame the 3-D values must be in, e.g. base_link (the node's target_frame); "
                             "a result in another frame is refused (exit 1)")
    args = parser.parse_args(argv)
    # Ctrl-C is a KeyboardInterrupt here, and the finally below tears down in order;
    # rclpy's own handler would shut the context down under the spinning executor.
    rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
    node = Node("m2sa_planner_example")
    planner = PlannerClient(node, args.namespace)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    spinner = threading.Thread(target=executor.spin, name="planner-executor", daemon=True)
    spinner.start()
    try:
        if not planner.wait_for_server(args.timeout):
            # Nothing was asked, so nothing failed: the script ends cleanly and says why.
            print(f"no action server {planner.client._action_name} within {args.timeout:.0f} s", file=sys.stderr)
            return 0
        started = time.monotonic()
        outcome = planner.segment(args.command, request_id=args.request_id, cancel_after_s=args.cancel_after,
                                  timeout_s=args.timeout)
        print(describe_brief(outcome) if args.brief else describe(outcome))
        if not args.brief:
            print(f"  took {time.monotonic() - started:.2f} s")
        if args.frame and outcome.status == "succeeded" and outcome.geometry_frame_id != args.frame:
            why = outcome.transform_error or (
                f"the node has no target_frame (start it with -p target_frame:={args.frame})"
                if outcome.geometry_frame_id == outcome.frame_id else "the node's target_frame is another")
            print(f"3-D values are in {outcome.geometry_frame_id}, not {args.frame}: {why}", file=sys.stderr)
            return 1
        return 0 if outcome.status in ("succeeded", "canceled") else 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        # In order: the executor stops and its thread ends, then what it served goes.
        executor.shutdown()
        spinner.join()
        planner.client.destroy()
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    sys.exit(main())
