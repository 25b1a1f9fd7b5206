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
The keep-latest camera frame without ROS: one slot, the newest frame, never a backlog.

A put replaces whatever was there (the newest wins, a failed conversion included, and a
good frame replaces the error); each frame gets a cache key of its own; a command that
comes before the first image waits for it, woken by the put, and gives up at its
timeout or when told to stop; a cleared slot hands out nothing.
"""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace
from typing import Any

from m2sa_ros.cameras.latest_frame import Frame, LatestFrame
import numpy as np

JOIN_S = 30.0  # only where a test gives up: reaching it is a failure


def header(sec: int = 0, nanosec: int = 0, frame_id: str = "rgb_optical") -> Any:
    """Stand-in for a std_msgs/Header: LatestFrame reads only stamp.sec and stamp.nanosec."""
    return SimpleNamespace(stamp=SimpleNamespace(sec=sec, nanosec=nanosec), frame_id=frame_id)


def rgb(value: int = 0, height: int = 24, width: int = 32) -> np.ndarray:
    return np.full((height, width, 3), value, np.uint8)


def in_thread(target: Any) -> tuple[threading.Thread, list[Any]]:
    """Run ``target()`` in a thread; its return value lands in the list."""
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(target()), daemon=True)
    thread.start()
    return thread, out


def test_an_empty_slot_hands_out_nothing():
    latest = LatestFrame()
    assert latest.get() is None
    assert latest.wait(0.0) is None


def test_a_put_frame_carries_its_pixels_header_stamp_and_size():
    latest = LatestFrame()
    pixels, source = rgb(7, height=24, width=32), header(12, 345)
    frame = latest.put(pixels, source)
    assert latest.get() is frame
    assert frame.rgb is pixels and frame.header is source
    assert frame.stamp_ns == 12_000_000_345
    assert (frame.height, frame.width) == (24, 32)
    assert frame.error == ""


def test_the_newest_frame_wins_and_an_older_one_is_not_handed_out():
    latest = LatestFrame()
    old = latest.put(rgb(1), header(1))
    new = latest.put(rgb(2), header(2))
    assert latest.get() is new
    assert latest.get() is not old
    assert latest.wait(0.0) is new


def test_the_frame_put_last_wins_even_with_an_older_stamp():
    latest = LatestFrame()
    latest.put(rgb(1), header(5))
    last = latest.put(rgb(2), header(4))
    assert latest.get() is last


def test_every_received_frame_gets_a_cache_key_of_its_own_even_with_the_same_stamp():
    latest = LatestFrame(key_prefix="camera:left")
    keys = [latest.put(rgb(), header(3, 9)).key for _ in range(5)]
    assert len(set(keys)) == 5
    assert all(key.startswith("camera:left:") for key in keys)


def test_the_key_prefix_keeps_two_cameras_keys_apart():
    left, right = LatestFrame(key_prefix="camera:left"), LatestFrame(key_prefix="camera:right")
    assert left.put(rgb(), header(3)).key != right.put(rgb(), header(3)).key


def test_a_failed_conversion_holds_the_error_and_the_sent_size():
    latest = LatestFrame()
    latest.put(rgb(1), header(1))
    failed = latest.put(None, header(2), error="unsupported encoding 'yuv422'", height=48, width=64)
    assert latest.get() is failed
    assert failed.rgb is None and failed.error == "unsupported encoding 'yuv422'"
    assert (failed.height, failed.width) == (48, 64)


def test_a_good_frame_after_a_failed_one_clears_the_error():
    latest = LatestFrame()
    latest.put(None, header(1), error="bad encoding")
    good = latest.put(rgb(3), header(2))
    assert latest.get() is good and latest.get().error == ""


def test_a_command_before_the_first_image_is_woken_by_the_put():
    latest = LatestFrame()
    waiting = threading.Event()

    def not_stopped() -> bool:
        waiting.set()  # called with the slot's lock held, just before the wait releases it
        return False

    # A poll and a timeout longer than the test gives the thread: only the put can end the wait.
    thread, out = in_thread(lambda: latest.wait(timeout=600.0, should_stop=not_stopped, poll=600.0))
    assert waiting.wait(JOIN_S)
    put = latest.put(rgb(5), header(1))
    thread.join(JOIN_S)
    assert not thread.is_alive(), "the wait did not end on the put"
    assert out == [put]


def test_a_wait_with_a_frame_there_returns_it_at_once():
    latest = LatestFrame()
    frame = latest.put(rgb(), header(1))
    thread, out = in_thread(lambda: latest.wait(timeout=600.0, poll=600.0))
    thread.join(JOIN_S)
    assert not thread.is_alive() and out == [frame]


def test_a_wait_without_an_image_gives_up_at_its_timeout():
    assert LatestFrame().wait(0.05, poll=0.01) is None


def test_a_wait_ends_with_nothing_when_told_to_stop():
    latest = LatestFrame()
    stop = threading.Event()
    thread, out = in_thread(lambda: latest.wait(timeout=600.0, should_stop=stop.is_set, poll=0.01))
    stop.set()
    thread.join(JOIN_S)
    assert not thread.is_alive(), "the wait did not end on should_stop"
    assert out == [None]


def test_a_cleared_slot_hands_out_no_stale_frame():
    latest = LatestFrame()
    latest.put(rgb(), header(1))
    latest.clear()
    assert latest.get() is None
    assert latest.wait(0.0) is None
    fresh = latest.put(rgb(), header(2))
    assert latest.get() is fresh


def test_keys_stay_unique_when_frames_arrive_from_several_threads():
    latest = LatestFrame()
    keys: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(4)

    def feed() -> None:
        start.wait(timeout=JOIN_S)
        for _ in range(200):
            key = latest.put(rgb(), header(1)).key
            with lock:
                keys.append(key)

    threads = [threading.Thread(target=feed) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(JOIN_S)
        assert not thread.is_alive()
    assert len(set(keys)) == 800
    assert latest.get().key in keys


def test_age_counts_from_the_stamp():
    frame = Frame(rgb=None, header=header(10), key="k", stamp_ns=10_000_000_000, received_at=0.0)
    assert frame.age_s(12_500_000_000) == 2.5


def test_age_of_an_unstamped_frame_counts_from_its_arrival():
    frame = Frame(rgb=None, header=header(), key="k", stamp_ns=0, received_at=time.monotonic() - 100.0)
    assert frame.age_s(now_ns=5) >= 100.0


class CountingDecode:
    """A compressed image's decode: counts its calls; ``gate`` (when given) holds each call until set."""

    def __init__(self, pixels: np.ndarray | None, error: str = "", gate: threading.Event | None = None) -> None:
        self.pixels, self.error, self.gate = pixels, error, gate
        self.calls = 0
        self.started = threading.Event()

    def __call__(self) -> tuple[np.ndarray | None, str]:
        self.calls += 1
        self.started.set()
        if self.gate is not None:
            assert self.gate.wait(JOIN_S)
        return self.pixels, self.error


def test_a_pending_frame_is_not_decoded_until_taken_and_then_only_once():
    latest = LatestFrame()
    decode = CountingDecode(rgb(5, height=10, width=20))
    put = latest.put_pending(decode, header(4))
    assert latest.peek() is put and put.rgb is None and decode.calls == 0  # the stamp, not the pixels
    assert put.stamp_ns == 4_000_000_000
    taken = latest.get()
    assert decode.calls == 1 and taken.rgb is decode.pixels and (taken.height, taken.width) == (10, 20)
    assert taken.key == put.key and taken.pending is None
    assert latest.get() is taken and latest.wait(0.0) is taken and decode.calls == 1
    assert latest.peek() is taken  # the slot now holds the decoded frame


def test_a_pending_frame_that_does_not_decode_holds_the_reason():
    latest = LatestFrame()
    latest.put_pending(CountingDecode(None, error="not a JPEG or PNG"), header(1))
    failed = latest.get()
    assert failed.rgb is None and failed.error == "not a JPEG or PNG"


def test_frames_passed_over_are_never_decoded():
    latest = LatestFrame()
    skipped = [CountingDecode(rgb(i)) for i in range(5)]
    for i, decode in enumerate(skipped):
        latest.put_pending(decode, header(i))
    newest = CountingDecode(rgb(9))
    latest.put_pending(newest, header(9))
    assert latest.get().rgb is newest.pixels
    assert [d.calls for d in skipped] == [0] * 5 and newest.calls == 1


def test_two_takers_at_once_share_one_decode():
    latest = LatestFrame()
    gate = threading.Event()
    decode = CountingDecode(rgb(3), gate=gate)
    latest.put_pending(decode, header(1))
    first, got_first = in_thread(latest.get)
    assert decode.started.wait(JOIN_S)  # the first taker is decoding
    second, got_second = in_thread(latest.get)
    gate.set()
    first.join(JOIN_S)
    second.join(JOIN_S)
    assert got_first[0] is got_second[0] and decode.calls == 1


def test_a_frame_decoded_after_a_newer_one_came_leaves_the_newer_one_in_the_slot():
    latest = LatestFrame()
    gate = threading.Event()
    old = CountingDecode(rgb(1), gate=gate)
    latest.put_pending(old, header(1))
    taker, got = in_thread(latest.get)
    assert old.started.wait(JOIN_S)
    newer = latest.put(rgb(2), header(2))
    gate.set()
    taker.join(JOIN_S)
    assert got[0].rgb is old.pixels  # the taker gets the frame it took
    assert latest.peek() is newer  # and the newest stays the newest
