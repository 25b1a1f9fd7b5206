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
perception_node over real Fast DDS on loopback, with the real tiny M2SA model.

The model is the `tiny` preset with random weights, loaded once for the module. Random
weights rarely say "[SEG]", so a forward hook on its lm_head steers greedy decoding to
a scripted answer; everything after the logits (the [SEG] hidden states, the mask
decoder, upsampling, answer parsing) is the real model. Other test doubles wrap the
Segmenter to inject a failure, slow it down (to cancel mid-generation) or replace
the masks with a known box (centroid geometry).

The model (the ``tiny`` fixture) and the ``graph`` harness (node_harness.Graph) are in
tests/ros/conftest.py, the doubles (ScriptedSegmenter) in tests/fake_models.py and the
frames (random_scene, stamped_image) in tests/scenes.py: other node tests over DDS share them.
"""

from __future__ import annotations

from typing import Any

from fake_models import ScriptedSegmenter
from node_harness import action_client, now_ns, wait_until
import numpy as np
import pytest
from scenes import H, random_scene, stamped_image, W

pytestmark = [pytest.mark.ros, pytest.mark.integration]


# ----------------------------------------------------------------------------- ROS harness
def one_more_command(commands: Any, results: list, text: str = "and is anything else here?") -> None:
    """
    Send one more command, wait for its result and take it out of ``results``.

    The node answers one command after another on one publisher, so a second answer to an
    earlier command would have been published before this one's: once it is in,
    ``results`` holds everything the earlier commands got, without a wait of fixed length.
    """
    from std_msgs.msg import String

    commands.publish(String(data=text))
    wait_until(lambda: any(r.command == text for r in results), 60, "the last command's result")
    assert results[-1].command == text, [r.command for r in results]
    results.pop()


def _core_target(msg) -> Any:
    from m2sa_core.types import Granularity, Target

    return Target(label=msg.label, object_name=msg.object_name, instance=msg.instance, part_name=msg.part_name,
                  granularity=Granularity(msg.granularity), mask=_mask(msg) > 0, score=msg.score)


def _mask(target_msg, height: int = H, width: int = W) -> np.ndarray:
    """Return a target's visible mask as a client reads it (v5: its cropped PNG), mono8 0 / 255."""
    from m2sa_ros.messages.mask_encoding import PNG_FORMAT, target_mask

    assert target_msg.mask.height == 0 and target_msg.mask_crop.format == PNG_FORMAT  # no full frame by default
    return target_mask(target_msg, height, width).astype(np.uint8) * 255


# ----------------------------------------------------------------------------- tests
def test_topics_image_and_command_give_one_result_with_masks_overlay_and_diagnostics(graph, tiny):
    from diagnostic_msgs.msg import DiagnosticArray
    from m2sa_core.visualize import overlay_targets
    from m2sa_ros.msg import SegmentationResult, Target
    from sensor_msgs.msg import Image
    from std_msgs.msg import String

    seg = ScriptedSegmenter(tiny)
    node = graph.add_node(seg, diagnostics_period=0.2)
    graph.start(node)
    results = graph.collect(SegmentationResult, "result")
    overlays = graph.collect(Image, "overlay", 5)
    diagnostics = graph.collect(DiagnosticArray, "/diagnostics", 10)
    wait_until(lambda: node.camera().outputs.overlay.get_subscription_count() > 0, 10, "overlay subscription")
    rgb = random_scene()
    stamp = now_ns(node)
    graph.publish_frame(node, graph.publisher(Image, "image", 1), stamped_image(rgb, stamp))
    commands = graph.publisher(String, "command")
    commands.publish(String(data="I want to turn on the TV"))
    wait_until(lambda: results, what="a result")
    res = results[0]
    assert res.success, res.error
    assert res.error == "" and res.request_id and res.command == "I want to turn on the TV"
    assert (res.height, res.width) == (H, W)
    assert res.header.frame_id == "camera_optical"
    assert res.header.stamp.sec * 10**9 + res.header.stamp.nanosec == stamp
    assert res.answer == "Press the television_set_1's button or the remote_control_1's button."
    assert [(t.label, t.object_name, t.instance, t.part_name, t.granularity) for t in res.targets] == [
        ("television_set_1's button", "television_set", 1, "button", Target.GRANULARITY_PART),
        ("remote_control_1's button", "remote_control", 1, "button", Target.GRANULARITY_PART)]
    for target in res.targets:
        mask = _mask(target)
        assert mask.shape == (H, W) and set(np.unique(mask)) <= {0, 255}
        assert 0.0 <= target.score <= 1.0 and not target.has_centroid  # no depth published
        assert target.amodal_mask.height == 0 and not target.amodal_mask_crop.format
        if mask.any():
            ys, xs = np.nonzero(mask)
            assert (target.bbox.x_offset, target.bbox.y_offset) == (xs.min(), ys.min())
            assert (target.bbox.width, target.bbox.height) == (xs.max() - xs.min() + 1, ys.max() - ys.min() + 1)
    assert res.inference_ms > 0
    overlay = wait_until(lambda: overlays, 10, "an overlay")[0]
    assert (overlay.encoding, overlay.height, overlay.width) == ("rgb8", H, W)
    pixels = np.frombuffer(bytes(overlay.data), np.uint8).reshape(H, W, 3)
    # The overlay is m2sa_core.visualize's drawing of exactly these targets on exactly this image.
    expected = overlay_targets(rgb, [_core_target(t) for t in res.targets])
    np.testing.assert_array_equal(pixels, expected)
    status = wait_until(lambda: [d for d in diagnostics if {kv.key: kv.value for kv in d.status[0].values}
                                 .get("results") == "1"], 10, "diagnostics after the result")[0].status[0]
    values = {kv.key: kv.value for kv in status.values}
    assert values["device"] == "cpu" and values["state"] == "active" and values["queue_depth"] == "0"
    assert float(values["last_latency_ms"]) > 0 and "cache_misses" in values
    assert "perception_node" in status.name
    one_more_command(commands, results)  # last: its result would change the counts read above
    assert len(results) == 1, "exactly one result per command"


def test_service_uses_the_latest_frame_or_the_request_image(graph, tiny):
    from m2sa_ros.srv import Segment
    from sensor_msgs.msg import Image

    node = graph.add_node(ScriptedSegmenter(tiny))
    graph.start(node)
    images = graph.publisher(Image, "image", 1)
    graph.publish_frame(node, images, stamped_image(random_scene(seed=8), now_ns(node) - 10**9, frame_id="older"))
    newest = now_ns(node)
    graph.publish_frame(node, images, stamped_image(random_scene(), newest))  # keep-latest: this one is used
    client = graph.client.create_client(Segment, "segment")
    wait_until(client.service_is_ready, 10, "the segment service")

    latest = client.call(Segment.Request(command="turn on the TV"), timeout_sec=60)
    assert latest.result.success, latest.result.error
    stamp = latest.result.header.stamp
    assert (stamp.sec * 10**9 + stamp.nanosec, latest.result.header.frame_id) == (newest, "camera_optical")

    # The request's own max_image_age overrides the node's (0 = any): once the node's clock puts
    # the frame past it, which the request's reception can only add to.
    wait_until(lambda: now_ns(node) - newest > 0.1 * 10**9, 10, "the frame older than 0.1 s")
    stale = client.call(Segment.Request(command="turn on the TV", max_image_age=0.05), timeout_sec=60).result
    assert not stale.success and stale.error.startswith("image too old:") and "max_image_age 0.05 s" in stale.error
    assert (latest.result.height, latest.result.width) == (H, W) and len(latest.result.targets) == 2

    own = Segment.Request(command="what can I press?")
    bgr = random_scene(80, 60, seed=3)[:, :, ::-1]
    own.image = stamped_image(bgr, 123, frame_id="wrist_camera", encoding="bgr8")
    response = client.call(own, timeout_sec=60)
    res = response.result
    assert res.success, res.error
    assert (res.height, res.width, res.header.frame_id) == (60, 80, "wrist_camera")
    assert all(_mask(t, 60, 80).shape == (60, 80) for t in res.targets)
    assert res.request_id and res.request_id != latest.result.request_id

    bad = Segment.Request(command="what can I press?")
    bad.image = stamped_image(random_scene(8, 6)[:, :, :2].copy(), 5, encoding="16UC1")
    res = client.call(bad, timeout_sec=60).result
    assert not res.success and res.error.startswith("bad image:") and "encoding '16UC1' has no colour" in res.error

    # Blocking calls beyond the executor's spare threads are refused, not left hanging.
    node.blocking_call_limit = 0
    res = client.call(Segment.Request(command="turn on the TV"), timeout_sec=30).result
    assert not res.success and res.error.startswith("queue full: 0 service/action calls")
    node.blocking_call_limit = None
    assert client.call(Segment.Request(command="turn on the TV"), timeout_sec=60).result.success


def test_action_streams_feedback_and_honours_cancel(graph, tiny):
    from action_msgs.msg import GoalStatus
    from m2sa_ros.action import Segment
    from sensor_msgs.msg import Image

    seg = ScriptedSegmenter(tiny)
    node = graph.add_node(seg)
    graph.start(node)
    graph.publish_frame(node, graph.publisher(Image, "image", 1), stamped_image(random_scene(), now_ns(node)))
    client = action_client(graph.client, Segment, "segment")
    wait_until(client.server_is_ready, 10, "the segment action")
    # Feedback is a topic and the result a service: DDS does not order one against the
    # other, and rclpy's action client drops a goal's feedback once its result is in, so
    # a planner's callback may miss the last stage. What the node publishes is read
    # from the feedback topic itself, which keeps every message in order.
    published: list = []
    topic = graph.client.create_subscription(Segment.Impl.FeedbackMessage, "segment/_action/feedback",
                                             lambda m: graph._append(published, m), 100)
    wait_until(lambda: topic.get_publisher_count() > 0, 10, "the feedback topic")

    feedback: list = []
    future = client.send_goal_async(Segment.Goal(command="turn on the TV"),
                                    feedback_callback=lambda fb: feedback.append(fb.feedback))
    handle = wait_until(lambda: future.done() and future.result(), 30, "goal acceptance")
    result = wait_until(lambda: handle.get_result_async(), 5)
    done = wait_until(lambda: result.done() and result.result(), 60, "the result")
    assert done.status == GoalStatus.STATUS_SUCCEEDED and done.result.result.success
    wait_until(lambda: any(m.feedback.stage == "decoding" for m in published), 10, "the decoding feedback")
    goal_id = bytes(handle.goal_id.uuid)
    mine = [m.feedback for m in published if bytes(m.goal_id.uuid) == goal_id]
    seen = iter(mine)  # the callback's feedback is the published feedback, in order, perhaps cut short
    assert all(any(f == p for p in seen) for f in feedback), "action feedback out of order"
    stages = [f.stage for f in mine]
    assert stages.index("encoding") < stages.index("generating") < stages.index("decoding")
    partials = [f.partial_answer for f in mine if f.stage == "generating" and f.partial_answer]
    assert partials and done.result.result.answer.startswith(partials[0].rstrip("."))
    assert partials[-1] == done.result.result.answer
    # Once per change, the answer so far never shorter than before, the last stage with
    # the whole answer: the script's [SEG] tokens change nothing the answer text shows.
    sent = [(f.stage, f.partial_answer) for f in mine]
    assert all(a != b for a, b in zip(sent, sent[1:])), sent
    assert all(len(a[1]) <= len(b[1]) for a, b in zip(sent, sent[1:])), sent
    assert sent[-1] == ("decoding", done.result.result.answer)

    # Cancel while generating: the model is slowed to 0.1 s per token.
    seg.delay_per_token = 0.1
    seg.generating.clear()
    future = client.send_goal_async(Segment.Goal(command="turn on the TV"))
    handle = wait_until(lambda: future.done() and future.result(), 30, "goal acceptance")
    assert seg.generating.wait(30)
    cancel = handle.cancel_goal_async()
    wait_until(cancel.done, 10, "the cancel response")
    result = handle.get_result_async()
    done = wait_until(lambda: result.done() and result.result(), 30, "the cancelled result")
    assert done.status == GoalStatus.STATUS_CANCELED
    assert done.result.result.error.startswith("cancelled") and not done.result.result.success

    seg.delay_per_token = 0.0  # the node still answers the next goal
    future = client.send_goal_async(Segment.Goal(command="turn on the TV"))
    handle = wait_until(lambda: future.done() and future.result(), 30, "goal acceptance")
    result = handle.get_result_async()
    assert wait_until(lambda: result.done() and result.result(), 60).status == GoalStatus.STATUS_SUCCEEDED
    client.destroy()


def test_lifecycle_transitions_over_the_lifecycle_services(graph, tiny):
    from lifecycle_msgs.msg import State, Transition
    from lifecycle_msgs.srv import ChangeState, GetState
    from m2sa_ros.srv import Segment
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import Image

    seg = ScriptedSegmenter(tiny)
    node = graph.add_node(seg, namespace="lc", max_queue=0)  # invalid: configure must fail
    change = graph.client.create_client(ChangeState, "/lc/perception_node/change_state")
    get = graph.client.create_client(GetState, "/lc/perception_node/get_state")
    wait_until(lambda: change.service_is_ready() and get.service_is_ready(), 10, "lifecycle services")

    def transition(tid: int) -> bool:
        return change.call(ChangeState.Request(transition=Transition(id=tid)), timeout_sec=60).success

    def state() -> int:
        return get.call(GetState.Request(), timeout_sec=10).current_state.id

    service = graph.client.create_client(Segment, "/lc/segment")
    assert state() == State.PRIMARY_STATE_UNCONFIGURED
    assert not transition(Transition.TRANSITION_CONFIGURE), "max_queue=0 must fail configure"
    assert state() == State.PRIMARY_STATE_UNCONFIGURED and node._segmenter is None
    node.set_parameters([Parameter("max_queue", value=2)])
    assert transition(Transition.TRANSITION_CONFIGURE)
    assert state() == State.PRIMARY_STATE_INACTIVE and node._segmenter is seg
    assert not service.wait_for_service(0.5), "inactive node must not offer the service"

    for _ in range(2):  # activate / deactivate twice: interfaces come and go cleanly
        assert transition(Transition.TRANSITION_ACTIVATE)
        assert state() == State.PRIMARY_STATE_ACTIVE
        graph.publish_frame(node, graph.publisher(Image, "/lc/image", 1), stamped_image(random_scene(), now_ns(node)))
        assert service.wait_for_service(10)
        assert service.call(Segment.Request(command="turn on the TV"), timeout_sec=60).result.success
        assert transition(Transition.TRANSITION_DEACTIVATE)
        assert state() == State.PRIMARY_STATE_INACTIVE
        wait_until(lambda: not service.service_is_ready(), 10, "the service to go away")

    assert transition(Transition.TRANSITION_CLEANUP)
    assert state() == State.PRIMARY_STATE_UNCONFIGURED and node._segmenter is None
    assert transition(Transition.TRANSITION_CONFIGURE) and transition(Transition.TRANSITION_ACTIVATE)
    graph.publish_frame(node, graph.publisher(Image, "/lc/image", 1), stamped_image(random_scene(), now_ns(node)))
    assert service.wait_for_service(10)
    assert service.call(Segment.Request(command="turn on the TV"), timeout_sec=60).result.success


def test_each_error_yields_its_result_and_the_next_command_succeeds(graph, tiny):
    from m2sa_ros.msg import SegmentationResult
    from sensor_msgs.msg import Image
    from std_msgs.msg import String

    seg = ScriptedSegmenter(tiny)
    node = graph.add_node(seg, max_image_age=5.0, max_command_length=50)
    graph.start(node)
    results = graph.collect(SegmentationResult, "result")
    commands = graph.publisher(String, "command")
    images = graph.publisher(Image, "image", 1)

    def ask(text: str) -> Any:
        n = len(results)
        commands.publish(String(data=text))
        wait_until(lambda: len(results) > n, 60, f"the result of {text!r}")
        return results[n]

    def good_frame() -> None:
        graph.publish_frame(node, images, stamped_image(random_scene(), now_ns(node)))

    res = ask("turn on the TV")  # before any image: waits wait_for_image (0.2 s), then fails
    assert not res.success and res.error.startswith("no image yet") and "/image" in res.error
    good_frame()
    assert ask("turn on the TV").success

    cases = [
        ("bad encoding", lambda: graph.publish_frame(node, images, stamped_image(random_scene()[:, :, :2].copy(),
                                                                                 now_ns(node), encoding="8UC2")),
         "turn on the TV", "bad image:"),
        ("image too old", lambda: graph.publish_frame(node, images, stamped_image(random_scene(),
                                                                                  now_ns(node) - 60 * 10**9)),
         "turn on the TV", "image too old:"),
        ("empty command", None, "   ", "empty command"),
        ("control characters only", None, "\x07 \x1b\x08", "empty command"),
        ("command too long", None, "x" * 51, "command too long: 51 characters > max_command_length 50"),
        ("model failure", lambda: (good_frame(), setattr(seg, "fail_next", 1)), "turn on the TV",
         "model failure: RuntimeError: injected model failure"),
    ]
    for name, setup, text, error in cases:
        (setup or good_frame)()
        res = ask(text)
        assert not res.success and res.error.startswith(error), (name, res.error)
        assert res.targets == [] and res.command == text
        good_frame()
        res = ask("turn on the TV")
        assert res.success, f"after {name}: {res.error}"
    good_frame()
    one_more_command(commands, results)
    assert len(results) == 2 + 2 * len(cases), "one result per command, no extra"
    assert len({r.request_id for r in results}) == len(results)


def test_burst_of_50_commands_gets_50_results_none_lost_none_duplicated(graph, tiny):
    from m2sa_ros.msg import SegmentationResult
    from sensor_msgs.msg import Image
    from std_msgs.msg import String

    node = graph.add_node(ScriptedSegmenter(tiny), max_queue=2)
    graph.start(node)
    results = graph.collect(SegmentationResult, "result")
    graph.publish_frame(node, graph.publisher(Image, "image", 1), stamped_image(random_scene(), now_ns(node)))
    commands = graph.publisher(String, "command")
    for i in range(50):
        commands.publish(String(data=f"command {i}"))
    wait_until(lambda: len(results) >= 50, 120, "50 results")
    one_more_command(commands, results)  # the queue has drained: this one runs after all the others
    assert len(results) == 50
    assert len({r.request_id for r in results}) == 50, "duplicated results"
    assert sorted(r.command for r in results) == sorted(f"command {i}" for i in range(50))
    ok = [r for r in results if r.success]
    full = [r for r in results if not r.success]
    assert ok and full, "with max_queue=2 a burst must both run and overflow"
    assert all(r.error.startswith("queue full") for r in full)
    assert all(len(r.targets) == 2 for r in ok)


def _depth_msg(depth: np.ndarray, stamp_ns: int, encoding: str):
    from sensor_msgs.msg import Image

    msg = Image(height=depth.shape[0], width=depth.shape[1], encoding=encoding, step=depth.shape[1] * depth.itemsize)
    msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(stamp_ns, 10**9)
    msg.header.frame_id = "camera_optical"
    msg.data = depth.tobytes()
    return msg


def test_centroids_from_depth_with_known_geometry(graph, tiny, capfd):
    from m2sa_ros.msg import SegmentationResult
    from sensor_msgs.msg import CameraInfo, Image
    from std_msgs.msg import String

    seg = ScriptedSegmenter(tiny)
    seg.box = (40, 10, 16, 20)  # every target's mask: columns 40..55, rows 10..29
    node = graph.add_node(seg, centroid_erosion_px=2, depth_tolerance=0.01)
    graph.start(node)
    results = graph.collect(SegmentationResult, "result")
    images = graph.publisher(Image, "image", 1)
    depth_pub = graph.publisher(Image, "depth", 5)
    info_pub = graph.publisher(CameraInfo, "camera_info", 5)
    commands = graph.publisher(String, "command")
    fx, fy, cx, cy = 80.0, 90.0, 31.5, 23.5

    def frame(depth: np.ndarray, encoding: str, size=(W, H)) -> Any:
        stamp = now_ns(node)
        info = CameraInfo(width=size[0], height=size[1], k=[fx, 0.0, cx, 0.0, fy, cy, 0.0, 0.0, 1.0])
        info.header.stamp.sec, info.header.stamp.nanosec = divmod(stamp, 10**9)
        info_pub.publish(info)
        depth_pub.publish(_depth_msg(depth, stamp, encoding))
        wait_until(lambda: len(node.camera().depth) and node.camera().depth.nearest(stamp, 0) is not None, 10, "depth")
        wait_until(lambda: node.camera().camera_info.nearest(stamp, 0) is not None, 10, "camera_info")
        graph.publish_frame(node, images, stamped_image(random_scene(*size), stamp))
        n = len(results)
        commands.publish(String(data="turn on the TV"))
        wait_until(lambda: len(results) > n, 60, "a result")
        return results[n]

    # A wall at 2 m with a box face at 1.25 m exactly behind the mask (16UC1 millimetres).
    mm = np.full((H, W), 2000, np.uint16)
    mm[10:30, 40:56] = 1250
    mm[15, 45] = 0  # a hole: invalid, ignored
    res = frame(mm, "16UC1")
    assert res.success and res.targets
    u, v = 47.5, 19.5  # centre of the box (erosion is symmetric)
    for target in res.targets:
        assert target.has_centroid
        assert target.centroid.z == pytest.approx(1.25, abs=1e-6)
        assert target.centroid.x == pytest.approx((u - cx) * 1.25 / fx, abs=2e-3)
        assert target.centroid.y == pytest.approx((v - cy) * 1.25 / fy, abs=2e-3)

    metres = np.full((H, W), np.nan, np.float32)  # 32FC1 metres, NaN outside the box
    metres[10:30, 40:56] = 0.8
    res = frame(metres, "32FC1")
    assert all(t.has_centroid and t.centroid.z == pytest.approx(0.8) for t in res.targets)

    capfd.readouterr()
    small = np.full((H // 2, W // 2), 1000, np.uint16)
    for _ in range(2):  # a depth image of another size: no centroid, reported once
        res = frame(small, "16UC1", size=(W, H))
        assert res.success and res.targets and not any(t.has_centroid for t in res.targets)
    err = capfd.readouterr().err
    assert err.count("depth image is 32x24 but the colour image is 64x48") == 1, err


def test_two_nodes_in_two_namespaces_side_by_side(graph, tiny):
    from m2sa_ros.msg import SegmentationResult
    from sensor_msgs.msg import Image
    from std_msgs.msg import String

    seg = ScriptedSegmenter(tiny)
    sizes = {"robot1": (64, 48), "robot2": (80, 60)}
    nodes, results = {}, {}
    for ns, (w, h) in sizes.items():
        nodes[ns] = graph.add_node(seg, namespace=ns)
        graph.start(nodes[ns])
        results[ns] = graph.collect(SegmentationResult, f"/{ns}/result")
        graph.publish_frame(nodes[ns], graph.publisher(Image, f"/{ns}/image", 1),
                            stamped_image(random_scene(w, h), now_ns(nodes[ns]), frame_id=f"{ns}_camera"))
    pubs = {ns: graph.publisher(String, f"/{ns}/command") for ns in sizes}
    for i in range(2):
        for ns in sizes:
            pubs[ns].publish(String(data=f"{ns} command {i}"))
    wait_until(lambda: all(len(r) >= 2 for r in results.values()), 60, "results in both namespaces")
    for ns in sizes:
        one_more_command(pubs[ns], results[ns], f"{ns} and is anything else here?")
    for ns, (w, h) in sizes.items():
        assert len(results[ns]) == 2
        for res in results[ns]:
            assert res.success and res.command.startswith(ns)
            assert (res.width, res.height, res.header.frame_id) == (w, h, f"{ns}_camera")


def test_compressed_png_input_is_decoded_exactly(graph, tiny):
    import cv2
    from m2sa_ros.msg import SegmentationResult
    from sensor_msgs.msg import CompressedImage, Image
    from std_msgs.msg import String

    seg = ScriptedSegmenter(tiny)
    seg.box = (0, 0, 1, 1)  # tiny masks so the overlay shows the decoded image almost everywhere
    node = graph.add_node(seg, use_compressed=True)
    graph.start(node)
    results = graph.collect(SegmentationResult, "result")
    overlays = graph.collect(Image, "overlay", 5)
    wait_until(lambda: node.camera().outputs.overlay.get_subscription_count() > 0, 10, "overlay subscription")
    rgb = random_scene(80, 60, seed=5)
    ok, png = cv2.imencode(".png", cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))
    msg = CompressedImage(format="rgb8; png compressed bgr8", data=png.tobytes())
    msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(now_ns(node), 10**9)
    graph.publish_frame(node, graph.publisher(CompressedImage, "image/compressed", 1), msg)
    graph.publisher(String, "command").publish(String(data="turn on the TV"))
    res = wait_until(lambda: results, 60, "a result")[0]
    assert res.success and (res.width, res.height) == (80, 60)
    overlay = wait_until(lambda: overlays, 10, "an overlay")[0]
    pixels = np.frombuffer(bytes(overlay.data), np.uint8).reshape(60, 80, 3)
    np.testing.assert_array_equal(pixels[20:, 20:], rgb[20:, 20:])  # away from mask and label


def test_compressed_frames_are_decoded_only_when_a_command_takes_one(graph, tiny, monkeypatch):
    """An idle node decodes nothing; a command decodes the newest frame, once (latest_frame.py)."""
    import cv2
    import m2sa_ros.perception_node as perception_node
    from m2sa_ros.msg import SegmentationResult
    from sensor_msgs.msg import CompressedImage
    from std_msgs.msg import String

    decoded: list[int] = []
    real = perception_node.compressed_to_rgb

    def counting(msg, what):
        decoded.append(msg.header.stamp.nanosec)
        return real(msg, what=what)

    monkeypatch.setattr(perception_node, "compressed_to_rgb", counting)
    node = graph.add_node(ScriptedSegmenter(tiny), use_compressed=True)
    graph.start(node)
    results = graph.collect(SegmentationResult, "result")
    images = graph.publisher(CompressedImage, "image/compressed", 1)
    for i in range(5):
        _, jpeg = cv2.imencode(".jpg", cv2.cvtColor(random_scene(80, 60, seed=i), cv2.COLOR_RGB2BGR))
        msg = CompressedImage(format="jpeg", data=jpeg.tobytes())
        msg.header.stamp.sec, msg.header.stamp.nanosec = now_ns(node) // 10**9, i + 1
        graph.publish_frame(node, images, msg)
    assert decoded == []  # five frames held, none decoded: nobody asked
    graph.publisher(String, "command").publish(String(data="turn on the TV"))
    res = wait_until(lambda: results, 60, "a result")[0]
    assert res.success and (res.width, res.height) == (80, 60)
    assert decoded == [5]  # the newest, once


def test_amodal_parameter_fills_every_targets_amodal_mask_and_full_frame_masks_adds_v4s(graph, tiny):
    from m2sa_ros.messages.image_conversion import msg_to_mask
    from m2sa_ros.messages.mask_encoding import amodal_target_mask, PNG_FORMAT, target_mask
    from m2sa_ros.srv import Segment
    from rclpy.parameter import Parameter

    node = graph.add_node(ScriptedSegmenter(tiny, amodal=True), amodal=True)
    graph.start(node)
    client = graph.client.create_client(Segment, "segment")
    wait_until(client.service_is_ready, 10, "the segment service")
    request = Segment.Request(command="turn on the TV")
    request.image = stamped_image(random_scene(), 7)
    res = client.call(request, timeout_sec=60).result
    assert res.success, res.error
    assert len(res.targets) == 2
    for target in res.targets:  # v5: cropped to its box, a PNG with the image's header; no full frame
        assert target.amodal_mask_crop.format == PNG_FORMAT and target.amodal_mask.height == 0
        assert target.amodal_mask_crop.header.frame_id == "camera_optical"
        assert amodal_target_mask(target, H, W).shape == (H, W)

    # full_frame_masks (a runtime parameter): v4's full-frame mono8 masks too, the same pixels.
    assert node.set_parameters([Parameter("full_frame_masks", value=True)])[0].successful
    full = client.call(request, timeout_sec=60).result
    assert full.success, full.error
    for target, cropped in zip(full.targets, res.targets):
        for image in (target.mask, target.amodal_mask):
            assert image.encoding == "mono8" and (image.height, image.width, image.step) == (H, W, W)
            assert set(np.unique(np.frombuffer(bytes(image.data), np.uint8))) <= {0, 255}
            assert image.header.frame_id == "camera_optical"
        np.testing.assert_array_equal(msg_to_mask(target.mask), target_mask(cropped, H, W))
        np.testing.assert_array_equal(msg_to_mask(target.amodal_mask), amodal_target_mask(cropped, H, W))
        assert target.mask_crop == cropped.mask_crop  # the crops are there as before
