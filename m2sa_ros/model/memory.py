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
Handing memory back: the heap to the OS between commands, CUDA's cache after a failure.

Every command allocates and frees many tensors on the worker thread while the executor
threads allocate camera frames; glibc keeps freed pages inside its per-thread arenas,
and over thousands of commands the fragmentation shows as a slow RSS climb although
nothing leaks (a native-allocation trace of 1,500 soak commands found 3.5 MiB never
freed, almost all of it bounded caches, while RSS rose by tens of MiB, all in glibc
arenas). ``malloc_trim(0)`` returns every arena's free pages with madvise; it takes a
few milliseconds, so the node calls it only when idle and at most once per period.

A model call that ran out of memory is the other case: what it held stays cached by
PyTorch's allocator unless it is collected and the cache emptied (:func:`release_memory`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import sys
import threading
import time
from typing import Callable


def _load_malloc_trim() -> Callable[[int], int] | None:
    """Return glibc's malloc_trim, or None on a C library without it (musl, macOS)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


class HeapTrimmer:
    """Calls ``malloc_trim(0)`` at most once per ``period_s`` (0 = never)."""

    def __init__(self, period_s: float, clock: Callable[[], float] = time.monotonic,
                 trim: Callable[[int], int] | None = None) -> None:
        self.period_s = float(period_s)
        self._clock = clock
        self._trim = trim if trim is not None else (_load_malloc_trim() if period_s > 0 else None)
        self._last = clock()
        self._lock = threading.Lock()
        self.trims = 0

    @property
    def available(self) -> bool:
        return self._trim is not None and self.period_s > 0

    def maybe_trim(self) -> bool:
        """Trim if the period has passed since the last trim; True when it trimmed."""
        if not self.available:
            return False
        with self._lock:
            now = self._clock()
            if now - self._last < self.period_s:
                return False
            self._last = now
            assert self._trim is not None
            self._trim(0)
            self.trims += 1
            return True


def trim_heap_now() -> bool:
    """One ``malloc_trim(0)`` right away (after a model is dropped); False without glibc."""
    trim = _load_malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


def is_out_of_memory(exc: BaseException) -> bool:
    """Return an allocation failure: torch.OutOfMemoryError (CUDA and other devices) or MemoryError (host)."""
    torch = sys.modules.get("torch")
    if isinstance(exc, MemoryError):
        return True
    return torch is not None and isinstance(exc, getattr(torch, "OutOfMemoryError", ()))


def release_memory(device: str) -> None:
    """
    Give back what a failed call held: collect reference cycles, empty the CUDA cache.

    Tensors of a call that raised can sit in a cycle through the exception's traceback,
    so only a collection frees them; on CUDA the allocator then still keeps the blocks
    cached for itself until ``empty_cache()`` hands them back to the device.
    """
    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and device.startswith("cuda") and torch.cuda.is_available() \
            and torch.cuda.is_initialized():
        torch.cuda.empty_cache()
