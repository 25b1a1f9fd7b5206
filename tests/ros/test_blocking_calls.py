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
The cap on blocking service/action calls, and the answer they wait for, without ROS.

Without a cap every call is let in; with one, the call past it is refused with a reason
that names the cap, a refused call takes no slot, and a call that ends (normally or with
an exception) frees its slot. ``wait_idle`` (deactivate) returns when the last call in
flight ends, and gives up at its timeout. An ``Answer`` hands its one result to the
waiting callback, runs ``then`` with it, and gives None once the context is no longer alive.
"""

from __future__ import annotations

from contextlib import ExitStack
import threading
from typing import Any

from m2sa_ros.rclpy_support.blocking_calls import Answer, BlockingCalls
import pytest

JOIN_S = 30.0  # only where a test gives up: reaching it is a failure


def capped(limit: int | None) -> BlockingCalls:
    calls = BlockingCalls()
    calls.limit = limit  # main sets it from the executor's threads
    return calls


def test_without_a_cap_every_call_is_admitted():
    calls = BlockingCalls()
    with ExitStack() as stack:
        assert all(stack.enter_context(calls.admit()) for _ in range(50))


def test_the_call_past_the_cap_is_refused():
    calls = capped(2)
    with calls.admit() as first, calls.admit() as second, calls.admit() as third:
        assert (first, second, third) == (True, True, False)


def test_the_refusal_names_the_cap():
    assert capped(2).too_many() == "queue full: 2 service/action calls already waiting"


def test_a_refused_call_takes_no_slot():
    calls = capped(1)
    with calls.admit() as first:
        assert first
        for _ in range(3):
            with calls.admit() as refused:
                assert not refused
    with calls.admit() as next_call:
        assert next_call


def test_a_call_that_ends_frees_its_slot():
    calls = capped(1)
    with calls.admit() as first:
        assert first
        with calls.admit() as refused:
            assert not refused
    with calls.admit() as after:
        assert after


def test_a_call_that_raises_frees_its_slot():
    calls = capped(1)
    with pytest.raises(RuntimeError, match="callback failed"):
        with calls.admit() as admitted:
            assert admitted
            raise RuntimeError("callback failed")
    with calls.admit() as after:
        assert after


def test_a_cap_of_zero_refuses_every_call():
    with capped(0).admit() as admitted:
        assert not admitted


def test_exactly_the_cap_is_admitted_among_calls_waiting_at_once():
    calls, callers = capped(3), 8
    admitted: list[bool] = []
    lock = threading.Lock()
    all_inside = threading.Barrier(callers)  # every caller is inside its block at once

    def call() -> None:
        with calls.admit() as ok:
            with lock:
                admitted.append(ok)
            all_inside.wait(timeout=JOIN_S)

    threads = [threading.Thread(target=call) for _ in range(callers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(JOIN_S)
        assert not thread.is_alive()
    assert sorted(admitted) == [False] * 5 + [True] * 3
    with calls.admit() as after:  # all three slots are free again
        assert after


def test_wait_idle_returns_at_once_when_no_call_is_in_flight():
    calls = capped(2)
    with calls.admit():
        pass
    thread = threading.Thread(target=calls.wait_idle, args=(600.0,), daemon=True)
    thread.start()
    thread.join(JOIN_S)
    assert not thread.is_alive()


def test_wait_idle_returns_when_the_last_call_in_flight_ends():
    calls = capped(2)
    inside, release = threading.Barrier(3), threading.Event()
    events: list[str] = []

    def call() -> None:
        with calls.admit() as ok:
            assert ok
            inside.wait(timeout=JOIN_S)
            release.wait(JOIN_S)
            events.append("call ending")  # still counted in: its slot is freed after this

    def deactivate() -> None:
        calls.wait_idle(600.0)
        events.append("idle")

    callers = [threading.Thread(target=call, daemon=True) for _ in range(2)]
    for caller in callers:
        caller.start()
    inside.wait(timeout=JOIN_S)  # both calls are in flight
    idle = threading.Thread(target=deactivate, daemon=True)
    idle.start()
    release.set()
    idle.join(JOIN_S)
    assert not idle.is_alive(), "wait_idle did not end when the calls ended"
    assert events == ["call ending", "call ending", "idle"]
    for caller in callers:
        caller.join(JOIN_S)


def test_wait_idle_gives_up_at_its_timeout_while_a_call_stays_in_flight():
    calls = capped(1)
    with calls.admit() as admitted:
        assert admitted
        calls.wait_idle(0.05)  # returns instead of waiting for this very call
        with calls.admit() as refused:
            assert not refused  # the call is still counted


def test_an_answer_delivered_from_another_thread_ends_the_wait_with_it():
    answer = Answer()
    result = object()
    out: list[Any] = []
    waiter = threading.Thread(target=lambda: out.append(answer.wait(alive=lambda: True)), daemon=True)
    waiter.start()
    answer(result)  # what the pipeline calls as the request's on_done
    waiter.join(JOIN_S)
    assert not waiter.is_alive() and out == [result]


def test_then_runs_with_the_result_already_in():
    seen: list[tuple[Any, Any]] = []
    answer = Answer(then=lambda msg: seen.append((msg, answer.result)))
    answer("result")
    assert seen == [("result", "result")]
    assert answer.wait(alive=lambda: True) == "result"


def test_an_answer_gives_none_once_the_context_is_no_longer_alive():
    answer = Answer()
    out: list[Any] = []
    alive = threading.Event()
    alive.set()
    waiter = threading.Thread(target=lambda: out.append(answer.wait(alive=alive.is_set)), daemon=True)
    waiter.start()
    alive.clear()  # the context shut down
    waiter.join(JOIN_S)
    assert not waiter.is_alive() and out == [None]
