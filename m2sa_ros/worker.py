"""One worker thread with bounded queues: where model work happens.

Inference takes from tens of milliseconds (tiny, CPU) to seconds (7B); if it ran in a
ROS callback, image callbacks and the lifecycle services would stall behind it. So
commands become :class:`Job` objects, queued here (bounded: a robot flooding the node
gets an explicit "queue full" instead of an ever-growing latency), and one thread runs
them in order (tracked frames of the ``track`` action go through the same queue, so
they share the model fairly with commands). The worker guarantees the node's contract that every accepted job is
finished exactly once: run by the handler, or rejected when the worker stops.

With several cameras each camera is a *lane* with a queue (and ``max_queue``) of its
own. Lanes are served round-robin, so one busy camera cannot starve another, and
commands waiting on several lanes together are handed to ``batch_handler`` as one
batch - one model call for all of them (one per lane per round, up to ``max_batch``).
One lane, the single-camera node, runs exactly as before: one job at a time, in order.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

@dataclass
class Job:
    """One command on its way through the node.

    ``payload`` is whatever the handler needs (the node puts its request there);
    ``cancel`` is set by a client's cancel request or by the worker when it stops, and
    handlers poll it through :meth:`should_stop` between stages and during generation.
    """

    payload: Any
    cancel: threading.Event = field(default_factory=threading.Event)
    enqueued_at: float = field(default_factory=time.monotonic)
    seq: int = 0
    cancel_reason: str = ""
    # An outside source of cancellation (an action goal's cancel state), polled too.
    stop_when: Callable[[], bool] | None = None
    # Counts against max_queue. Tracked frames do not: each running track has at most
    # one waiting (m2sa_ros.tracks), so they cannot flood the queue, and they must not
    # make ordinary commands fail with "queue full".
    bounded: bool = True
    # The camera whose queue it waits in ("" = the single camera).
    lane: str = ""
    # Whether it may share a model call with other lanes' jobs (commands yes, tracked frames no).
    batchable: bool = True

    def request_cancel(self, reason: str) -> None:
        """Ask the handler to stop at its next check; the first reason given wins."""
        if not self.cancel.is_set():
            self.cancel_reason = reason
            self.cancel.set()

    def should_stop(self) -> bool:
        return self.cancel.is_set() or (self.stop_when is not None and bool(self.stop_when()))


class CommandWorker:
    """Runs ``handler(job)`` for each submitted job on one thread, in order per lane.

    ``reject(job, reason)`` finishes jobs that will never run (the worker stopped
    before reaching them). Exceptions escaping the handler are passed to
    ``on_handler_error(job, exc)`` (once per job of a failed batch) so the node can
    still answer; the thread survives. ``lanes`` name the queues (default: one, "");
    with ``batch_handler`` and ``max_batch`` > 1, batchable jobs at the heads of several
    lanes run together as ``batch_handler(jobs)``.
    """

    def __init__(self, handler: Callable[[Job], None], reject: Callable[[Job, str], None],
                 max_queue: int, on_handler_error: Callable[[Job, BaseException], None] | None = None,
                 name: str = "m2sa-worker", lanes: tuple[str, ...] = ("",),
                 batch_handler: Callable[[list[Job]], None] | None = None, max_batch: int = 1) -> None:
        if max_queue < 1:
            raise ValueError(f"max_queue must be >= 1, got {max_queue}")
        if not lanes or len(set(lanes)) != len(lanes):
            raise ValueError(f"lanes must be distinct and at least one, got {lanes!r}")
        self._handler = handler
        self._reject = reject
        self._on_handler_error = on_handler_error
        self._batch_handler = batch_handler
        self._max_batch = max(1, int(max_batch)) if batch_handler is not None else 1
        # Unbounded deques: max_queue is enforced per lane on bounded jobs in submit().
        self._lanes: dict[str, deque[Job]] = {lane: deque() for lane in lanes}
        self._order = list(lanes)
        self._next = 0  # the lane served first next time (round-robin)
        self._max_queue = max_queue
        self._waiting = dict.fromkeys(lanes, 0)  # bounded jobs queued, per lane
        self._seq = itertools.count(1)
        self._current: list[Job] = []
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._stopping = False
        self._stop_reason = ""
        self.batches = 0  # model calls with more than one job (diagnostics, tests)
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    @property
    def max_queue(self) -> int:
        """Commands that may wait per lane (per camera)."""
        return self._max_queue

    @property
    def depth(self) -> int:
        """Commands waiting in every lane (not counting the running ones nor tracked frames)."""
        with self._lock:
            return sum(self._waiting.values())

    def depth_of(self, lane: str) -> int:
        """Commands waiting in one lane."""
        with self._lock:
            return self._waiting.get(lane, 0)

    @property
    def busy(self) -> bool:
        with self._lock:
            return bool(self._current)

    def busy_with(self, lane: str) -> bool:
        """Whether a job of ``lane`` is running now."""
        with self._lock:
            return any(job.lane == lane for job in self._current)

    def queued(self) -> list[Job]:
        """A snapshot of the waiting jobs, every lane, in submission order."""
        with self._lock:
            return sorted((job for lane in self._lanes.values() for job in lane), key=lambda j: j.seq)

    def submit(self, job: Job) -> bool:
        """Queue a job; False (and nothing queued) when its lane is full or the worker stops."""
        with self._lock:
            lane = self._lanes.get(job.lane)
            if lane is None:
                raise ValueError(f"unknown lane {job.lane!r} (lanes: {self._order})")
            if self._stopping or (job.bounded and self._waiting[job.lane] >= self._max_queue):
                return False
            job.seq = next(self._seq)
            if job.bounded:
                self._waiting[job.lane] += 1
            lane.append(job)
            self._cond.notify()
            return True

    def stop(self, reason: str, timeout: float = 30.0) -> bool:
        """Cancel the running jobs, reject the queued ones with ``reason``, join the thread.

        Returns False if the thread did not finish within ``timeout`` (a handler that
        ignores cancellation); the queued jobs are answered either way.
        """
        with self._lock:
            if self._stopping:
                return not self._thread.is_alive()
            self._stopping = True
            self._stop_reason = reason
            current = list(self._current)
            queued = sorted((job for lane in self._lanes.values() for job in lane), key=lambda j: j.seq)
            for lane in self._lanes.values():
                lane.clear()
            self._waiting = dict.fromkeys(self._waiting, 0)
            self._cond.notify_all()
        for job in current:
            job.request_cancel(reason)
        for job in queued:
            job.request_cancel(reason)
            self._reject(job, reason)
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _take(self) -> list[Job]:
        """The next jobs to run (lock held): round-robin over lanes, a batch when several wait."""
        count = len(self._order)
        jobs: list[Job] = []
        last = None
        while len(jobs) < self._max_batch:
            took = False
            for i in range(count):
                index = (self._next + i) % count
                lane = self._lanes[self._order[index]]
                if not lane:
                    continue
                head = lane[0]
                if jobs and not head.batchable:
                    continue  # a tracked frame runs alone, next turn
                jobs.append(lane.popleft())
                last, took = index, True
                if not head.batchable or len(jobs) >= self._max_batch:
                    break
            if not took or not jobs[0].batchable or len(jobs) >= self._max_batch:
                break
        if last is not None:
            self._next = (last + 1) % count  # the lane after the last one served goes first next
        for job in jobs:
            if job.bounded:
                self._waiting[job.lane] -= 1
        return jobs

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._stopping and not any(self._lanes.values()):
                    self._cond.wait()
                if self._stopping:
                    return
                jobs = self._take()
                self._current = jobs
            try:
                if len(jobs) == 1:
                    self._handler(jobs[0])
                else:
                    self.batches += 1
                    assert self._batch_handler is not None
                    self._batch_handler(jobs)
            except BaseException as exc:  # noqa: BLE001 - the thread must outlive any job
                if self._on_handler_error is not None:
                    for job in jobs:
                        self._on_handler_error(job, exc)
            finally:
                with self._lock:
                    self._current = []
