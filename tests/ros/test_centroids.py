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

"""The stamp-matching buffer of depth and camera_info and its wait for a late item."""

from __future__ import annotations

import threading

from m2sa_ros.depth.stamped_buffer import StampedBuffer
import pytest


def test_stamped_buffer_nearest_within_tolerance():
    buf: StampedBuffer[str] = StampedBuffer(capacity=3)
    assert buf.nearest(0, 10**9) is None
    for stamp, name in [(100, "a"), (200, "b"), (300, "c"), (400, "d")]:
        buf.push(stamp, name)
    assert len(buf) == 3  # "a" fell out
    assert buf.nearest(260, 100) == "c"
    assert buf.nearest(240, 100) == "b"
    assert buf.nearest(100, 50) is None  # "b" is 100 away, "a" is gone
    assert buf.nearest(460, 50) is None
    with pytest.raises(ValueError):
        StampedBuffer(capacity=0)


def _waiter(buf: StampedBuffer[str], stamp: int, tolerance: int, timeout: float) -> tuple[threading.Thread, dict]:
    """Run ``wait_near`` on a thread; ``out["waiting"]`` is set once it has looked and found nothing yet."""
    out: dict = {"waiting": threading.Event()}

    def should_stop() -> bool:
        out["waiting"].set()
        return out.get("stop", False)

    def run() -> None:
        out["found"] = buf.wait_near(stamp, tolerance, timeout, should_stop)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def test_wait_near_returns_once_the_late_item_is_pushed():
    buf: StampedBuffer[str] = StampedBuffer(capacity=3)
    buf.push(800, "the frame before")
    thread, out = _waiter(buf, 1000, 50, timeout=60.0)
    assert out["waiting"].wait(30)  # it is waiting: the stream (800) is behind the stamp
    buf.push(1010, "its depth")
    thread.join(30)
    assert not thread.is_alive() and out["found"] is True


def test_wait_near_does_not_wait_without_a_stream_or_once_the_stream_passed_the_stamp():
    asked: list[int] = []

    def should_stop() -> bool:
        asked.append(1)
        return False

    buf: StampedBuffer[str] = StampedBuffer(capacity=3)
    assert buf.wait_near(1000, 50, 60.0, should_stop) is False  # a camera without depth
    buf.push(1200, "a later frame's depth")
    assert buf.wait_near(1000, 50, 60.0, should_stop) is False  # no nearer one will come
    buf.push(1040, "within the tolerance")
    assert buf.wait_near(1000, 50, 60.0, should_stop) is True
    assert asked == []  # none of these looked twice


def test_wait_near_ends_at_its_timeout_and_when_told_to_stop():
    buf: StampedBuffer[str] = StampedBuffer(capacity=3)
    buf.push(800, "behind")
    assert buf.wait_near(1000, 50, 0.0) is False
    thread, out = _waiter(buf, 1000, 50, timeout=60.0)
    assert out["waiting"].wait(30)
    out["stop"] = True  # a cancelled command: checked at least every 50 ms
    thread.join(30)
    assert not thread.is_alive() and out["found"] is False
