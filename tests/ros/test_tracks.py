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
The track state machine without DDS.

Frames due, sequence numbers, rate, timeout, lost rule, and one end per track
with the first reason given.
"""

from __future__ import annotations

from m2sa_core.inference.tracking import TrackState
from m2sa_core.types import Granularity, Result, Target
from m2sa_ros.tracking.tracks import (
    ABSENT_PREFIX, absent_reason, CANCELLED, LOST, TIMEOUT, Track, TrackSet, TrackSettings,
)
import numpy as np
import pytest
import torch


def _result(score: float, n: int = 1) -> Result:
    mask = np.zeros((4, 4), bool)
    mask[1:3, 1:3] = True
    return Result("mug_1", [Target("mug_1", "mug", 1, "", Granularity.OBJECT, mask, score) for _ in range(n)])


def _state() -> TrackState:
    return TrackState(torch.zeros((1, 1, 1, 1)))


def _answered(settings: TrackSettings, targets: int = 1, started_at: float = 0.0) -> Track:
    track = Track("r1", "the mug", settings, started_at)
    sent: list[str] = []
    assert track.answered([object()] * targets, "f0", "answer", lambda: sent.append("answer"))
    assert sent == ["answer"]
    return track


def test_settings_refuse_bad_goals_with_the_reason():
    with pytest.raises(ValueError, match="rate must be >= 0"):
        TrackSettings(rate=-1.0)
    with pytest.raises(ValueError, match="min_score must be within"):
        TrackSettings(min_score=1.5)
    with pytest.raises(ValueError, match="timeout must be >= 0"):
        TrackSettings(timeout=float("nan"))
    assert TrackSettings().lost_rule is None and TrackSettings(min_score=0.4, lost_frames=2).lost_rule.frames == 2


def test_frames_are_wanted_once_each_new_and_one_queued_at_a_time():
    track = Track("r1", "the mug", TrackSettings(), 0.0)
    assert not track.want_frame("f1", 1.0)  # still answering the command
    track.answered([object()], "f0", "answer", lambda: None)
    assert not track.want_frame("f0", 1.0)  # the answer's own frame
    assert track.want_frame("f1", 1.0)
    assert not track.want_frame("f2", 1.0)  # one already queued
    assert track.take("f2", 1.0)  # the worker runs the newest frame
    assert not track.want_frame("f2", 1.1) and track.want_frame("f3", 1.1)
    track.dropped()
    assert not track.queued and track.want_frame("f3", 1.2)
    assert not track.take("f2", 1.2)  # no newer frame than the last one: nothing to do


def test_sequence_numbers_count_delivered_frames():
    track = _answered(TrackSettings())
    seqs: list[int] = []
    for key in ("f1", "f2", "f3"):
        assert track.want_frame(key, 0.0) and track.take(key, 0.0)
        assert track.record(_result(0.9), _state(), f"msg-{key}", seqs.append)
    assert seqs == [1, 2, 3] and track.frames == 3 and track.last == "msg-f3" and track.active


def test_rate_limits_how_soon_the_next_frame_starts():
    track = _answered(TrackSettings(rate=2.0))
    assert track.want_frame("f1", 10.0) and track.take("f1", 10.0)
    assert not track.want_frame("f2", 10.4)  # 0.4 s < 1 / 2 Hz
    assert track.want_frame("f3", 10.5)


def test_lost_after_n_low_frames_in_a_row_and_a_good_frame_resets_the_count():
    track = _answered(TrackSettings(min_score=0.5, lost_frames=2))
    scores = [0.2, 0.9, 0.3, 0.1]
    for i, score in enumerate(scores):
        assert track.active
        assert track.want_frame(f"f{i + 1}", 0.0) and track.take(f"f{i + 1}", 0.0)
        assert track.record(_result(score), _state(), i, lambda _seq: None)
    assert track.reason == LOST and track.frames == 4


def test_an_answer_with_no_target_ends_at_once_saying_what_is_missing():
    track = Track("r1", "press the microwave's start button", TrackSettings(), 0.0)
    sent: list[str] = []
    assert track.answered([], "f0", "answer", lambda: sent.append("answer"), missing="microwave")
    assert sent == ["answer"] and track.last == "answer"  # the answer still goes out, as frame 0
    assert not track.active and track.reason == "absent: no microwave in view"
    assert not track.want_frame("f1", 0.0) and not track.end(LOST) and track.reason.startswith(ABSENT_PREFIX)
    # An answer that names no target and says nothing of what is missing (weights that never learned to refuse).
    silent = _answered(TrackSettings(), targets=0)
    assert silent.reason == absent_reason("") == "absent: the answer names no target"


def test_timeout_cancel_and_one_end_with_the_first_reason():
    track = _answered(TrackSettings(timeout=2.0), started_at=100.0)
    track.check(101.0, cancel_requested=False)
    assert track.active
    track.check(102.0, cancel_requested=False)
    assert track.reason == TIMEOUT and not track.end(CANCELLED) and track.reason == TIMEOUT
    # A frame that was running when the track ended is not delivered.
    sent: list[int] = []
    assert not track.record(_result(0.9), _state(), "late", sent.append) and sent == []

    other = _answered(TrackSettings(timeout=2.0), started_at=100.0)
    other.check(100.5, cancel_requested=True)
    assert other.reason == CANCELLED


def test_track_set_hands_frames_to_each_track_and_ends_all():
    tracks = TrackSet()
    a, b = _answered(TrackSettings()), _answered(TrackSettings(rate=1.0))
    tracks.add(a)
    tracks.add(b)
    assert tracks.due("f1", 5.0) == [a, b]
    assert tracks.due("f2", 5.0) == []  # both have a frame queued
    a.take("f2", 5.0)
    b.take("f2", 5.0)
    assert tracks.due("f3", 5.5) == [a]  # b's 1 Hz
    tracks.remove(a)
    tracks.end_all("node deactivated")
    assert b.reason == "node deactivated" and a.active and len(tracks) == 1


def test_tracked_frames_wait_in_the_worker_queue_outside_max_queue():
    """A full command queue still takes a tracked frame, and tracked frames never fill it."""
    import threading

    from m2sa_ros.worker import CommandWorker, Job

    release, ran, rejected = threading.Event(), [], []

    class Handler:

        def run(self, job: Job) -> None:
            release.wait(10)
            ran.append(job.payload)

        def reject(self, job: Job, reason: str) -> None:
            rejected.append(job.payload)

        def crashed(self, job: Job, exc: BaseException) -> None:
            raise AssertionError(f"{job.payload} crashed: {exc}")

    handler = Handler()
    worker = CommandWorker(max_queue=1)
    try:
        assert worker.submit(Job(payload="running", handler=handler))
        while not worker.busy:
            release.wait(0.01)
        assert worker.submit(Job(payload="frame-a", handler=handler, bounded=False))
        assert worker.submit(Job(payload="command", handler=handler))
        assert not worker.submit(Job(payload="command-2", handler=handler))  # max_queue 1: commands only
        assert worker.submit(Job(payload="frame-b", handler=handler, bounded=False))
        assert worker.depth == 1
        release.set()
        while len(ran) < 4:
            release.wait(0.01)
        assert ran == ["running", "frame-a", "command", "frame-b"] and worker.depth == 0
    finally:
        release.set()
        worker.stop("test over")
    assert rejected == []
