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
How the tracking replayer sends a ``track`` goal when the middleware loses its response or request.

No DDS: the replayer's action client is a double that answers, rejects or loses each send
as scripted, and a node double whose ``alive()`` (asked only while the replayer waits)
delivers feedback at the one moment a scenario needs it, right after the same result on the
result topic, as the node sends them (the feedback has no masks: the frame is scored on that
result). The whole exchange against the
real node, with a lost response and a lost request, is in test_bag_tracking.py.
"""

from __future__ import annotations

import threading
from types import SimpleNamespace
import uuid

from m2sa_ros.bag import tracking
from m2sa_ros.bag.replay import ReplayOptions
from m2sa_ros.bag.tracking import TrackedFrame, TrackGoalSettings, TrackOutcome, TrackReplayer
import pytest

ACCEPTED, REJECTED, LOST = "accepted", "rejected", "lost"


class _Node:
    """A node process double: alive, and while the replayer waits it may deliver one feedback."""

    def __init__(self) -> None:
        self.pending: list = []

    def alive(self) -> bool:
        while self.pending:
            self.pending.pop(0)()
        return True


class _Client:
    """An action client double: each send is answered as ``script`` says; results are asked by goal id."""

    def __init__(self, script: list[str], node: _Node, feedback_after: int | None) -> None:
        self.script, self.node, self.feedback_after = script, node, feedback_after
        self.on_result = lambda raw: None  # the replayer's subscription to the result topic
        self.goal_ids: list[bytes] = []
        self.results_asked: list[bytes] = []

    def send_goal_async(self, goal, feedback_callback=None, goal_uuid=None):
        from rclpy.task import Future
        from unique_identifier_msgs.msg import UUID

        goal_uuid = goal_uuid or UUID(uuid=list(uuid.uuid4().bytes))  # as rclpy's client, without one
        self.goal_ids.append(bytes(goal_uuid.uuid))
        answer = self.script[len(self.goal_ids) - 1]
        future = Future()
        if answer != LOST:
            future.set_result(_Handle(self, goal_uuid, answer == ACCEPTED))
        if self.feedback_after == len(self.goal_ids):  # the goal's answer (frame 0) comes while the replayer waits
            from rclpy.serialization import serialize_message

            answer = _feedback(0)
            self.node.pending.append(lambda: self.on_result(serialize_message(answer.feedback.result)))
            self.node.pending.append(lambda: feedback_callback(answer))
        return future

    def _get_result_async(self, handle):
        from rclpy.task import Future

        self.results_asked.append(bytes(handle.goal_id.uuid))
        return Future()


class _Handle:
    """A goal handle as rclpy's client gives it: accepted or not, its result asked of the client."""

    def __init__(self, client: _Client, goal_id, accepted: bool) -> None:
        self.goal_id, self.accepted, self._client = goal_id, accepted, client

    def get_result_async(self):
        return self._client._get_result_async(self)


def _feedback(frame_seq: int):
    from m2sa_ros.msg import SegmentationResult

    result = SegmentationResult(request_id="track-0")
    return SimpleNamespace(feedback=SimpleNamespace(frame_seq=frame_seq, result=result))


def _replayer(client: _Client) -> TrackReplayer:
    from m2sa_ros.action import Track
    from m2sa_ros.msg import SegmentationResult

    replayer = TrackReplayer.__new__(TrackReplayer)
    replayer.options = ReplayOptions(namespace="", result_timeout_s=5.0)
    replayer.goal_settings = TrackGoalSettings()
    replayer._track_type, replayer.track_client = Track, client
    replayer._cond, replayer._ours = threading.Condition(), set()
    replayer._command_conn, replayer._record = None, lambda *_args: None
    replayer._result_type, replayer._result_conn = SegmentationResult, None
    replayer.results_on_topic, replayer._whole, replayer.foreign_results = {}, {}, 0
    client.on_result = replayer._on_result
    return replayer


def _send(monkeypatch, script: list[str], feedback_after: int | None):
    monkeypatch.setattr(tracking, "GOAL_RESPONSE_TIMEOUT_S", 0.05)
    node = _Node()
    client = _Client(script, node, feedback_after)
    outcome = TrackOutcome(0, "the mug", "track-0", 0, [TrackedFrame(0, 1)])
    goal = _replayer(client)._send(outcome, node)
    return client, outcome, goal


def test_a_lost_response_then_a_refused_copy_is_the_goal_running_once_its_feedback_says_so(monkeypatch):
    # Send 1 reaches the node, which runs it; its response is lost. Send 2, same goal id, is
    # refused as a copy of a goal the node holds; the feedback that comes after proves it runs.
    client, outcome, goal = _send(monkeypatch, [LOST, REJECTED], feedback_after=2)
    assert len(client.goal_ids) == 2 and len(set(client.goal_ids)) == 1
    assert outcome.accepted and outcome.problems == [], outcome.problems
    assert client.results_asked == client.goal_ids[:1]  # the result of that one goal, asked once
    assert outcome.frames[0].frame_seq == 0 and outcome.frames[0].problems == []
    assert not goal.ended


def test_a_lost_response_whose_feedback_comes_first_needs_no_second_send(monkeypatch):
    client, outcome, _goal = _send(monkeypatch, [LOST, LOST, LOST], feedback_after=1)
    assert len(client.goal_ids) == 1 and outcome.accepted and client.results_asked == client.goal_ids


def test_a_lost_request_is_sent_again_under_the_same_id_and_accepted(monkeypatch):
    client, outcome, _goal = _send(monkeypatch, [LOST, ACCEPTED], feedback_after=2)
    assert len(client.goal_ids) == 2 and len(set(client.goal_ids)) == 1
    assert outcome.accepted and client.results_asked == client.goal_ids[:1]


@pytest.mark.parametrize("script, sends, problem", [
    ([REJECTED], 1, "the node rejected the goal"),
    ([LOST, LOST, LOST], 3, "no goal response to 3 sends of 0.05 s each"),
])
def test_a_goal_the_node_refuses_or_never_answers_is_reported_once(monkeypatch, script, sends, problem):
    client, outcome, goal = _send(monkeypatch, script, feedback_after=None)
    assert len(client.goal_ids) == sends and not outcome.accepted and goal.ended
    assert outcome.problems == [problem] and client.results_asked == []
