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

"""The node's heap trimmer: glibc's malloc_trim at most once per period, never when off."""

from __future__ import annotations

import ctypes.util
import sys

from m2sa_ros.model.memory import HeapTrimmer
import pytest

pytestmark = pytest.mark.integration


class FakeClock:

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_trims_at_most_once_per_period():
    clock, calls = FakeClock(), []
    heap = HeapTrimmer(5.0, clock=clock, trim=lambda pad: calls.append(pad) or 1)
    assert not heap.maybe_trim()  # the period counts from start-up
    clock.now += 5.0
    assert heap.maybe_trim() and calls == [0]
    clock.now += 4.9
    assert not heap.maybe_trim()
    clock.now += 0.1
    assert heap.maybe_trim() and heap.trims == 2


def test_period_zero_never_trims():
    clock, calls = FakeClock(), []
    heap = HeapTrimmer(0.0, clock=clock, trim=calls.append)
    clock.now += 1e6
    assert not heap.available and not heap.maybe_trim() and calls == []


@pytest.mark.skipif(not sys.platform.startswith("linux") or ctypes.util.find_library("c") is None,
                    reason="glibc only")
def test_real_malloc_trim_runs():
    """On this (glibc) machine the real call is found and returns without harm."""
    clock = FakeClock()
    heap = HeapTrimmer(1.0, clock=clock)
    assert heap.available
    blocks = [bytearray(64 * 1024) for _ in range(200)]  # something to give back
    del blocks
    clock.now += 1.0
    assert heap.maybe_trim()


@pytest.mark.ros
@pytest.mark.parametrize("period,trimmed", [(0.01, True), (0.0, False)])
def test_node_trims_when_idle_after_a_command(module_context, period, trimmed):
    import threading
    import time

    from m2sa_core.inference import Segmenter
    from node_harness import DirectNode, good_image

    harness = DirectNode(module_context, Segmenter.from_pretrained("tiny", device="cpu", max_new_tokens=3),
                         heap_trim_period=period)
    try:
        heap = harness.node._pipeline.heap
        asked = threading.Event()  # the worker, idle after the command, asked the trimmer
        maybe_trim = heap.maybe_trim

        def ask() -> bool:
            try:
                return maybe_trim()
            finally:
                asked.set()

        heap.maybe_trim = ask
        harness.node._on_image(good_image())
        time.sleep(0.02)
        assert harness.command("turn on the TV").success
        # The worker trims after it has delivered the result (the answer is never delayed by
        # a trim), so the trim may land just after the result reaches the test.
        assert harness.node._pipeline.heap is heap
        assert asked.wait(10), "the worker did not ask the trimmer after the command"
        assert (heap.trims > 0) == trimmed, heap.trims
    finally:
        harness.close()
