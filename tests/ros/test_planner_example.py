"""examples/planner_client.py against a live node: request ids, feedback, masks,
centroids and the press point and approach direction in one round trip, and cancel."""

from __future__ import annotations

import importlib.util
import threading
import time
from pathlib import Path

import pytest

from fake_models import BoxSegmenter
from node_harness import good_image, spinning

pytestmark = pytest.mark.ros

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "planner_client.py"


def _load_example():
    import sys

    spec = importlib.util.spec_from_file_location("planner_client", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules["planner_client"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


class SlowBoxes(BoxSegmenter):
    """Reports stages like the real Segmenter; generation runs until told or cancelled."""

    def __init__(self) -> None:
        super().__init__(mask_type="amodal")
        self.hold = threading.Event()
        self.hold.set()

    def segment(self, image, command, **kwargs):
        from m2sa_core.inference import Cancelled

        kwargs["on_stage"]("encoding")
        kwargs["on_stage"]("generating")
        kwargs["on_text"]("It is")
        while not self.hold.is_set():
            if kwargs["should_stop"]():
                raise Cancelled("cancelled")
            time.sleep(0.01)
        kwargs["on_stage"]("decoding")
        return super().segment(image, command)


@pytest.fixture
def live_node(ros_context):
    from rclpy.node import Node
    from rclpy.parameter import Parameter

    from m2sa_ros.perception_node import PerceptionNode

    seg = SlowBoxes()
    node = PerceptionNode("planner_target", context=ros_context, namespace="/arm_camera",
                          segmenter_factory=lambda _p, _s: seg,
                          parameter_overrides=[Parameter("wait_for_image", value=0.0),
                                               Parameter("depth_tolerance", value=0.01)])
    client = Node("planner", context=ros_context)
    try:
        with spinning(ros_context, node, client, threads=8):
            try:
                for _ in range(300):
                    if node.lifecycle_state() == "active":
                        break
                    time.sleep(0.05)
                from test_node_robot import _depth, _info

                node._on_depth(_depth(4 * 10**9, 2.0))
                node._on_camera_info(_info(4 * 10**9))
                node._on_image(good_image(4))
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
    from test_node_robot import CX, CY, FX, FY

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
