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

"""The worker's contract, without ROS: order, bounded queue, exactly one ending per job."""

from __future__ import annotations

import threading
import time
from typing import Callable

from m2sa_ros.worker import CommandWorker, Job
import pytest


class Recorder:

    def __init__(self, gate: threading.Event | None = None) -> None:
        self.ran: list[int] = []
        self.rejected: list[tuple[int, str]] = []
        self.errors: list[tuple[int, str]] = []
        self.gate = gate
        self.started = threading.Event()

    def handle(self, job: Job) -> None:
        self.started.set()
        if self.gate is not None:
            while not self.gate.is_set() and not job.should_stop():
                time.sleep(0.005)
        if job.payload == "boom":
            raise RuntimeError("handler exploded")
        self.ran.append(job.seq)

    def reject(self, job: Job, reason: str) -> None:
        self.rejected.append((job.seq, reason))

    def crashed(self, job: Job, exc: BaseException) -> None:
        self.errors.append((job.seq, str(exc)))

    # The worker calls a job's handler by these names (worker.JobHandler).
    run = handle


def test_jobs_run_in_order_and_full_queue_refuses():
    gate = threading.Event()
    rec = Recorder(gate)
    worker = CommandWorker(max_queue=2)
    try:
        assert worker.submit(Job("a", rec))
        assert rec.started.wait(5)  # "a" is running, the queue is empty
        assert worker.submit(Job("b", rec)) and worker.submit(Job("c", rec))
        assert worker.depth == 2 and worker.busy
        assert not worker.submit(Job("d", rec))  # full: refused, not queued
        gate.set()
        deadline = time.monotonic() + 5
        while len(rec.ran) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert rec.ran == [1, 2, 3]
    finally:
        worker.stop("stopped")


def test_handler_exception_is_reported_and_the_thread_survives():
    rec = Recorder()
    worker = CommandWorker(max_queue=4)
    try:
        worker.submit(Job("boom", rec))
        worker.submit(Job("fine", rec))
        deadline = time.monotonic() + 5
        while not rec.ran and time.monotonic() < deadline:
            time.sleep(0.01)
        assert rec.errors == [(1, "handler exploded")]
        assert rec.ran == [2]
    finally:
        worker.stop("stopped")


def test_stop_cancels_the_running_job_and_rejects_the_queued_ones():
    rec = Recorder(threading.Event())  # gate never opens: the handler runs until cancelled
    worker = CommandWorker(max_queue=4)
    running = Job("a", rec)
    worker.submit(running)
    assert rec.started.wait(5)
    queued = [Job("b", rec), Job("c", rec)]
    for job in queued:
        worker.submit(job)
    assert worker.stop("cancelled: node deactivated", timeout=5)
    assert running.should_stop() and running.cancel_reason == "cancelled: node deactivated"
    assert rec.ran == [1]  # the handler returned after seeing the cancel
    assert rec.rejected == [(2, "cancelled: node deactivated"), (3, "cancelled: node deactivated")]
    assert all(job.should_stop() for job in queued)
    assert not worker.submit(Job("late", rec))  # a stopped worker takes nothing


def test_stop_when_predicate_cancels_like_the_event():
    flag = {"stop": False}
    job = Job("x", Recorder(), stop_when=lambda: flag["stop"])
    assert not job.should_stop()
    flag["stop"] = True
    assert job.should_stop()


def test_first_cancel_reason_wins():
    job = Job("x", Recorder())
    job.request_cancel("cancelled by the client")
    job.request_cancel("cancelled: node deactivated")
    assert job.cancel_reason == "cancelled by the client"


def test_max_queue_must_be_positive():
    with pytest.raises(ValueError, match="max_queue must be >= 1"):
        CommandWorker(max_queue=0)


class BatchRecorder(Recorder):
    """A handler that can batch: each model call is one entry of ``calls``."""

    def __init__(self, name: str, calls: list, gate: threading.Event | None = None) -> None:
        super().__init__(gate)
        self.name, self.calls = name, calls

    def run(self, job: Job) -> None:
        self.handle(job)
        self.calls.append([(self.name, job.payload)])

    def run_batch(self, jobs: list[Job]) -> None:
        self.calls.append([(self.name, job.payload) for job in jobs])


def _wait_for(count: Callable[[], int], n: int) -> None:
    deadline = time.monotonic() + 5
    while count() < n and time.monotonic() < deadline:
        time.sleep(0.01)


def test_each_job_runs_on_its_own_handler_and_only_one_handlers_jobs_share_a_batch():
    """Two kinds of job in one worker: no dispatch on the payload, no batch across handlers."""
    gate, calls = threading.Event(), []
    commands, others = BatchRecorder("commands", calls, gate), BatchRecorder("others", calls)
    plain = Recorder()  # no run_batch: its jobs always run alone
    worker = CommandWorker(max_queue=4, lanes=("a", "b", "c"), max_batch=3)
    try:
        assert worker.submit(Job("first", commands, lane="a"))
        assert commands.started.wait(5)
        assert worker.submit(Job("x", others, lane="b"))
        assert worker.submit(Job("c1", commands, lane="a"))
        assert worker.submit(Job("c2", commands, lane="c"))
        assert worker.submit(Job("p", plain, lane="b"))
        gate.set()
        _wait_for(lambda: len(calls) + len(plain.ran), 4)
        # Round-robin from lane b: "x" heads a batch the commands cannot join; then the
        # commands of lanes c and a share one call; the plain handler's job runs alone.
        assert calls == [[("commands", "first")], [("others", "x")], [("commands", "c2"), ("commands", "c1")]]
        assert plain.ran == [5] and worker.batches == 1
    finally:
        worker.stop("stopped")


def test_a_crash_handler_that_raises_does_not_stop_the_worker(capsys):
    class Broken(Recorder):

        def crashed(self, job: Job, exc: BaseException) -> None:
            raise RuntimeError("the crash handler failed too")

    broken, fine = Broken(), Recorder()
    worker = CommandWorker(max_queue=4)
    try:
        worker.submit(Job("boom", broken))
        worker.submit(Job("after", fine))
        _wait_for(lambda: len(fine.ran), 1)
        assert fine.ran == [2]
    finally:
        worker.stop("stopped")
    assert "the crash handler failed too" in capsys.readouterr().err


def test_stop_rejects_each_queued_job_through_its_own_handler():
    gate = threading.Event()  # never opens: the running job waits for its cancel
    first, second = Recorder(gate), Recorder()
    worker = CommandWorker(max_queue=4)
    worker.submit(Job("a", first))
    assert first.started.wait(5)
    worker.submit(Job("b", second))
    worker.submit(Job("c", first))
    assert worker.stop("cancelled: node deactivated", timeout=5)
    assert second.rejected == [(2, "cancelled: node deactivated")]
    assert first.rejected == [(3, "cancelled: node deactivated")]
