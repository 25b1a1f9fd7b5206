"""One worker thread with a bounded queue: where model work happens.

Inference takes from tens of milliseconds (tiny, CPU) to seconds (7B); if it ran in a
ROS callback, image callbacks and the lifecycle services would stall behind it. So
commands become :class:`Job` objects, queued here (bounded: a robot flooding the node
gets an explicit "queue full" instead of an ever-growing latency), and one thread runs
them in order (tracked frames of the ``track`` action go through the same queue, so
they share the model fairly with commands). The worker guarantees the node's contract that every accepted job is
finished exactly once: run by the handler, or rejected when the worker stops.
"""

from __future__ import annotations

import itertools
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

_STOP = object()


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

    def request_cancel(self, reason: str) -> None:
        """Ask the handler to stop at its next check; the first reason given wins."""
        if not self.cancel.is_set():
            self.cancel_reason = reason
            self.cancel.set()

    def should_stop(self) -> bool:
        return self.cancel.is_set() or (self.stop_when is not None and bool(self.stop_when()))


class CommandWorker:
    """Runs ``handler(job)`` for each submitted job on one thread, in submission order.

    ``reject(job, reason)`` finishes jobs that will never run (the worker stopped
    before reaching them). Exceptions escaping the handler are passed to
    ``on_handler_error(job, exc)`` so the node can still answer; the thread survives.
    """

    def __init__(self, handler: Callable[[Job], None], reject: Callable[[Job, str], None],
                 max_queue: int, on_handler_error: Callable[[Job, BaseException], None] | None = None,
                 name: str = "m2sa-worker") -> None:
        if max_queue < 1:
            raise ValueError(f"max_queue must be >= 1, got {max_queue}")
        self._handler = handler
        self._reject = reject
        self._on_handler_error = on_handler_error
        # Unbounded: max_queue is enforced on bounded jobs in submit().
        self._queue: queue.Queue[Any] = queue.Queue()
        self._max_queue = max_queue
        self._waiting = 0  # bounded jobs queued
        self._seq = itertools.count(1)
        self._current: Job | None = None
        self._lock = threading.Lock()
        self._stopping = False
        self._stop_reason = ""
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    @property
    def max_queue(self) -> int:
        return self._max_queue

    @property
    def depth(self) -> int:
        """Commands waiting (not counting the one running nor tracked frames)."""
        with self._lock:
            return self._waiting

    @property
    def busy(self) -> bool:
        with self._lock:
            return self._current is not None

    def submit(self, job: Job) -> bool:
        """Queue a job; False (and nothing queued) when the queue is full or stopping."""
        with self._lock:
            if self._stopping or (job.bounded and self._waiting >= self._max_queue):
                return False
            job.seq = next(self._seq)
            if job.bounded:
                self._waiting += 1
            self._queue.put_nowait(job)
            return True

    def stop(self, reason: str, timeout: float = 30.0) -> bool:
        """Cancel the running job, reject the queued ones with ``reason``, join the thread.

        Returns False if the thread did not finish within ``timeout`` (a handler that
        ignores cancellation); the queued jobs are answered either way.
        """
        with self._lock:
            if self._stopping:
                return not self._thread.is_alive()
            self._stopping = True
            self._stop_reason = reason
            current = self._current
        if current is not None:
            current.request_cancel(reason)
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not _STOP:
                if item.bounded:
                    with self._lock:
                        self._waiting -= 1
                item.request_cancel(reason)
                self._reject(item, reason)
        self._queue.put(_STOP)
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            with self._lock:
                self._current = item
                if item.bounded:
                    self._waiting -= 1
                if self._stopping:  # taken just as stop() began: it must not run unnoticed
                    item.request_cancel(self._stop_reason)
            try:
                self._handler(item)
            except BaseException as exc:  # noqa: BLE001 - the thread must outlive any job
                if self._on_handler_error is not None:
                    self._on_handler_error(item, exc)
            finally:
                with self._lock:
                    self._current = None
