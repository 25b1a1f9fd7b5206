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
One node, several cameras, one model.

Per-camera topics, service and actions over real DDS, one result per command on its
own camera's topic with its own camera's frame, commands of both cameras batched into
one model call, and round-robin fairness.

The model is the shipped ``models/m2sa-tiny-synth`` (trained: its answers name targets),
wrapped to count the model calls and their batch sizes and to hold the first call until
the test has queued commands behind it.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from fake_models import BoxSegmenter, TrackingBoxes
from m2sa_core.shipped_model import SHIPPED_MODEL
from m2sa_ros.cameras.camera_names import check_camera_names
from m2sa_ros.messages.mask_encoding import target_mask
from m2sa_ros.worker import CommandWorker, Job
from node_harness import action_client, Graph, now_ns, wait_until
import pytest
from scenes import random_scene, stamped_image

pytestmark = pytest.mark.integration

MODEL = SHIPPED_MODEL
HEAD, WRIST = (48, 64), (60, 80)  # (height, width) of each camera's frames: results must carry their own


# ----------------------------------------------------------------------------- without ROS
def _drain(worker: CommandWorker, n: int, ran: list) -> None:
    deadline = time.monotonic() + 10
    while sum(len(b) for b in ran) < n and time.monotonic() < deadline:
        time.sleep(0.01)


class _Batching:
    """A job handler recording what ran together; ``gate`` holds the first run back."""

    def __init__(self, ran: list, gate: threading.Event) -> None:
        self.ran, self.gate = ran, gate

    def run(self, job: Job) -> None:
        self.gate.wait(5)
        self.ran.append([job.payload])

    def run_batch(self, jobs: list[Job]) -> None:
        self.ran.append([j.payload for j in jobs])

    def reject(self, job: Job, reason: str) -> None:
        pass

    def crashed(self, job: Job, exc: BaseException) -> None:
        pass


def test_lanes_are_served_round_robin_and_waiting_heads_form_one_batch():
    gate, ran = threading.Event(), []
    handler = _Batching(ran, gate)
    worker = CommandWorker(max_queue=4, lanes=("head", "wrist"), max_batch=2)
    try:
        assert worker.submit(Job("h0", handler, lane="head"))
        wait_until(lambda: worker.busy, 5, "the first job to run")
        for name in ("h1", "h2", "h3"):
            assert worker.submit(Job(name, handler, lane="head"))
        assert worker.submit(Job("w0", handler, lane="wrist"))
        assert worker.depth_of("head") == 3 and worker.depth_of("wrist") == 1 and worker.depth == 4
        gate.set()
        _drain(worker, 5, ran)
        # The wrist's one command goes in the first batch although the head queued first;
        # then the head alone fills a batch of max_batch.
        assert ran == [["h0"], ["w0", "h1"], ["h2", "h3"]]
        assert worker.batches == 2
    finally:
        worker.stop("stopped")


def test_tracked_frames_never_join_a_batch_and_a_full_lane_does_not_block_another():
    ran: list = []
    handler = _Batching(ran, threading.Event())
    worker = CommandWorker(max_queue=1, lanes=("a", "b"), max_batch=4)
    try:
        worker.submit(Job("a0", handler, lane="a"))
        wait_until(lambda: worker.busy, 5, "the first job to run")
        assert worker.submit(Job("a1", handler, lane="a")) and not worker.submit(Job("a2", handler, lane="a"))
        assert worker.submit(Job("b0", handler, lane="b"))  # b has a queue of its own (a is full)
        assert worker.submit(Job("track-a", handler, lane="a", bounded=False, batchable=False))
        handler.gate.set()
        _drain(worker, 4, ran)
        assert ran[0] == ["a0"] and sorted(ran[1]) == ["a1", "b0"] and ran[2] == ["track-a"]
    finally:
        worker.stop("stopped")


@pytest.mark.parametrize("names, complaint", [
    (["head", "head"], "duplicate camera name(s) 'head'"),
    (["head", "1st"], "invalid camera name(s) '1st'"),
    (["head", ""], "invalid camera name(s) ''"),
    (["with space"], "invalid camera name(s) 'with space'"),
    ("head", "expected a list"),
])
def test_bad_camera_names_are_one_clear_line(names, complaint):
    assert complaint in check_camera_names(names)
    assert check_camera_names(["head", "wrist", "arm/gripper"]) is None and check_camera_names([]) is None


def test_segment_many_with_one_frame_per_command_equals_segment_on_each():
    from m2sa_core.inference import Segmenter

    seg = Segmenter.from_pretrained(str(MODEL), max_new_tokens=24)
    frames = [random_scene(HEAD[1], HEAD[0], seed=1), random_scene(WRIST[1], WRIST[0], seed=2)]
    commands = ["Which objects can hold a drink?", "I want to turn on the TV. What should I press?"]
    alone = [seg.segment(f, c) for f, c in zip(frames, commands)]
    batched = seg.segment_many(frames, commands, keep_prompts=[True, False])
    for a, b, frame in zip(alone, batched, frames):
        assert a.raw_answer == b.raw_answer and [t.label for t in a.targets] == [t.label for t in b.targets]
        for x, y in zip(a.targets, b.targets):
            assert x.mask.shape == frame.shape[:2] and (x.mask != y.mask).mean() < 1e-3
    assert batched[0].prompts is not None and batched[1].prompts is None
    with pytest.raises(ValueError, match="as many frames"):
        seg.segment_many(frames, commands[:1])


# ----------------------------------------------------------------------------- over DDS
class CountingSegmenter:
    """
    The real Segmenter, counted: ("segment", 1) or ("segment_many", n) per model call.

    ``hold`` keeps the first call waiting until released, so the test can queue commands
    on both cameras behind it - the situation in which they must be batched.
    """

    def __init__(self, real: Any, hold: bool = False) -> None:
        self.real = real
        self.calls: list[tuple[str, int, list[str]]] = []
        self.release = threading.Event()
        self.started = threading.Event()
        if not hold:
            self.release.set()
        self.mask_threshold = real.mask_threshold

    @property
    def cache_stats(self) -> dict[str, int]:
        return self.real.cache_stats

    def _enter(self, kind: str, commands: list[str]) -> None:
        self.calls.append((kind, len(commands), commands))
        self.started.set()
        assert self.release.wait(60)

    def segment(self, image, command, **kwargs):
        self._enter("segment", [command])
        return self.real.segment(image, command, **kwargs)

    def segment_many(self, images, commands, frame_keys=None, **kwargs):
        self._enter("segment_many", list(commands))
        return self.real.segment_many(images, commands, frame_keys, **kwargs)

    def track(self, *args, **kwargs):
        return self.real.track(*args, **kwargs)


@pytest.fixture(scope="module")
def model():
    from m2sa_core.inference import Segmenter

    return Segmenter.from_pretrained(str(MODEL), max_new_tokens=24, frame_cache_size=8)


def _two_camera_node(graph: Graph, seg: Any, **params: Any):
    """Start a node serving head and wrist, each holding a frame of its own size and frame_id."""
    from sensor_msgs.msg import Image

    node = graph.add_node(seg, cameras=["head", "wrist"], **params)
    graph.start(node)
    frames = {}
    for name, (h, w), seed in (("head", HEAD, 1), ("wrist", WRIST, 2)):
        rgb = random_scene(w, h, seed=seed)
        _give_frame(node, name, graph.publisher(Image, f"{name}/image", 1),
                    stamped_image(rgb, now_ns(node), frame_id=f"{name}_optical"))
        frames[name] = rgb
    return node, frames


def _give_frame(node: Any, name: str, pub: Any, msg: Any) -> None:
    """Publish an image to camera ``name`` and wait until that camera holds it as its latest frame."""
    camera = node.camera(name)
    before = camera.latest.get()
    pub.publish(msg)
    wait_until(lambda: camera.latest.get() is not before, 10, f"the {name} image")


def _stamp_ns(stamp: Any) -> int:
    return int(stamp.sec) * 10**9 + int(stamp.nanosec)


def _check(result: Any, camera: str) -> None:
    h, w = HEAD if camera == "head" else WRIST
    assert result.success, result.error
    assert (result.header.frame_id, result.height, result.width) == (f"{camera}_optical", h, w)
    assert all(target_mask(t, result.height, result.width).shape == (h, w) for t in result.targets)


def test_two_cameras_each_command_one_result_on_its_own_topic_and_waiting_commands_batched(graph, model):
    from diagnostic_msgs.msg import DiagnosticArray
    from m2sa_ros.msg import Command, SegmentationResult

    seg = CountingSegmenter(model, hold=True)
    node, frames = _two_camera_node(graph, seg, diagnostics_period=0.2)
    results = {name: graph.collect(SegmentationResult, f"{name}/result") for name in ("head", "wrist")}
    unprefixed = graph.collect(SegmentationResult, "result")
    diagnostics = graph.collect(DiagnosticArray, "/diagnostics", 10)
    pubs = {name: graph.publisher(Command, f"{name}/command_stamped") for name in ("head", "wrist")}
    texts = {"head-0": "Which objects can hold a drink?", "head-1": "Show me the handle of the mug.",
             "wrist-0": "I want to turn on the TV. What should I press?", "wrist-1": "What can I use to cut the bread?"}
    pubs["head"].publish(Command(request_id="head-0", text=texts["head-0"]))
    assert seg.started.wait(30)  # head-0 holds the model; the rest wait together
    for rid in ("head-1", "wrist-0", "wrist-1"):
        pubs[rid.split("-")[0]].publish(Command(request_id=rid, text=texts[rid]))
    wait_until(lambda: node._pipeline.worker.depth == 3, 10, "three commands queued")
    seg.release.set()
    wait_until(lambda: len(results["head"]) >= 2 and len(results["wrist"]) >= 2, 60, "four results")
    calls = list(seg.calls)
    # One more command per camera, one at a time (each alone, no batch): its result is
    # published after any second answer to the first four, so once it is in, a duplicate
    # would be too.
    for name in ("head", "wrist"):
        pubs[name].publish(Command(request_id=f"{name}-2", text=texts[f"{name}-0"]))
        wait_until(lambda: any(r.request_id == f"{name}-2" for r in results[name]), 60, f"{name}-2's result")
    assert not unprefixed, "the single camera's topic stays silent"
    for name in ("head", "wrist"):
        assert [r.request_id for r in results[name]][-1] == f"{name}-2"
        results[name] = results[name][:-1]
        assert sorted(r.request_id for r in results[name]) == [f"{name}-0", f"{name}-1"]
        for result in results[name]:
            _check(result, name)
            # The batched answer is the one the model gives this command on this camera's frame alone.
            alone = model.segment(frames[name], result.command)
            assert result.answer == alone.answer and len(result.targets) == len(alone.targets)
    # head-0 alone; then the three waiting in one call, round-robin from the wrist (next in turn).
    assert [(kind, n) for kind, n, _ in calls] == [("segment", 1), ("segment_many", 3)]
    assert calls[1][2] == [texts["wrist-0"], texts["head-1"], texts["wrist-1"]]
    assert node.batch_sizes == {3: 1}

    def by_camera(array: Any) -> dict[str, dict[str, str]]:
        """Each camera's main status (its image rate and stamp statuses are test_node_camera_health.py's)."""
        return {s.name: {kv.key: kv.value for kv in s.values} for s in array.status if s.name.endswith(")")}

    status = wait_until(lambda: [by_camera(d) for d in diagnostics
                                 if all(v.get("results") == "3" for v in by_camera(d).values())], 10,
                        "per-camera diagnostics")[-1]
    base = f"{node.get_fully_qualified_name()}: m2sa perception"
    assert sorted(status) == [f"{base} (head)", f"{base} (wrist)"]
    names = {f"{base} ({camera}){what}" for camera in ("head", "wrist")
             for what in ("", ": image rate", ": image stamp")}
    assert {s.name for s in diagnostics[-1].status} == names
    assert sorted(v["camera"] for v in status.values()) == ["head", "wrist"]
    assert all(v["batched_calls"] == "1" and v["state"] == "active" for v in status.values())


def test_service_segment_and_track_actions_per_camera(graph):
    from action_msgs.msg import GoalStatus
    from m2sa_ros.action import Segment as SegmentAction
    from m2sa_ros.action import Track
    from m2sa_ros.msg import SegmentationResult
    from m2sa_ros.srv import Segment
    from sensor_msgs.msg import Image

    node, _frames = _two_camera_node(graph, TrackingBoxes())
    wrist_results = graph.collect(SegmentationResult, "wrist/result")
    head_results = graph.collect(SegmentationResult, "head/result")
    labels = {name: graph.collect(Image, f"{name}/labels") for name in ("head", "wrist")}
    wait_until(lambda: all(node.camera(name).outputs.labels.get_subscription_count() > 0 for name in labels), 10,
               "the label image subscriptions")

    service = graph.client.create_client(Segment, "head/segment")
    wait_until(service.service_is_ready, 10, "the head's segment service")
    assert not graph.client.create_client(Segment, "segment").wait_for_service(timeout_sec=0.5)
    response = service.call(Segment.Request(command="Which objects can hold a drink?", request_id="srv-1"),
                            timeout_sec=60)
    _check(response.result, "head")

    action = action_client(graph.client, SegmentAction, "wrist/segment")
    wait_until(action.server_is_ready, 10, "the wrist's segment action")
    future = action.send_goal_async(SegmentAction.Goal(command="What can I use to cut the bread?", request_id="act-1"))
    # A bound, not a pace: one run at three workers on two cores took over 30 s here.
    handle = wait_until(lambda: future.done() and future.result(), 60, "goal acceptance")
    result = handle.get_result_async()
    done = wait_until(lambda: result.done() and result.result(), 60, "the action's result")
    assert done.status == GoalStatus.STATUS_SUCCEEDED
    _check(done.result.result, "wrist")

    tracker = action_client(graph.client, Track, "wrist/track")
    wait_until(tracker.server_is_ready, 10, "the wrist's track action")
    feedback: list = []
    future = tracker.send_goal_async(Track.Goal(command="Show me the handle of the mug.", request_id="trk-1"),
                                     feedback_callback=lambda fb: feedback.append(fb.feedback))
    handle = wait_until(lambda: future.done() and future.result(), 60, "track acceptance")
    wait_until(lambda: feedback, 60, "the track's answer")
    wrist_images = graph.publisher(Image, "wrist/image", 1)
    head_images = graph.publisher(Image, "head/image", 1)
    wrist_stamps = []
    for i in range(2):  # a new frame on both cameras, the head's held first: only the wrist's is tracked
        _give_frame(node, "head", head_images, stamped_image(random_scene(HEAD[1], HEAD[0], seed=50 + i),
                                                             now_ns(node), frame_id="head_optical"))
        wrist_stamps.append(now_ns(node))
        _give_frame(node, "wrist", wrist_images, stamped_image(random_scene(WRIST[1], WRIST[0], seed=70 + i),
                                                               wrist_stamps[-1], frame_id="wrist_optical"))
        wait_until(lambda i=i: len(feedback) >= 2 + i, 60, f"the wrist's tracked frame {i + 1}")
    assert [fb.frame_seq for fb in feedback] == [0, 1, 2]
    assert [_stamp_ns(fb.result.header.stamp) for fb in feedback[1:]] == wrist_stamps
    ending = handle.get_result_async()
    handle.cancel_goal_async()
    ended = wait_until(lambda: ending.done() and ending.result(), 30, "the track's end")
    assert ended.status == GoalStatus.STATUS_CANCELED and ended.result.reason == "cancelled"
    for fb in feedback:
        assert fb.result.header.frame_id == "wrist_optical" and fb.result.request_id == "trk-1"
    assert [r.request_id for r in head_results] == ["srv-1"]
    assert {r.request_id for r in wrist_results} == {"act-1", "trk-1"}
    assert all(r.header.frame_id == "wrist_optical" for r in wrist_results)
    # Each result's label image on its own camera's labels, in its camera's frame and size.
    wait_until(lambda: len(labels["wrist"]) >= len(wrist_results), 10, "the wrist's label images")
    assert [(m.header.frame_id, m.height, m.width) for m in labels["head"]] == [("head_optical", *HEAD)]
    assert [(m.header.frame_id, m.height, m.width) for m in labels["wrist"]] == [("wrist_optical", *WRIST)] * len(
        wrist_results)


def test_bad_camera_names_fail_configure_naming_them(graph):
    from rclpy.lifecycle import TransitionCallbackReturn

    node = graph.add_node(BoxSegmenter(), cameras=["head", "head", "9"])
    assert node.trigger_configure() == TransitionCallbackReturn.FAILURE
    assert "cameras=['head', 'head', '9']: invalid camera name(s) '9'" in node._configure_error


def test_single_camera_keeps_its_names(graph, model):
    node = graph.add_node(CountingSegmenter(model))
    graph.start(node)
    assert [c.name for c in node.cameras] == [""] and node.camera().topic("result") == "result"
    topics = {name for name, _ in node.get_topic_names_and_types()}
    assert {"/result", "/overlay", "/markers"} <= topics and not any(t.startswith("/head") for t in topics)
    assert node._pipeline.worker.max_queue == 4 and node.batch_sizes == {}
