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

"""SignalSafeEvent: set by a signal handler while the main thread waits on it, it wakes the waiter."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading

from m2sa_ros.rclpy_support.signal_event import SignalSafeEvent
import pytest


def test_a_signal_handler_that_sets_it_wakes_the_main_thread_waiting_on_it():
    event = SignalSafeEvent()
    previous = signal.signal(signal.SIGALRM, lambda *_: event.set())
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        assert event.wait(60), "the handler's set() did not wake the wait"
        assert event.is_set()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        event.close()


def test_wait_times_out_false_and_wakes_every_waiting_thread_once_set():
    event = SignalSafeEvent()
    assert event.wait(0.01) is False and not event.is_set()
    woken: list[bool] = []
    waiters = [threading.Thread(target=lambda: woken.append(event.wait(60))) for _ in range(3)]
    for waiter in waiters:
        waiter.start()
    event.set()
    event.set()  # a second set is harmless
    for waiter in waiters:
        waiter.join(60)
    assert woken == [True, True, True]
    event.close()
    assert event.wait(0.01), "the flag stays readable after close"


# SIGALRM from an interval timer, handled inside wait() 5,000 times; its own process, so that
# the timer is not pytest-timeout's.
STRESS = """
import signal, sys
from m2sa_ros.rclpy_support.signal_event import SignalSafeEvent
box = {}
signal.signal(signal.SIGALRM, lambda *_: box["event"].set())
for _ in range(5000):
    event = box["event"] = SignalSafeEvent()
    signal.setitimer(signal.ITIMER_REAL, 0.0003)
    while not event.wait(0.00005):
        pass
    event.close()
print("done")
"""


@pytest.mark.integration
def test_five_thousand_handlers_setting_it_inside_short_timed_waits_never_hang():
    """
    The handler lands in every part of wait(), the end of a timed wait included.

    With threading.Event in its place the same loop hung within the first 1,000 here: the
    handler's set() waits for the lock that the interrupted wait() holds.
    """
    run = subprocess.run([sys.executable, "-c", STRESS], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and run.stdout.strip() == "done", run.stderr[-2000:]
