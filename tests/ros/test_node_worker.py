"""The worker's contract, without ROS: order, bounded queue, exactly one ending per job."""

from __future__ import annotations

import threading
import time

import pytest

from m2sa_ros.worker import CommandWorker, Job


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

    def error(self, job: Job, exc: BaseException) -> None:
        self.errors.append((job.seq, str(exc)))


def test_jobs_run_in_order_and_full_queue_refuses():
    gate = threading.Event()
    rec = Recorder(gate)
    worker = CommandWorker(rec.handle, rec.reject, max_queue=2, on_handler_error=rec.error)
    try:
        assert worker.submit(Job("a"))
        assert rec.started.wait(5)  # "a" is running, the queue is empty
        assert worker.submit(Job("b")) and worker.submit(Job("c"))
        assert worker.depth == 2 and worker.busy
        assert not worker.submit(Job("d"))  # full: refused, not queued
        gate.set()
        deadline = time.monotonic() + 5
        while len(rec.ran) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert rec.ran == [1, 2, 3]
    finally:
        worker.stop("stopped")


def test_handler_exception_is_reported_and_the_thread_survives():
    rec = Recorder()
    worker = CommandWorker(rec.handle, rec.reject, max_queue=4, on_handler_error=rec.error)
    try:
        worker.submit(Job("boom"))
        worker.submit(Job("fine"))
        deadline = time.monotonic() + 5
        while not rec.ran and time.monotonic() < deadline:
            time.sleep(0.01)
        assert rec.errors == [(1, "handler exploded")]
        assert rec.ran == [2]
    finally:
        worker.stop("stopped")


def test_stop_cancels_the_running_job_and_rejects_the_queued_ones():
    rec = Recorder(threading.Event())  # gate never opens: the handler runs until cancelled
    worker = CommandWorker(rec.handle, rec.reject, max_queue=4)
    running = Job("a")
    worker.submit(running)
    assert rec.started.wait(5)
    queued = [Job("b"), Job("c")]
    for job in queued:
        worker.submit(job)
    assert worker.stop("cancelled: node deactivated", timeout=5)
    assert running.should_stop() and running.cancel_reason == "cancelled: node deactivated"
    assert rec.ran == [1]  # the handler returned after seeing the cancel
    assert rec.rejected == [(2, "cancelled: node deactivated"), (3, "cancelled: node deactivated")]
    assert all(job.should_stop() for job in queued)
    assert not worker.submit(Job("late"))  # a stopped worker takes nothing


def test_stop_when_predicate_cancels_like_the_event():
    flag = {"stop": False}
    job = Job("x", stop_when=lambda: flag["stop"])
    assert not job.should_stop()
    flag["stop"] = True
    assert job.should_stop()


def test_first_cancel_reason_wins():
    job = Job("x")
    job.request_cancel("cancelled by the client")
    job.request_cancel("cancelled: node deactivated")
    assert job.cancel_reason == "cancelled by the client"


def test_max_queue_must_be_positive():
    with pytest.raises(ValueError, match="max_queue must be >= 1"):
        CommandWorker(lambda job: None, lambda job, reason: None, max_queue=0)
