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
The ``track`` action over real DDS.

The answer, then tracked frames without the language model, and every way a track
ends (cancel, timeout, lost, bad goal, the node deactivating) with exactly one final
result; two tracks and an ordinary command share the worker without starving it. A
frame's masks and points go once, on ``result``; its feedback is the same result
without them (interfaces v5), and its label image goes out on ``labels``.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from fake_models import ScriptedSegmenter, TrackingBoxes
from node_harness import Graph, now_ns, track_client, TrackGoal, wait_until
import pytest
from scenes import random_scene, stamped_image

pytestmark = [pytest.mark.ros, pytest.mark.integration]


class TrackingScripted(ScriptedSegmenter):
    """The real tiny Segmenter's ``track`` behind the shared lock, counted."""

    def __init__(self, tiny) -> None:
        super().__init__(tiny)
        self.track_calls = 0

    def track(self, image, prompts, previous=None, **kwargs):
        with self._lock:
            self.track_calls += 1
            return self.real.track(image, prompts, previous, **kwargs)


def _stamp_ns(header: Any) -> int:
    return int(header.stamp.sec) * 10**9 + int(header.stamp.nanosec)


def _started(graph: Graph, seg) -> tuple[Any, Any, list]:
    """Start a node over ``seg`` and give it a first frame: (node, image publisher, results as they come)."""
    from m2sa_ros.msg import SegmentationResult
    from sensor_msgs.msg import Image

    node = graph.add_node(seg)
    graph.start(node)
    results = graph.collect(SegmentationResult, "result")
    images = graph.publisher(Image, "image", 1)
    graph.publish_frame(node, images, stamped_image(random_scene(seed=1), now_ns(node)))
    return node, images, results


def test_answer_then_tracked_frames_without_the_language_model_then_cancel(graph, tiny):
    from action_msgs.msg import GoalStatus
    from m2sa_ros.messages.mask_encoding import result_masks
    from sensor_msgs.msg import Image

    seg = TrackingScripted(tiny)
    lm_calls = [0]
    hook = seg.real.model.llm.lm_head.register_forward_hook(lambda *_: lm_calls.__setitem__(0, lm_calls[0] + 1))
    goal = None
    try:
        node, images, results = _started(graph, seg)
        label_images = graph.collect(Image, "labels")
        wait_until(lambda: node.camera().outputs.labels.get_subscription_count() > 0, 10, "the labels subscription")
        goal = TrackGoal(graph, track_client(graph), command="turn on the TV", request_id="follow-1")
        goal.wait_frames(1)
        answer = goal.feedback[0].result
        assert goal.seqs() == [0] and answer.success and answer.request_id == "follow-1"
        labels = [t.label for t in answer.targets]
        assert labels == ["television_set_1's button", "remote_control_1's button"]
        calls_after_answer, segment_calls = lm_calls[0], seg.calls
        assert calls_after_answer > 0  # the hook sees the language model when it runs

        for i in range(3):  # each new frame gives one tracked result
            graph.publish_frame(node, images, stamped_image(random_scene(seed=2 + i), now_ns(node)))
            goal.wait_frames(2 + i)
        assert goal.seqs() == [0, 1, 2, 3] and seg.track_calls == 3
        assert lm_calls[0] == calls_after_answer and seg.calls == segment_calls  # no language model
        for fb in goal.feedback[1:]:
            assert fb.result.success and fb.result.request_id == "follow-1" and fb.result.command == "turn on the TV"
            assert [t.label for t in fb.result.targets] == labels
        wait_until(lambda: len(results) >= 4, 10, "the results on the topic")
        # Each frame goes once whole, on the topic; its feedback is that result without masks and points.
        whole = {_stamp_ns(r.header): r for r in results if r.request_id == "follow-1"}
        assert len(whole) == 4
        for fb in goal.feedback:
            light, full = fb.result, whole[_stamp_ns(fb.result.header)]
            assert light.height == full.height == 48 and light.request_id == full.request_id
            assert [(t.label, t.label_value, t.score, t.bbox, t.has_centroid) for t in light.targets] == [
                (t.label, t.label_value, t.score, t.bbox, t.has_centroid) for t in full.targets]
            for t in light.targets:
                assert t.mask.height == t.amodal_mask.height == t.points.width == 0
                assert not t.mask_crop.format and not t.amodal_mask_crop.format and not len(t.mask_crop.data)
            assert all(m.shape == (48, 64) for m in result_masks(full))
        # And a label image for the answer and every tracked frame, on its frame's stamp.
        wait_until(lambda: {_stamp_ns(m.header) for m in label_images} >= set(whole), 10, "every frame's label image")

        cancel = goal.handle.cancel_goal_async()
        wait_until(cancel.done, 10, "the cancel response")
        done = goal.result()
        assert done.status == GoalStatus.STATUS_CANCELED
        assert (done.result.reason, done.result.frames) == ("cancelled", 3)
        assert done.result.result.request_id == "follow-1" and done.result.result.success

        # Ended means ended: a new frame brings no more tracked results, and an ordinary
        # command queued behind it is answered.
        graph.publish_frame(node, images, stamped_image(random_scene(seed=9), now_ns(node)))
        from m2sa_ros.msg import Command

        graph.publisher(Command, "command_stamped").publish(Command(request_id="after", text="turn on the TV"))
        wait_until(lambda: any(r.request_id == "after" for r in results), 60, "the ordinary command's result")
        assert [r.request_id for r in results].count("follow-1") == 4 and seg.track_calls == 3
    finally:
        hook.remove()
        if goal is not None and not goal._result.done():  # a failed check: end the track, or teardown waits on it
            goal.handle.cancel_goal_async()


def test_timeout_lost_and_a_bad_goal_each_end_with_their_reason(graph):
    from action_msgs.msg import GoalStatus

    seg = TrackingBoxes(track_score=0.1)
    node, images, _results = _started(graph, seg)
    client = track_client(graph)

    timed = TrackGoal(graph, client, command="the mug", timeout=0.3)
    done = timed.result()
    assert done.status == GoalStatus.STATUS_SUCCEEDED and done.result.reason == "timeout"
    assert done.result.frames == 0 and done.result.result.success and timed.seqs() == [0]

    lost = TrackGoal(graph, client, command="the mug", min_score=0.5, lost_frames=2)
    lost.wait_frames(1)
    seed = 10
    while not (lost._result.done() and lost._result.result()):  # new frames until the track gives up
        graph.publish_frame(node, images, stamped_image(random_scene(seed=seed), now_ns(node)))
        seed += 1
        assert seed < 40, "the track was never lost"
    done = lost.result()
    assert done.status == GoalStatus.STATUS_SUCCEEDED and done.result.reason == "lost"
    assert done.result.frames == 2 and lost.seqs() == [0, 1, 2]
    assert done.result.result.targets[0].score == pytest.approx(0.1)

    bad = TrackGoal(graph, client, command="the mug", min_score=2.0)
    done = bad.result()
    assert done.status == GoalStatus.STATUS_ABORTED and not done.result.result.success
    assert done.result.reason.startswith("error: bad track goal: min_score must be within [0, 1]")
    assert bad.seqs() == [] and seg.calls == 2  # the bad goal never reached the model


def test_two_tracks_and_a_command_share_the_worker_and_deactivate_ends_both(graph):
    from action_msgs.msg import GoalStatus
    from m2sa_ros.msg import Command
    from m2sa_ros.tracking.track_action import TrackFrame

    seg = TrackingBoxes(track_sleep_s=0.02)
    node, _images, results = _started(graph, seg)

    # Whenever a tracked frame is queued, that track has none waiting already.
    worker = node._pipeline.worker
    submit, queued_before = worker.submit, []

    def watching_submit(job):
        if isinstance(job.payload, TrackFrame):
            queued_before.append(sum(1 for j in worker.queued()
                                     if isinstance(getattr(j, "payload", None), TrackFrame)
                                     and j.payload.track is job.payload.track))
        return submit(job)

    worker.submit = watching_submit
    client = track_client(graph)
    goals = [TrackGoal(graph, client, command="the mug", request_id=f"track-{i}") for i in range(2)]
    stop = threading.Event()

    def camera() -> None:  # a camera faster than the tracks: frames always waiting
        seed = 100
        while not stop.is_set():
            node._on_image(stamped_image(random_scene(seed=seed), now_ns(node)))
            seed += 1
            time.sleep(0.005)

    streamer = threading.Thread(target=camera, daemon=True)
    streamer.start()
    try:
        for goal in goals:
            goal.wait_frames(3)
        graph.publisher(Command, "command_stamped").publish(Command(request_id="plain-1", text="the cup"))
        wait_until(lambda: any(r.request_id == "plain-1" for r in results), 60, "the ordinary command's result")
        plain = next(r for r in results if r.request_id == "plain-1")
        assert plain.success and plain.targets[0].label == "mug_1"
        counts = [len(goal.seqs()) for goal in goals]
        for goal, count in zip(goals, counts):  # both tracks go on after the command
            goal.wait_frames(count + 2)
            assert goal.seqs() == list(range(len(goal.seqs())))
        assert queued_before and max(queued_before) == 0

        from rclpy.lifecycle import TransitionCallbackReturn

        assert node.trigger_deactivate() == TransitionCallbackReturn.SUCCESS
    finally:
        stop.set()
        streamer.join(10)
    for goal in goals:
        done = goal.result()
        assert done.status == GoalStatus.STATUS_ABORTED and done.result.reason == "node deactivated"
        assert done.result.frames == len(goal.seqs()) - 1
        assert done.result.result.request_id == goal.feedback[0].result.request_id
    assert seg.calls == 3  # two answers and the ordinary command: tracked frames never call segment


def test_a_track_ended_by_deactivate_gets_its_result_even_when_the_send_is_late(graph, monkeypatch):
    """
    A goal's result goes out from an executor task after the goal ends (rclpy); a busy executor runs it late.

    Deactivate must not destroy the action server under it: the goal's one result
    still arrives, new goals are refused while inactive, and cleanup removes the
    action.
    """
    from action_msgs.msg import GoalStatus
    from m2sa_ros.action import Track
    from rclpy.action.server import ActionServer
    from rclpy.lifecycle import TransitionCallbackReturn

    send = ActionServer._send_result_response
    deactivated = threading.Event()
    sent_after_deactivate: list[bool] = []

    def late_send(self, request_header, future):
        # The executor was busy elsewhere: the result goes out only once deactivate has returned.
        sent_after_deactivate.append(deactivated.wait(30))
        return send(self, request_header, future)

    # Patched before the goal exists: the server binds its result send when the client's result
    # request arrives, which may come before or after the first frame (a slower run, Jazzy's).
    monkeypatch.setattr(ActionServer, "_send_result_response", late_send)
    node, _images, _results = _started(graph, TrackingBoxes())
    client = track_client(graph)
    goal = TrackGoal(graph, client, command="the mug", request_id="late")
    goal.wait_frames(1)
    assert node.trigger_deactivate() == TransitionCallbackReturn.SUCCESS
    deactivated.set()
    done = goal.result()
    assert done.status == GoalStatus.STATUS_ABORTED and done.result.reason == "node deactivated"
    assert sent_after_deactivate == [True], sent_after_deactivate  # one result, held until deactivate returned

    refused = client.send_goal_async(Track.Goal(command="the mug"))
    assert not wait_until(lambda: refused.done() and refused.result(), 30, "the refusal").accepted
    assert node.trigger_cleanup() == TransitionCallbackReturn.SUCCESS
    wait_until(lambda: not client.server_is_ready(), 10, "the track action to go away")


def test_a_model_failure_on_a_tracked_frame_ends_that_track_and_the_node_goes_on(graph):
    """
    The pipeline runs the tracked frame.

    Its failure is the track's end (with the frame's header in the final result),
    not the node's, and commands still run.
    """
    from action_msgs.msg import GoalStatus
    from m2sa_ros.msg import Command

    class FailingTrack(TrackingBoxes):

        def track(self, image, prompts, previous=None, **kwargs):
            self.track_calls += 1
            raise RuntimeError("SAM fell over")

    seg = FailingTrack()
    node, images, results = _started(graph, seg)
    goal = TrackGoal(graph, track_client(graph), command="the mug", request_id="failing")
    goal.wait_frames(1)  # the first answer, from the full model
    graph.publish_frame(node, images, stamped_image(random_scene(seed=2), now_ns(node)))
    done = goal.result()
    assert done.status == GoalStatus.STATUS_ABORTED
    assert done.result.reason == "error: model failure: RuntimeError: SAM fell over"
    final = done.result.result
    assert not final.success and final.request_id == "failing" and final.error.endswith("SAM fell over")
    assert (final.height, final.width) == (48, 64) and seg.track_calls == 1 and goal.seqs() == [0]

    graph.publisher(Command, "command_stamped").publish(Command(request_id="after", text="the cup"))
    wait_until(lambda: any(r.request_id == "after" for r in results), 30, "the next command's result")
    assert next(r for r in results if r.request_id == "after").success
