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
Replaying a tracking bag through the node's ``track`` action, one sequence at a time.

For each sequence of the bag (``m2sa_ros.bag.sequences``): its first frame goes out, the
command is sent as a ``track`` goal with a request id of its own (``track-<index>``) and
the replayer waits for the answer (feedback ``frame_seq`` 0); then every following frame
goes out and the replayer waits for that frame's tracked result before the next one. The
feedback numbers the frames but carries no masks (interfaces v5): each frame is scored on
its whole result from the ``result`` topic, the one with the goal's request id and the
feedback's stamp.
The node tracks on its *newest* frame, so this closed loop is what makes each result
belong to the frame it is scored against (its header stamp is checked all the same).
After the sequence's last frame the goal is cancelled and its one final result (with
the reason the track ended) is awaited before the next sequence's first frame, which
the old track would otherwise take as one of its own.

Messages keep their recorded spacing and ``/clock`` carries bag time, as in the
command replay (``m2sa_ros.bag.replay``), and a bag's depth and camera_info go out just
before their frame, as there; the results bag records every
SegmentationResult on ``result`` plus one Command per goal.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
import math
from pathlib import Path
import threading
import time
from typing import Any
import uuid

from m2sa_ros.bag.bag_io import bag_info, decode, iter_messages
from m2sa_ros.bag.ground_truth import BagError, TrackingGroundTruth
from m2sa_ros.bag.replay import NodeProcess, Replayer, ReplayOptions
from m2sa_ros.messages.image_conversion import stamp_ns

FEEDBACK_GRACE_S = 2.0  # how long a frame's feedback may trail its track's final result

# How long the replayer waits for a goal's response before it sends the goal again, and how
# often it sends it. rmw_fastrtps drops a service response when the node has not yet matched
# the client's response reader within 100 ms ("failed to send response (timeout): client will
# not receive response", ros2/ros2 issue 1253), which on a loaded machine happens right after
# wait_for_server. Unlike a segment goal, a lost track goal would run on unseen, so every send
# carries the same goal id: the node refuses a goal id it already holds (rclpy's action server
# does), and the goal's own feedback, which comes under that id, proves it runs.
GOAL_RESPONSE_TIMEOUT_S = 10.0
GOAL_SENDS = 3


@dataclass
class TrackGoalSettings:
    """The Track goal fields the replayer sends (docs/TRACKING.md); no timeout: it cancels."""

    min_score: float = 0.0
    lost_frames: int = 0  # 0: never lost, so every frame of a sequence is tracked and scored
    use_previous_mask: bool = False


@dataclass
class TrackedFrame:
    """One frame of a sequence as replayed: when it went out and the result it got."""

    frame: int  # index within the sequence (0: the answered frame)
    stamp_ns: int
    published_at: float = math.nan  # monotonic s (for frame 0: when the goal was sent)
    tracked: bool = False  # the node was asked for it (published while the track ran)
    result: Any = None  # rclpy SegmentationResult: the result topic's, matched to the frame's feedback
    frame_seq: int | None = None
    received_at: float = math.nan
    timed_out: bool = False  # asked for while its track ran, and no result came in time (the node's fault)
    problems: list[str] = field(default_factory=list)

    @property
    def latency_ms(self) -> float:
        return (self.received_at - self.published_at) * 1e3 if self.result is not None else math.nan


@dataclass
class TrackOutcome:
    """One sequence's goal: what was sent, every frame's feedback and the one final result."""

    index: int
    command: str
    request_id: str
    bag_time_ns: int
    frames: list[TrackedFrame]
    accepted: bool = False
    final: Any = None  # Track.Result
    status: int | None = None  # action_msgs/GoalStatus
    problems: list[str] = field(default_factory=list)

    @property
    def reason(self) -> str:
        return self.final.reason if self.final is not None else ""


class _Goal:
    """
    A sent goal: its feedback as it comes, its handle and its one result (executor thread fills them).

    The goal may be sent more than once under one goal id (see ``GOAL_SENDS``), so its
    handle is the first *accepted* answer, or one adopted from the goal's own feedback
    when every answer was lost; the result is asked for once, whichever came first.
    """

    def __init__(self, outcome: TrackOutcome, cond: threading.Condition, goal_id: Any) -> None:
        self.outcome = outcome
        self.cond = cond
        self.goal_id = goal_id
        self.feedback: list[tuple[int, Any, float]] = []  # (frame_seq, result, monotonic s)
        self.handle: Any = None  # the accepted handle, once there is one
        self.answers = 0  # goal responses received (accepted or rejected), of any send
        self.rejected = False  # decided by the replayer: the node refused the goal
        self.result: Any = None  # GetResult response (status, result)
        self.failure = ""

    def on_feedback(self, message: Any) -> None:
        now = time.monotonic()
        with self.cond:
            self.feedback.append((int(message.feedback.frame_seq), message.feedback.result, now))
            self.cond.notify_all()

    def on_sent(self, future: Any) -> None:
        try:
            handle = future.result()
        except Exception as exc:  # noqa: BLE001 - the request never reached the server
            handle, failure = None, f"goal request failed: {exc}"
        else:
            failure = ""
        with self.cond:
            self.answers += 1
            self.failure = self.failure or failure
            adopt = handle is not None and handle.accepted and self.handle is None
            if adopt:
                self.handle = handle
            self.cond.notify_all()
        if adopt:
            handle.get_result_async().add_done_callback(self.on_result)

    def adopt(self, client: Any, accepted: Any) -> None:
        """
        Take the goal as accepted on the strength of its own feedback, its response lost.

        The node sends feedback only for a goal it runs, under the id this replayer chose,
        so the feedback proves what the lost response (``accepted``) would have said.
        """
        from rclpy.action.client import ClientGoalHandle

        handle = ClientGoalHandle(client, self.goal_id, accepted)
        with self.cond:
            if self.handle is not None:
                return
            self.handle = handle
        handle.get_result_async().add_done_callback(self.on_result)

    def on_result(self, future: Any) -> None:
        with self.cond:
            try:
                self.result = future.result()
            except Exception as exc:  # noqa: BLE001
                self.failure = f"result request failed: {exc}"
                self.result = False
            self.cond.notify_all()

    @property
    def final(self) -> Any:
        """Return the Track.Result once it came (None before, or when asking for it failed)."""
        return None if self.result is None or self.result is False else self.result.result

    @property
    def ended(self) -> bool:
        return self.result is not None or self.rejected


def check_tracking_bag(bag: Path, truth: TrackingGroundTruth) -> None:
    """Raise BagError when ``bag`` and its tracking ground truth disagree (before a node is started)."""
    topics = bag_info(bag)["topics"]
    n_commands = topics.get(truth.command_topic, {}).get("count", 0)
    if not truth.sequences:
        raise BagError(f"{bag}: the tracking ground truth lists no sequences")
    if n_commands != len(truth.sequences):
        raise BagError(f"{bag}: {n_commands} command messages on {truth.command_topic} but the tracking ground "
                       f"truth lists {len(truth.sequences)} sequences")
    n_frames = sum(len(s.frames) for s in truth.sequences)
    if topics.get(truth.image_topic, {}).get("count", 0) < n_frames:
        raise BagError(f"{bag}: {topics.get(truth.image_topic, {}).get('count', 0)} images on {truth.image_topic} "
                       f"but the tracking ground truth lists {n_frames} frames")


class TrackReplayer(Replayer):
    """A :class:`Replayer` that sends each sequence's command as a ``track`` goal and scores per frame."""

    def __init__(self, options: ReplayOptions, context: Any, results_bag: Path | None,
                 goal_settings: TrackGoalSettings | None = None) -> None:
        from m2sa_ros.action import Track
        from rclpy.action import ActionClient

        super().__init__(options, context, results_bag)
        self.goal_settings = goal_settings or TrackGoalSettings()
        self._track_type = Track
        self.action_name = f"{options.namespace.rstrip('/')}/track"
        self.track_client = ActionClient(self.node, Track, self.action_name)
        self._ours: set[str] = set()
        self.results_on_topic: dict[str, int] = {}
        # Our tracks' whole results on the topic by (request id, stamp), not yet given to a frame.
        self._whole: dict[tuple[str, int], list[Any]] = {}

    def _on_result(self, raw: bytes) -> None:
        """
        Record a result on the topic in the results bag, and keep ours for the feedback that numbers it.

        The feedback carries no masks (interfaces v5): :meth:`_take_feedback` scores a frame
        on this whole result, matched by request id and stamp.
        """
        from rclpy.serialization import deserialize_message

        msg = deserialize_message(raw, self._result_type)
        self._record(self._result_conn, raw)
        with self._cond:
            if msg.request_id in self._ours:
                self.results_on_topic[msg.request_id] = self.results_on_topic.get(msg.request_id, 0) + 1
                self._whole.setdefault((msg.request_id, stamp_ns(msg.header)), []).append(msg)
                self._cond.notify_all()
            else:
                self.foreign_results += 1

    def wait_for_node(self, node: NodeProcess | None) -> None:
        """Until the topics are matched and the ``track`` action server answers."""
        started = time.monotonic()
        super().wait_for_node(node)
        left = self.options.startup_timeout_s - (time.monotonic() - started)
        if not self.track_client.wait_for_server(timeout_sec=max(left, 1.0)):
            raise TimeoutError(f"the perception node under {self.options.namespace} offers no track action "
                               f"({self.action_name}) after {self.options.startup_timeout_s:.0f} s")

    # -- one goal ---------------------------------------------------------------------
    def _await(self, done: Callable[[], bool], node: NodeProcess | None, timeout_s: float) -> bool:
        """Wait on the condition until ``done()``; False on timeout or when the node died."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while not done():
                left = deadline - time.monotonic()
                if left <= 0 or (node is not None and not node.alive()):
                    return False
                self._cond.wait(timeout=min(left, 0.2))
        return True

    def _why_not(self, what: str, node: NodeProcess | None) -> str:
        """Why a wait ended without its event: the node died, or time ran out."""
        if node is not None and not node.alive():
            return f"{what}: the perception node exited"
        return f"{what} within {self.options.result_timeout_s:.0f} s"

    def _send(self, outcome: TrackOutcome, node: NodeProcess | None) -> _Goal:
        """Send the goal and wait for its answer (feedback 0) or its end."""
        from m2sa_ros.msg import Command
        from rclpy.serialization import serialize_message
        from unique_identifier_msgs.msg import UUID

        goal = _Goal(outcome, self._cond, UUID(uuid=list(uuid.uuid4().bytes)))
        s = self.goal_settings
        request = self._track_type.Goal(command=outcome.command, request_id=outcome.request_id, rate=0.0,
                                        timeout=0.0, min_score=float(s.min_score), lost_frames=int(s.lost_frames),
                                        use_previous_mask=bool(s.use_previous_mask))
        with self._cond:
            self._ours.add(outcome.request_id)
        first = outcome.frames[0]
        first.published_at, first.tracked = time.monotonic(), True
        command = Command(request_id=outcome.request_id, text=outcome.command)
        command.header.stamp.sec, command.header.stamp.nanosec = divmod(outcome.bag_time_ns, 1_000_000_000)
        self._record(self._command_conn, serialize_message(command), outcome.bag_time_ns)
        timeout = self.options.result_timeout_s
        wait = min(GOAL_RESPONSE_TIMEOUT_S, timeout)
        sends = 0
        for sends in range(1, GOAL_SENDS + 1):
            self.track_client.send_goal_async(request, feedback_callback=goal.on_feedback,
                                              goal_uuid=goal.goal_id).add_done_callback(goal.on_sent)
            if self._await(lambda: goal.answers or goal.feedback, node, wait):
                break
            if node is not None and not node.alive():
                break
        if goal.handle is None and goal.answers and sends > 1:
            # A resend's "rejected" may be the node refusing a second copy of a goal it
            # already runs: its feedback settles it.
            self._await(lambda: goal.handle is not None or goal.feedback, node, timeout)
        if goal.handle is None and goal.feedback:
            goal.adopt(self.track_client, self._track_type.Impl.SendGoalService.Response(accepted=True))
        outcome.accepted = goal.handle is not None
        if not outcome.accepted:
            with self._cond:
                goal.rejected = True
            if goal.answers:
                outcome.problems.append(goal.failure or "the node rejected the goal")
            elif node is not None and not node.alive():
                outcome.problems.append(self._why_not("the goal was not acknowledged", node))
            else:
                outcome.problems.append(f"no goal response to {sends} sends of {wait:g} s each")
            return goal
        if self._await(lambda: goal.feedback or goal.ended, node, timeout):
            self._take_feedback(goal, first, node)
        else:
            first.timed_out = True
            first.problems.append(self._why_not("no answer", node))
        return goal

    def _take_feedback(self, goal: _Goal, frame: TrackedFrame, node: NodeProcess | None) -> None:
        """Give ``frame`` the newest unclaimed feedback of ``goal``, checking its number and stamp."""
        final = goal.final
        if final is not None:
            # Feedback and the final result travel on different topics: the result of a
            # track that ended on this frame (lost) may overtake this frame's feedback.
            expected = int(final.frames) + (1 if final.result.success else 0)
            self._await(lambda: len(goal.feedback) >= expected, node, FEEDBACK_GRACE_S)
        with self._cond:
            claimed = sum(1 for f in goal.outcome.frames if f.result is not None)
            fresh = goal.feedback[claimed:]
        if not fresh:
            reason = final.reason if final is not None else goal.failure or "no final result"
            frame.problems.append(f"the track ended ({reason}) before this frame had a result")
            return
        if len(fresh) > 1:
            frame.problems.append(f"{len(fresh)} results came for one frame")
        seq, result, received = fresh[-1]
        got = stamp_ns(result.header)
        # The node publishes the whole result on the topic before this feedback, but DDS orders
        # the two topics in no way: it is waited for like a result.
        key = (goal.outcome.request_id, got)
        if self._await(lambda: bool(self._whole.get(key)), node, self.options.result_timeout_s):
            with self._cond:
                result = self._whole[key].pop(0)
        else:
            frame.problems.append("its result did not come on the result topic (the feedback has no masks)")
        frame.result, frame.frame_seq, frame.received_at = result, seq, received
        if seq != claimed:
            frame.problems.append(f"frame_seq {seq}, expected {claimed}")
        if result.height > 0 and got != frame.stamp_ns:
            frame.problems.append(f"tracked on the frame stamped {got} ns, not on its own ({frame.stamp_ns} ns)")

    def _track_frame(self, goal: _Goal, frame: TrackedFrame, node: NodeProcess | None) -> None:
        """Wait for the tracked result (or the track's end) of a running track's frame that just went out."""
        frame.tracked = True
        claimed = sum(1 for f in goal.outcome.frames if f.result is not None)
        timeout = self.options.result_timeout_s
        if self._await(lambda: len(goal.feedback) > claimed or goal.ended, node, timeout):
            self._take_feedback(goal, frame, node)
        else:
            frame.timed_out = True
            frame.problems.append(self._why_not("no tracked result", node))

    def _finish(self, goal: _Goal | None, node: NodeProcess | None) -> None:
        """Cancel the goal if it still runs and wait for its one final result."""
        if goal is None or not goal.outcome.accepted:
            return
        if goal.result is None:
            goal.handle.cancel_goal_async()
        timeout = self.options.result_timeout_s
        if not self._await(lambda: goal.result is not None, node, timeout):
            goal.outcome.problems.append(self._why_not("no final result after the cancel request", node))
            return
        if goal.result is False:
            goal.outcome.problems.append(goal.failure)
            return
        outcome = goal.outcome
        outcome.final, outcome.status = goal.result.result, int(goal.result.status)
        delivered = sum(1 for f in outcome.frames[1:] if f.result is not None)
        with self._cond:
            late = len(goal.feedback) - sum(1 for f in outcome.frames if f.result is not None)
        if late > 0:
            outcome.problems.append(f"{late} result(s) came after their frame was given up")
        if outcome.final.frames != delivered + max(late, 0):
            outcome.problems.append(f"the final result counts {outcome.final.frames} tracked frames, "
                                    f"{delivered} were received")

    # -- the replay -------------------------------------------------------------------
    def replay_tracks(self, bag: Path, truth: TrackingGroundTruth, node: NodeProcess | None = None,
                      progress: bool = True, depth_topics: tuple[str, str] | None = None) -> list[TrackOutcome]:
        """
        Replay ``bag`` sequence by sequence (see the module docstring); one outcome per sequence.

        ``depth_topics`` (depth, camera_info in the bag) go to the node's ``depth`` and
        ``camera_info`` as recorded, each just before its colour image, as in the command
        replay; one that cannot be read is left out with one line in ``bad_depth``.
        """
        from rclpy.serialization import deserialize_message
        from std_msgs.msg import String

        where = truth.frame_index()
        bar = None
        if progress:
            from tqdm import tqdm

            bar = tqdm(total=len(where), desc="replay (tracking)", unit="frame")
        outcomes: list[TrackOutcome] = []
        frames_sent: set[int] = set()
        goal: _Goal | None = None
        pacer = self.pacer()
        try:
            for message in iter_messages(bag, [truth.image_topic, truth.command_topic, *(depth_topics or ())]):
                if depth_topics is not None and message.topic in depth_topics:
                    pacer.wait_for(message.time_ns)
                    self._publish_depth(message, message.topic == depth_topics[0])
                    continue
                is_frame = message.topic == truth.image_topic
                stamp = stamp_ns(decode(message).header) if is_frame else None
                place = where.get(stamp) if stamp is not None else None
                if is_frame and goal is not None and (place is None or place[0] != goal.outcome.index):
                    self._finish(goal, node)  # the next sequence begins: end this one's track first
                    goal = None
                pacer.wait_for(message.time_ns, after_frame=not is_frame)
                self._publish_clock()
                if is_frame:
                    # Whether the track had ended is read before the frame goes out: a fast node
                    # may track the frame and end the track before this thread runs again.
                    ended_before = goal is not None and goal.ended
                    self.image_pub.publish(message.raw)
                    pacer.frame_sent()
                    frames_sent.add(stamp)
                    if bar is not None and place is not None:
                        bar.update(1)
                    if goal is not None and place is not None and place[1] > 0:
                        frame = goal.outcome.frames[place[1]]
                        frame.published_at = time.monotonic()
                        if ended_before:
                            reason = goal.final.reason if goal.final is not None else goal.failure or "?"
                            frame.problems.append(f"not tracked: the track had ended ({reason})")
                        else:
                            self._track_frame(goal, frame, node)
                    continue
                text = deserialize_message(message.raw, String).data
                index = len(outcomes)
                if index >= len(truth.sequences):
                    raise BagError(f"{bag}: command message {index} has no sequence in the tracking ground truth "
                                   f"({len(truth.sequences)} sequences)")
                sequence = truth.sequences[index]
                if sequence.command != text:
                    raise BagError(f"{bag}: command message {index} is '{text}' but the tracking ground truth "
                                   f"says '{sequence.command}'")
                self._finish(goal, node)
                outcome = TrackOutcome(index, text, f"track-{index}", message.time_ns,
                                       [TrackedFrame(t, f.image_stamp_ns) for t, f in enumerate(sequence.frames)])
                outcomes.append(outcome)
                if sequence.frames[0].image_stamp_ns not in frames_sent:
                    outcome.problems.append(f"its first frame (stamp {sequence.frames[0].image_stamp_ns} ns) is not "
                                            f"in the bag before it: not sent")
                    goal = None
                    continue
                goal = self._send(outcome, node)
            self._finish(goal, node)
        finally:
            if bar is not None:
                bar.close()
        for outcome in outcomes:
            for frame in outcome.frames[1:]:
                if frame.stamp_ns not in frames_sent:
                    frame.problems.append(f"not in the bag on {truth.image_topic} after its command")
        return outcomes
