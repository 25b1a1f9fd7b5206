#!/usr/bin/env python3
"""A grasp planner's side of the M2SA perception node: the `segment` action.

What a planner does with the node, in one readable file:

* send a goal with its own ``request_id`` (so the result, which also goes out on the
  node's ``result`` topic, can be matched to this request in logs and bags);
* follow the feedback (stage and the answer as it is generated) and cancel a goal
  that takes too long;
* consume the result: per target, the mask the command asked for (``mask_type``: the
  visible pixels, or the complete shape in ``amodal_mask``), its box, the 3-D centroid
  in the colour camera's optical frame when depth is available, and with a pose
  (``has_pose``) what a press or grasp planner acts on: the press / grasp point (the
  centre of the target's box face towards the camera), the approach direction (the
  box's z axis: the visible surface's normal, pointing towards the camera; the tool
  moves along its reverse), the box's size and the target's points (a PointCloud2 for
  GPD, Contact-GraspNet or a MoveIt grasp generator).

    python3 examples/planner_client.py "I want to turn on the TV" --namespace /front_camera
    python3 examples/planner_client.py "what can I cut bread with?" --cancel-after 0.5
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class GraspTarget:
    """What the planner keeps of one target."""

    label: str
    shape: str  # "visible" or "complete": which mask the command asked for
    mask: np.ndarray  # bool H x W: the requested shape
    visible_pixels: int
    bbox: tuple[int, int, int, int]  # x, y, width, height of the visible mask
    centroid: tuple[float, float, float] | None  # metres, optical frame; None without depth
    score: float
    # With a pose (registered depth and enough valid points), else None / 0:
    press_point: tuple[float, float, float] | None = None  # metres, optical frame
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
    targets: list[GraspTarget] = field(default_factory=list)
    feedback: list[tuple[str, str]] = field(default_factory=list)


def grasp_targets(result: Any) -> list[GraspTarget]:
    """SegmentationResult -> the planner's targets (requested shape, box, centroid, approach)."""
    from m2sa_ros.cloud_conversion import cloud_to_points
    from m2sa_ros.geometry_conversion import approach
    from m2sa_ros.image_conversion import msg_to_mask
    from m2sa_ros.msg import Target

    targets = []
    for t in result.targets:
        visible = msg_to_mask(t.mask)
        complete = t.mask_type == Target.MASK_AMODAL and t.amodal_mask.height > 0
        press = approach(t)  # None without a pose
        targets.append(GraspTarget(
            label=t.label, shape="complete" if complete else "visible",
            mask=msg_to_mask(t.amodal_mask) if complete else visible, visible_pixels=int(visible.sum()),
            bbox=(t.bbox.x_offset, t.bbox.y_offset, t.bbox.width, t.bbox.height),
            centroid=(t.centroid.x, t.centroid.y, t.centroid.z) if t.has_centroid else None,
            score=float(t.score), press_point=press[0] if press else None, approach=press[1] if press else None,
            size=(t.size.x, t.size.y, t.size.z) if t.has_pose else None,
            points=cloud_to_points(t.points) if t.has_pose else None))
    return targets


class PlannerClient:
    """An action client of ``<namespace>/segment`` with request ids, feedback and cancel."""

    def __init__(self, node: Any, namespace: str = "") -> None:
        from rclpy.action import ActionClient

        from m2sa_ros.action import Segment

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

        sent = self.client.send_goal_async(goal, feedback_callback=on_feedback)
        handle = _wait(sent, timeout_s)
        if handle is None or not handle.accepted:
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
    for t in outcome.targets:
        where = ("no depth" if t.centroid is None else
                 f"centroid ({t.centroid[0]:+.3f}, {t.centroid[1]:+.3f}, {t.centroid[2]:.3f}) m in {outcome.frame_id}")
        lines.append(f"  {t.label}: {t.shape} mask, {int(t.mask.sum())} px, box {t.bbox}, score {t.score:.2f}, {where}")
        if t.press_point is not None and t.approach is not None and t.size is not None:
            (px, py, pz), (ax, ay, az) = t.press_point, t.approach
            points = 0 if t.points is None else len(t.points)
            ax, ay, az = (round(c, 3) + 0.0 for c in (ax, ay, az))  # no "-0.000"
            lines.append(f"    press/grasp at ({px:+.3f}, {py:+.3f}, {pz:.3f}) m, approach along "
                         f"({ax:+.3f}, {ay:+.3f}, {az:+.3f}) (towards the camera), box "
                         f"{t.size[0] * 100:.1f} x {t.size[1] * 100:.1f} x {t.size[2] * 100:.1f} cm, {points} points")
        elif t.centroid is not None:
            lines.append("    no pose: too few valid depth points under the visible mask")
    stages = [stage for stage, _ in outcome.feedback]
    if stages:
        lines.append("  feedback: " + " -> ".join(dict.fromkeys(stages)))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", help="the language command, e.g. 'I want to turn on the TV'")
    parser.add_argument("--namespace", default="", help="the perception node's namespace")
    parser.add_argument("--request-id", default=None, help="id to tag the request with (default: a fresh one)")
    parser.add_argument("--cancel-after", type=float, default=None, help="cancel the goal after this many seconds")
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args(argv)
    rclpy.init()
    node = Node("m2sa_planner_example")
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    try:
        planner = PlannerClient(node, args.namespace)
        if not planner.wait_for_server(args.timeout):
            print(f"no action server {planner.client._action_name} within {args.timeout:.0f} s", file=sys.stderr)
            return 1
        started = time.monotonic()
        outcome = planner.segment(args.command, request_id=args.request_id, cancel_after_s=args.cancel_after,
                                  timeout_s=args.timeout)
        print(describe(outcome))
        print(f"  took {time.monotonic() - started:.2f} s")
        return 0 if outcome.status in ("succeeded", "canceled") else 1
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    sys.exit(main())
