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
A camera's depth health without ROS: what is counted, and when the node warns.

Each frame's depth outcome is counted once (a second look replaces the first); a refusal
is said at its first frame, missing depth only after ``depth_missing_frames`` frames in a row;
each cause is said once per episode, an episode ends when depth has been bound for
``depth_missing_frames`` frames in a row, and a camera that fails again after that says so again.
"""

from __future__ import annotations

import dataclasses
import threading

from m2sa_ros.depth.depth_health import BOUND, DepthHealth, DepthOutcome, MISSING, REFUSED
from m2sa_ros.depth.depth_settings import DepthSettings
from m2sa_ros.params.node_params import PARAMETERS, validate

NO_DEPTH = DepthOutcome(MISSING, "no_depth", "no depth received on /depth")
LATE = DepthOutcome(MISSING, "depth_late", "depth 80 ms from the image")
OTHER_FRAME = DepthOutcome(REFUSED, "depth_frame", "depth on /depth refused: frame depth_optical, not rgb_optical")
BAD_SIZE = DepthOutcome(REFUSED, "depth_size", "depth on /depth refused: 64x48, not 32x24")
GOOD = DepthOutcome(BOUND)
DEFAULTS = DepthSettings.from_params(validate({spec.name: spec.default for spec in PARAMETERS}))


def settings(depth_missing_frames: int) -> DepthSettings:
    """Return the default depth settings with ``depth_missing_frames`` (unvalidated: 0 is below its range)."""
    return dataclasses.replace(DEFAULTS, depth_missing_frames=depth_missing_frames)


class WarnOnceLog:
    """The node's warn-once logger: says each key's text once (perception_node._warn_once)."""

    def __init__(self) -> None:
        self.keys: set[str] = set()
        self.lines: list[str] = []

    def __call__(self, key: str, text: str) -> None:
        if key not in self.keys:
            self.keys.add(key)
            self.lines.append(text)


class Camera:
    """A DepthHealth fed frame by frame, its warnings going to a warn-once log."""

    def __init__(self, depth_missing_frames: int = 3) -> None:
        self.health = DepthHealth()
        self.log = WarnOnceLog()
        self.settings = settings(depth_missing_frames)
        self._n = 0

    def frame(self, outcome: DepthOutcome, key: str | None = None) -> str:
        """Record a new frame's (or, given its key, a frame's second look's) outcome; its key."""
        if key is None:
            self._n += 1
            key = f"camera:{self._n}:{self._n * 1000}"
        said = self.health.record(key, outcome, self.settings)
        if said is not None:
            self.log(*said)
        return key

    def frames(self, outcome: DepthOutcome, n: int) -> None:
        for _ in range(n):
            self.frame(outcome)


def test_a_fresh_health_reports_no_frames_and_no_state():
    snapshot = DepthHealth().snapshot()
    assert snapshot == {"depth_bound": 0, "depth_missing": 0, "depth_refused": 0, "depth_last_state": "none",
                        "depth_frames_without": 0, "depth_last_reason": ""}


def test_each_outcome_is_counted_with_the_last_state_and_reason():
    camera = Camera()
    camera.frames(GOOD, 2)
    camera.frame(NO_DEPTH)
    camera.frame(OTHER_FRAME)
    snapshot = camera.health.snapshot()
    assert (snapshot["depth_bound"], snapshot["depth_missing"], snapshot["depth_refused"]) == (2, 1, 1)
    assert snapshot["depth_last_state"] == REFUSED
    assert snapshot["depth_last_reason"] == OTHER_FRAME.reason
    assert snapshot["depth_frames_without"] == 2


def test_a_bound_frame_keeps_the_last_fault_reason_but_resets_the_frames_without():
    camera = Camera()
    camera.frames(NO_DEPTH, 2)
    camera.frame(GOOD)
    snapshot = camera.health.snapshot()
    assert snapshot["depth_last_state"] == BOUND
    assert snapshot["depth_last_reason"] == NO_DEPTH.reason
    assert snapshot["depth_frames_without"] == 0


def test_a_refusal_is_said_at_its_first_frame_naming_the_reason():
    camera = Camera(depth_missing_frames=5)
    camera.frame(OTHER_FRAME)
    assert camera.log.lines == [f"no centroids: {OTHER_FRAME.reason}"]


def test_missing_depth_is_said_only_once_it_has_been_missing_for_missing_frames_in_a_row():
    camera = Camera(depth_missing_frames=3)
    camera.frames(NO_DEPTH, 2)
    assert camera.log.lines == []
    camera.frame(NO_DEPTH)
    assert camera.log.lines == [f"no 3-D for 3 frames in a row: {NO_DEPTH.reason}"]


def test_missing_depth_between_bound_frames_is_no_fault():
    camera = Camera(depth_missing_frames=3)
    for _ in range(4):
        camera.frames(NO_DEPTH, 2)
        camera.frame(GOOD)
    assert camera.log.lines == []
    assert camera.health.snapshot()["depth_missing"] == 8


def test_a_cause_is_said_once_per_episode_not_per_frame():
    camera = Camera(depth_missing_frames=2)
    camera.frames(OTHER_FRAME, 10)
    camera.frames(NO_DEPTH, 10)
    assert camera.log.lines == [f"no centroids: {OTHER_FRAME.reason}",
                                f"no 3-D for 11 frames in a row: {NO_DEPTH.reason}"]


def test_a_second_cause_in_the_same_episode_is_said_too():
    camera = Camera(depth_missing_frames=1)
    camera.frames(OTHER_FRAME, 2)
    camera.frames(BAD_SIZE, 2)
    camera.frames(OTHER_FRAME, 2)
    assert camera.log.lines == [f"no centroids: {OTHER_FRAME.reason}", f"no centroids: {BAD_SIZE.reason}"]


def test_depth_that_comes_and_goes_does_not_fill_the_log():
    camera = Camera(depth_missing_frames=3)
    camera.frames(NO_DEPTH, 3)
    for _ in range(5):
        camera.frames(GOOD, 2)  # fewer than depth_missing_frames: the episode goes on
        camera.frames(NO_DEPTH, 3)
    assert camera.log.lines == [f"no 3-D for 3 frames in a row: {NO_DEPTH.reason}"]


def test_a_camera_that_recovers_and_fails_again_says_so_again():
    camera = Camera(depth_missing_frames=3)
    camera.frames(OTHER_FRAME, 2)
    camera.frames(GOOD, 3)  # depth bound for depth_missing_frames in a row: the episode is over
    camera.frames(OTHER_FRAME, 2)
    assert camera.log.lines == [f"no centroids: {OTHER_FRAME.reason}"] * 2


def test_the_warning_key_differs_per_episode_and_cause_so_a_warn_once_logger_says_each():
    health = DepthHealth()
    first = health.record("a", OTHER_FRAME, settings(1))
    other_cause = health.record("b", BAD_SIZE, settings(1))
    assert health.record("c", GOOD, settings(1)) is None
    again = health.record("d", OTHER_FRAME, settings(1))
    assert first is not None and other_cause is not None and again is not None
    assert len({first[0], other_cause[0], again[0]}) == 3


def test_a_frame_looked_at_twice_counts_once_with_the_second_looks_outcome():
    camera = Camera(depth_missing_frames=3)
    key = camera.frame(LATE)
    camera.frame(GOOD, key=key)  # its depth came while the model ran
    snapshot = camera.health.snapshot()
    assert (snapshot["depth_bound"], snapshot["depth_missing"], snapshot["depth_refused"]) == (1, 0, 0)
    assert snapshot["depth_last_state"] == BOUND and snapshot["depth_frames_without"] == 0


def test_a_frame_missing_at_both_looks_is_one_frame_without_depth():
    camera = Camera(depth_missing_frames=2)
    key = camera.frame(NO_DEPTH)
    camera.frame(NO_DEPTH, key=key)
    assert camera.log.lines == []
    assert camera.health.snapshot()["depth_frames_without"] == 1
    assert camera.health.snapshot()["depth_missing"] == 1
    camera.frame(NO_DEPTH)
    assert camera.log.lines == [f"no 3-D for 2 frames in a row: {NO_DEPTH.reason}"]


def test_a_requests_own_image_is_never_taken_for_a_second_look():
    health = DepthHealth()
    health.record("", NO_DEPTH, settings(5))
    health.record("", NO_DEPTH, settings(5))
    assert health.snapshot()["depth_missing"] == 2
    assert health.snapshot()["depth_frames_without"] == 2


def test_a_frame_forgotten_past_remember_counts_as_a_new_one():
    health = DepthHealth(remember=2)
    health.record("old", NO_DEPTH, settings(5))
    health.record("b", NO_DEPTH, settings(5))
    health.record("c", NO_DEPTH, settings(5))
    health.record("old", GOOD, settings(5))  # no longer remembered: a frame of its own
    snapshot = health.snapshot()
    assert (snapshot["depth_bound"], snapshot["depth_missing"]) == (1, 3)


def test_missing_frames_below_one_warns_at_the_first_missing_frame():
    camera = Camera(depth_missing_frames=0)
    camera.frame(NO_DEPTH)
    assert camera.log.lines == [f"no 3-D for 1 frames in a row: {NO_DEPTH.reason}"]


def test_clear_starts_a_fresh_count_and_a_cause_said_before_is_said_again():
    camera = Camera(depth_missing_frames=1)
    camera.frames(OTHER_FRAME, 3)
    key = camera.frame(NO_DEPTH)
    camera.health.clear()
    assert camera.health.snapshot() == DepthHealth().snapshot()
    camera.frame(GOOD, key=key)  # a frame from before the cleanup is not replaced: counted anew
    assert camera.health.snapshot()["depth_missing"] == 0
    assert camera.health.snapshot()["depth_bound"] == 1
    camera.frame(OTHER_FRAME)
    assert camera.log.lines.count(f"no centroids: {OTHER_FRAME.reason}") == 2


def test_frames_recorded_from_several_threads_are_all_counted_and_each_cause_said_once():
    health = DepthHealth(remember=10_000)
    said: list[tuple[str, str]] = []
    said_lock = threading.Lock()
    start = threading.Barrier(4)

    def feed(thread: int) -> None:
        start.wait(timeout=30)
        for i in range(250):
            outcome = (GOOD, NO_DEPTH, OTHER_FRAME)[i % 3] if thread % 2 else OTHER_FRAME
            result = health.record(f"t{thread}:{i}", outcome, settings(1_000_000))
            if result is not None:
                with said_lock:
                    said.append(result)

    threads = [threading.Thread(target=feed, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
        assert not thread.is_alive()
    snapshot = health.snapshot()
    assert snapshot["depth_bound"] + snapshot["depth_missing"] + snapshot["depth_refused"] == 1000
    assert snapshot["depth_bound"] == 2 * 84 and snapshot["depth_missing"] == 2 * 83
    assert [text for _, text in said] == [f"no centroids: {OTHER_FRAME.reason}"]
