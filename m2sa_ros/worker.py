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
One worker thread with bounded queues: where model work happens.

Inference takes from tens of milliseconds (tiny, CPU) to seconds (7B); if it ran in a
ROS callback, image callbacks and the lifecycle services would stall behind it. So
commands become :class:`Job` objects, queued here (bounded: a robot flooding the node
gets an explicit "queue full" instead of an ever-growing latency), and one thread runs
them in order (tracked frames of the ``track`` action go through the same queue, so
they share the model fairly with commands). The worker guarantees the node's contract
that every accepted job is finished exactly once: run by its handler, or rejected when
the worker stops.

With several cameras each camera is a *lane* with a queue (and ``max_queue``) of its
own. Lanes are served round-robin, so one busy camera cannot starve another, and
commands waiting on several lanes together are handed to their handler's ``run_batch``
as one batch - one model call for all of them (one per lane per round, up to
``max_batch``). One lane, the single-camera node, runs exactly as before: one job at a
time, in order.

Each job carries its own :class:`JobHandler` (the command pipeline for a command, the
track action for a tracked frame), so the worker needs no dispatch table and whoever
queues a new kind of job says in the same place how it runs, how it is refused and how
a crash is answered.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
import itertools
import threading
import time
import traceback
from typing import Any, Callable, Protocol


class JobHandler(Protocol):
    """What runs, refuses and answers the crash of one kind of job (see :class:`Job`)."""

    def run(self, job: Job) -> None:
        """Worker thread: do the job, answering it exactly once."""

    def reject(self, job: Job, reason: str) -> None:
        """Answer a queued job the worker will never run (it stopped first)."""

    def crashed(self, job: Job, exc: BaseException) -> None:
        """Answer a job whose ``run`` (or ``run_batch``) raised ``exc``."""


class BatchHandler(JobHandler, Protocol):
    """A handler whose jobs may share one model call: ``run_batch`` answers each of them."""

    def run_batch(self, jobs: list[Job]) -> None:
        """Worker thread: several jobs (from different lanes) in one call, each answered once."""


@dataclass
class Job:
    """
    One piece of model work on its way through the node.

    ``payload`` is whatever ``handler`` needs (a command's request, a track's frame);
    ``cancel`` is set by a client's cancel request or by the worker when it stops, and
    handlers poll it through :meth:`should_stop` between stages and during generation.
    """

    payload: Any
    handler: JobHandler
    cancel: threading.Event = field(default_factory=threading.Event)
    enqueued_at: float = field(default_factory=time.monotonic)
    seq: int = 0
    cancel_reason: str = ""
    # An outside source of cancellation (an action goal's cancel state), polled too.
    stop_when: Callable[[], bool] | None = None
    # Counts against max_queue. Tracked frames do not: each running track has at most
    # one waiting (m2sa_ros.tracking.tracks), so they cannot flood the queue, and they must not
    # make ordinary commands fail with "queue full".
    bounded: bool = True
    # The camera whose queue it waits in ("" = the single camera).
    lane: str = ""
    # Whether it may share a model call with other lanes' jobs of the same handler, when
    # that handler has ``run_batch`` (commands yes, tracked frames no).
    batchable: bool = True

    def request_cancel(self, reason: str) -> None:
        """Ask the handler to stop at its next check; the first reason given wins."""
        if not self.cancel.is_set():
            self.cancel_reason = reason
            self.cancel.set()

    def should_stop(self) -> bool:
        """Tell whether the job is cancelled, by a request or by the outside source (``stop_when``)."""
        return self.cancel.is_set() or (self.stop_when is not None and bool(self.stop_when()))


class CommandWorker:
    """
    Runs each submitted job's ``handler.run(job)`` on one thread, in order per lane.

    Jobs that will never run (the worker stopped before reaching them) get
    ``handler.reject(job, reason)``. An exception escaping a handler goes to
    ``handler.crashed(job, exc)`` (once per job of a failed batch) so the job is still
    answered; the thread survives. ``lanes`` name the queues (default: one, ""); with
    ``max_batch`` > 1, batchable jobs of one :class:`BatchHandler` at the heads of
    several lanes run together as ``handler.run_batch(jobs)``.
    """

    def __init__(self, max_queue: int, *, name: str = "m2sa-worker", lanes: tuple[str, ...] = ("",),
                 max_batch: int = 1) -> None:
        if max_queue < 1:
            raise ValueError(f"max_queue must be >= 1, got {max_queue}")
        if not lanes or len(set(lanes)) != len(lanes):
            raise ValueError(f"lanes must be distinct and at least one, got {lanes!r}")
        self._max_batch = max(1, int(max_batch))
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
        """Return a snapshot of the waiting jobs, every lane, in submission order."""
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
        """
        Cancel the running jobs, reject the queued ones with ``reason``, join the thread.

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
            job.handler.reject(job, reason)
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _take(self) -> list[Job]:
        """Return the next jobs to run (lock held): round-robin over lanes, a batch when several wait."""
        count = len(self._order)
        jobs: list[Job] = []
        last = None
        alone = False  # the first job runs by itself: not batchable, or its handler cannot batch
        while len(jobs) < self._max_batch:
            took = False
            for i in range(count):
                index = (self._next + i) % count
                lane = self._lanes[self._order[index]]
                if not lane:
                    continue
                head = lane[0]
                if jobs and not _joins(head, jobs[0]):
                    continue  # e.g. a tracked frame: it runs alone, next turn
                jobs.append(lane.popleft())
                last, took = index, True
                alone = len(jobs) == 1 and not _batches(head)
                if alone or len(jobs) >= self._max_batch:
                    break
            if not took or alone or len(jobs) >= self._max_batch:
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
                    jobs[0].handler.run(jobs[0])
                else:
                    self.batches += 1
                    jobs[0].handler.run_batch(jobs)  # type: ignore[attr-defined]  # _take checked it
            except BaseException as exc:  # noqa: BLE001 - the thread must outlive any job
                for job in jobs:
                    _answer_crash(job, exc)
            finally:
                with self._lock:
                    self._current = []


def _batches(job: Job) -> bool:
    """Whether ``job`` may head a batch: batchable, and its handler has ``run_batch``."""
    return job.batchable and callable(getattr(job.handler, "run_batch", None))


def _joins(job: Job, head: Job) -> bool:
    """Whether ``job`` may share the model call that ``head`` starts (same handler, both batchable)."""
    return job.batchable and job.handler is head.handler and _batches(head)


def _answer_crash(job: Job, exc: BaseException) -> None:
    """``job.handler.crashed``, which must not take the thread down with it either."""
    try:
        job.handler.crashed(job, exc)
    except BaseException:  # noqa: BLE001 - nothing is left to answer with; the thread goes on
        traceback.print_exc()  # stderr: the handler's own logger is what failed
