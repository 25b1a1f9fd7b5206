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
What a real robot and planner need from the node, driven through its callbacks.

Depth bound before a slow model runs, depth in another frame refused, request ids on
every path, and parameters that apply at once or say they wait for configure.
"""

from __future__ import annotations

import threading

from fake_models import BoxSegmenter
from node_harness import camera_info, CX, CY, DirectNode, flat_depth, frame_with_depth, FX, FY, good_image
import pytest

pytestmark = [pytest.mark.ros, pytest.mark.integration]


class DepthStream:
    """30 Hz depth + camera_info after the colour frame, as a RealSense publishes them."""

    def __init__(self, node, start_ns: int, metres: float) -> None:
        self.node, self.stamp, self.metres = node, start_ns, metres
        self.sent = 0
        self.enough = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.stamp += 33_333_333
            self.node._on_depth(flat_depth(self.stamp, self.metres))
            self.node._on_camera_info(camera_info(self.stamp))
            self.sent += 1
            if self.sent >= 30:  # three times the depth buffer: the frame's own depth is long gone
                self.enough.set()
            self._stop.wait(1 / 30)

    def start(self) -> "DepthStream":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def test_slow_model_with_30hz_depth_keeps_its_centroid(module_context):
    """The depth of the command's frame is bound before the model runs (1.2 s here)."""
    stream: list[DepthStream] = []
    seg = BoxSegmenter(sleep_s=1.2, while_thinking=lambda: stream[0].enough.wait(30))
    harness = DirectNode(module_context, seg, depth_tolerance=0.01, centroid_erosion_px=0)
    try:
        stamp_ns = frame_with_depth(harness, 3, metres=1.25)
        stream.append(DepthStream(harness.node, stamp_ns, metres=3.0).start())
        res = harness.command("what can I drink from?")
        stream[0].stop()
        assert stream[0].sent >= 30 and len(harness.node.camera().depth) == 10  # the frame's depth left the buffer
        assert res.success and len(res.targets) == 1
        target = res.targets[0]
        assert target.has_centroid
        assert target.centroid.z == pytest.approx(1.25)  # the frame's own depth, not a later one
        u, v = 8 + 4.5, 6 + 3.5  # centre of the 10x8 box at (8, 6)
        assert target.centroid.x == pytest.approx((u - CX) * 1.25 / FX)
        assert target.centroid.y == pytest.approx((v - CY) * 1.25 / FY)
    finally:
        harness.close()


def test_depth_that_arrives_during_inference_is_still_used(module_context):
    """Depth stamped like the frame but published after the command started still counts."""
    harness = DirectNode(module_context, BoxSegmenter(), depth_tolerance=0.01, centroid_erosion_px=0)
    try:
        harness.node._on_image(good_image(5))
        harness.segmenter.while_thinking = lambda: (harness.node._on_depth(flat_depth(5 * 10**9, 0.9)),
                                                    harness.node._on_camera_info(camera_info(5 * 10**9)))
        res = harness.command("what can I drink from?")
        assert res.targets[0].has_centroid and res.targets[0].centroid.z == pytest.approx(0.9)
    finally:
        harness.close()


def test_depth_in_another_frame_gives_no_centroid_and_one_warning(module_context, capfd):
    from rclpy.parameter import Parameter

    harness = DirectNode(module_context, BoxSegmenter(), depth_tolerance=0.01)
    try:
        for stamp in (7, 8):
            frame_with_depth(harness, stamp, 1.0, frame_id="camera_depth_optical_frame")
            res = harness.command("what can I drink from?")
            assert res.success and not res.targets[0].has_centroid
        err = capfd.readouterr().err
        assert err.count("no centroids: depth on") == 1, err
        assert "'camera_depth_optical_frame' but the colour image is in 'fuzz_camera'" in err
        assert "allow_depth_frame_mismatch" in err
        # The user knows it is registered: accepted at once (a runtime parameter).
        result = harness.node.set_parameters([Parameter("allow_depth_frame_mismatch", value=True)])[0]
        assert result.successful
        frame_with_depth(harness, 9, 1.0, frame_id="camera_depth_optical_frame")
        assert harness.command("what can I drink from?").targets[0].has_centroid
    finally:
        harness.close()


def test_amodal_request_keeps_the_visible_mask_and_says_which_was_asked(module_context):
    from m2sa_ros.messages.mask_encoding import amodal_target_mask, target_mask
    from m2sa_ros.msg import Target

    harness = DirectNode(module_context, BoxSegmenter(mask_type="amodal"), depth_tolerance=0.01,
                         centroid_erosion_px=0)
    try:
        frame_with_depth(harness, 11, 1.5)
        target = harness.command("the whole mug, also the hidden part").targets[0]
        assert target.mask_type == Target.MASK_AMODAL
        h, w = 24, 32  # good_image's
        assert target_mask(target, h, w).sum() == 80 and amodal_target_mask(target, h, w).sum() == 100
        assert (target.bbox.x_offset, target.bbox.y_offset, target.bbox.width, target.bbox.height) == (8, 6, 10, 8)
        assert target.has_centroid and target.centroid.y == pytest.approx((6 + 3.5 - CY) * 1.5 / FY)
    finally:
        harness.close()


def test_request_ids_on_the_typed_topic_and_the_service(module_context):
    from m2sa_ros.msg import Command
    from m2sa_ros.srv import Segment

    harness = DirectNode(module_context, BoxSegmenter(), max_image_age=0.5)
    try:
        harness.node._on_image(good_image(1))  # stamped 1 s after the epoch: ancient by the wall clock
        results = harness.results

        def typed(request_id: str, stamp_ns: int):
            n = len(results)
            msg = Command(request_id=request_id, text="what can I drink from?")
            msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(stamp_ns, 10**9)
            harness.node._intake.on_command_stamped(msg)
            harness._cond.acquire()
            try:
                assert harness._cond.wait_for(lambda: len(results) > n, 30)
            finally:
                harness._cond.release()
            return results[n]

        # The command's stamp says when it was given: 0.2 s after the image, young enough.
        res = typed("planner-7", 1_200_000_000)
        assert res.success and res.request_id == "planner-7"
        res = typed("planner-8", 2_000_000_000)  # given 1 s after the image: too old
        assert not res.success and res.error.startswith("image too old: 1.00 s") and res.request_id == "planner-8"
        generated = typed("", 1_100_000_000)
        assert generated.success and generated.request_id and generated.request_id.startswith(harness.node._id_prefix)

        from rclpy.parameter import Parameter

        assert harness.node.set_parameters([Parameter("max_image_age", value=0.0)])[0].successful
        on_service = harness.node._intake.on_service
        response = on_service(Segment.Request(command="what can I drink from?", request_id="srv-1"), Segment.Response())
        assert response.result.success and response.result.request_id == "srv-1"
        response = on_service(Segment.Request(command="what can I drink from?"), Segment.Response())
        assert response.result.request_id and response.result.request_id != "srv-1"
    finally:
        harness.close()


def test_parameters_have_ranges_and_runtime_ones_apply_at_once(module_context, capfd):
    from m2sa_ros.params.node_params import PARAMETERS
    from rclpy.parameter import Parameter

    seg = BoxSegmenter()
    harness = DirectNode(module_context, seg)
    node = harness.node
    try:
        queue = node.describe_parameter("max_queue")
        assert (queue.integer_range[0].from_value, queue.integer_range[0].to_value) == (1, 64)
        assert node.describe_parameter("depth_tolerance").floating_point_range[0].to_value == 10.0
        assert node.describe_parameter("autostart").read_only
        for spec in PARAMETERS:
            text = node.describe_parameter(spec.name).description
            assert ("[applied at once]" in text) == spec.runtime, spec.name

        # Runtime: in effect for the very next command.
        node._on_image(good_image(2))
        assert harness.command("what can I drink from?").success
        ok = node.set_parameters([Parameter("max_image_age", value=0.5), Parameter("mask_threshold", value=1.5),
                                  Parameter("duplicate_iou", value=0.6)])
        assert all(r.successful for r in ok) and not ok[0].reason
        assert node._params.max_image_age == 0.5 and seg.mask_threshold == 1.5 and seg.duplicate_iou == 0.6
        assert harness.command("what can I drink from?").error.startswith("image too old:")

        # Load-time: accepted, but the node says it waits for the next configure (rclpy
        # drops the reason of a successful set, so it is a log line; the descriptor says
        # it too), and nothing changes yet.
        capfd.readouterr()
        later = node.set_parameters([Parameter("max_queue", value=2)])[0]
        assert later.successful
        assert "max_queue: load-time parameter(s), take effect at the next configure" in capfd.readouterr().err
        assert "load-time: takes effect at the next configure" in node.describe_parameter("max_queue").description
        assert node._pipeline.worker.max_queue == 8

        # Out of range or of the wrong type: refused, and the node's log names the value
        # (rclpy's own type check answers the client first, without the name); read-only refused.
        bad = node.set_parameters([Parameter("max_queue", value=0)])[0]
        assert not bad.successful and "max_queue" in bad.reason
        capfd.readouterr()
        wrong = node.set_parameters([Parameter("max_image_age", value="soon")])[0]
        assert not wrong.successful
        assert "parameter set refused: max_image_age='soon': expected float" in capfd.readouterr().err
        assert node._params.max_image_age == 0.5
        assert not node.set_parameters([Parameter("autostart", value=False)])[0].successful
    finally:
        harness.close()
