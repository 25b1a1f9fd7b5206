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
Letting the last answers leave at shutdown, without ROS: the acks and the action results' grace.

``wait_results_acked`` asks each result publisher to wait for its subscribers' acks, out
of one shared budget, skipping absent ones and carrying on past one that fails.
``ActionResultGrace`` waits for the result futures of every server to be done, ending when
they are (not at its timeout), then gives the goals a grace for rclpy's send task, once per
goal however often a shutdown passes; a future never done ends the wait at the timeout.
``ShutdownDeadline`` gives all the waits of one shutdown one budget inside launch's 5 s
sigterm_timeout, however many times the shutdown passes them.
Most tests run the module on a fake clock, so waiting takes no real time and what the
module slept is known exactly.
"""

from __future__ import annotations

from concurrent.futures import Future
import threading
from typing import Any

from m2sa_ros.rclpy_support import shutdown_delivery
from m2sa_ros.rclpy_support.shutdown_delivery import (
    ActionResultGrace,
    SHUTDOWN_BUDGET_S,
    ShutdownDeadline,
    wait_results_acked,
)
import pytest

GRACE_S = ActionResultGrace.GRACE_S
JOIN_S = 30.0  # only where a test gives up: reaching it is a failure


class FakeClock:
    """The module's ``time``: monotonic() reads the fake clock, sleep() advances it and is recorded."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def clock(monkeypatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(shutdown_delivery, "time", fake)
    return fake


class ResultFuture:
    """A goal's result future, done once the clock reaches ``done_at`` (None = never)."""

    def __init__(self, clock: FakeClock, done_at: float | None) -> None:
        self._clock, self._done_at = clock, done_at

    def done(self) -> bool:
        return self._done_at is not None and self._clock.now >= self._done_at


class Server:
    """An action server as ActionResultGrace reads it: rclpy's ``_result_futures`` (goal id -> future)."""

    def __init__(self, *futures: Any) -> None:
        self._result_futures = {bytes([n]) * 16: future for n, future in enumerate(futures)}


class Publisher:
    """A result publisher: records the Duration it was given, takes ``ack_s`` (at most that) on the clock, or raises."""

    def __init__(self, clock: FakeClock, ack_s: float = 0.0, error: Exception | None = None) -> None:
        self._clock, self._ack_s, self._error = clock, ack_s, error
        self.waited_ns: list[int] = []

    def wait_for_all_acked(self, timeout: Any) -> bool:
        self.waited_ns.append(timeout.nanoseconds)
        if self._error is not None:
            raise self._error
        self._clock.now += min(self._ack_s, timeout.nanoseconds / 1e9)  # rclpy returns at the timeout
        return True


@pytest.mark.ros
def test_each_publisher_waits_for_acks_out_of_one_shared_budget(clock):
    slow, slower, last = Publisher(clock, ack_s=1.5), Publisher(clock, ack_s=0.5), Publisher(clock)
    wait_results_acked([slow, slower, last], timeout_s=2.0)
    assert slow.waited_ns == [2_000_000_000]
    assert slower.waited_ns == [500_000_000]
    assert last.waited_ns == [0]  # the budget is spent: asked, but given no time
    assert clock.sleeps == []  # the acks end the wait, not a sleep


@pytest.mark.ros
def test_absent_publishers_are_skipped_and_a_generator_is_taken(clock):
    first, second = Publisher(clock), Publisher(clock)
    wait_results_acked((pub for pub in (None, first, None, second)), timeout_s=1.0)
    assert first.waited_ns == [1_000_000_000] and second.waited_ns == [1_000_000_000]


@pytest.mark.ros
def test_a_publisher_that_fails_does_not_keep_the_others_from_their_acks(clock):
    broken = Publisher(clock, error=RuntimeError("publisher already destroyed"))
    after = Publisher(clock)
    wait_results_acked([broken, after], timeout_s=2.0)
    assert broken.waited_ns and after.waited_ns == [2_000_000_000]


def test_the_grace_follows_once_the_result_futures_are_done_not_at_the_timeout(clock):
    start = clock.now
    ActionResultGrace().wait([Server(ResultFuture(clock, start + 0.5))], timeout_s=2.0)
    assert clock.sleeps.count(GRACE_S) == 1 and clock.sleeps[-1] == GRACE_S
    waited = clock.now - GRACE_S - start
    assert 0.5 <= waited < 0.55  # ended on the future, well before the 2 s timeout


def test_the_futures_of_every_server_are_waited_for(clock):
    start = clock.now
    servers = [Server(ResultFuture(clock, start)), Server(ResultFuture(clock, start + 0.3),
                                                          ResultFuture(clock, start + 0.8))]
    ActionResultGrace().wait(servers, timeout_s=2.0)
    assert 0.8 <= clock.now - GRACE_S - start < 0.85


def test_without_ended_goals_there_is_no_grace(clock):
    class NotAnActionServer:
        pass

    ActionResultGrace().wait([Server(), NotAnActionServer()], timeout_s=2.0)
    ActionResultGrace().wait([], timeout_s=2.0)
    assert clock.sleeps == []


def test_the_grace_is_waited_once_per_goal_however_often_a_shutdown_passes(clock):
    grace = ActionResultGrace()
    servers = [Server(ResultFuture(clock, clock.now), ResultFuture(clock, clock.now))]
    for _ in range(3):  # stop, close's stop, the servers' destruction
        grace.wait(servers, timeout_s=2.0)
    assert clock.sleeps == [GRACE_S]


def test_a_goal_ended_after_the_last_grace_gets_its_own(clock):
    grace = ActionResultGrace()
    first = ResultFuture(clock, clock.now)
    grace.wait([Server(first)], timeout_s=2.0)
    grace.wait([Server(first, ResultFuture(clock, clock.now))], timeout_s=2.0)
    assert clock.sleeps == [GRACE_S, GRACE_S]


def test_a_result_never_done_ends_the_wait_at_the_timeout(clock):
    start = clock.now
    ActionResultGrace().wait([Server(ResultFuture(clock, None))], timeout_s=2.0)
    assert 2.0 <= clock.now - start <= 2.0 + GRACE_S + 0.02


def test_a_goal_still_running_at_the_timeout_gets_its_grace_when_it_ends(clock):
    grace = ActionResultGrace()
    start = clock.now
    server = Server(ResultFuture(clock, start + 3.0))  # a goal that ends after stop()'s 2 s
    grace.wait([server], timeout_s=2.0)  # stop(): gives up at the timeout
    grace.wait([server], timeout_s=2.0)  # the servers' destruction: the goal ends meanwhile
    assert clock.now >= start + 3.0 + GRACE_S  # its result had the grace before the servers go


def test_the_wait_ends_when_another_thread_completes_the_result():
    future: Future[Any] = Future()
    thread = threading.Thread(target=ActionResultGrace().wait, args=([Server(future)],),
                              kwargs={"timeout_s": 600.0}, daemon=True)
    thread.start()
    future.set_result("the goal's result")  # rclpy's executor completing the result future
    thread.join(JOIN_S)
    assert not thread.is_alive(), "the grace did not end when the result future was done"


def test_a_deadline_not_started_leaves_each_wait_its_own_bound(clock):
    deadline = ShutdownDeadline(budget_s=3.5)
    clock.now += 100.0
    assert not deadline.started and deadline.left(2.0) == 2.0


def test_every_wait_of_one_shutdown_shares_one_budget_inside_launchs_sigterm_timeout(clock):
    assert SHUTDOWN_BUDGET_S + 3 * GRACE_S < 5.0  # launch's sigterm_timeout, with the grace of three passes
    deadline = ShutdownDeadline()
    start = clock.now
    deadline.start()
    never_acked = Publisher(clock, ack_s=2.0)  # spends all it is given
    never_sent = Server(ResultFuture(clock, None))
    grace = ActionResultGrace()
    # main's stop(), close()'s stop() (the deadline keeps its first start), the servers' destruction
    wait_results_acked([never_acked], timeout_s=deadline.left(2.0))
    grace.wait([never_sent], timeout_s=deadline.left(2.0))
    deadline.start()
    wait_results_acked([never_acked], timeout_s=deadline.left(2.0))
    grace.wait([never_sent], timeout_s=deadline.left(2.0))
    grace.wait([never_sent], timeout_s=deadline.left(2.0))
    assert never_acked.waited_ns == [2_000_000_000, 0]
    assert SHUTDOWN_BUDGET_S <= clock.now - start <= SHUTDOWN_BUDGET_S + 0.02
    assert deadline.left(2.0) == 0.0
