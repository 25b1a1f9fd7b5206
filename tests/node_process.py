"""The node as a user runs it: an installed executable in a process of its own, ended
with the signals a terminal Ctrl-C under ``ros2 launch`` delivers.

In a terminal, Ctrl-C sends SIGINT to the whole foreground process group, so the node
gets it at once; ``ros2 launch`` (launch's ExecuteProcess) then forwards a SIGINT of its
own a few hundred ms later, SIGTERM when the process is still running ``sigterm_timeout``
(5 s) after that, and SIGKILL 5 s later still. :func:`ctrl_c_under_launch` sends that
sequence, with the second SIGINT's delay as the variable.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Callable

LAUNCH_SIGTERM_AFTER_S = 5.0  # launch's default sigterm_timeout


class NodeProcess:
    """An executable node whose output is collected line by line on a thread."""

    def __init__(self, argv: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> None:
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     env=env if env is not None else dict(os.environ), cwd=cwd)
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._changed:
                self.lines.append(line)
                self._changed.notify_all()

    @property
    def output(self) -> str:
        with self._changed:
            return "".join(self.lines)

    def wait_for_line(self, text: str, timeout: float) -> None:
        """Block until a line containing ``text`` was printed; fail if the process ends first."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not any(text in line for line in self.lines):
                if self.proc.poll() is not None:
                    raise AssertionError(f"the node exited ({self.proc.returncode}) before {text!r}:\n"
                                         + "".join(self.lines))
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no {text!r} within {timeout} s:\n" + "".join(self.lines))
                self._changed.wait(min(left, 0.2))

    def wait(self, timeout: float) -> int:
        code = self.proc.wait(timeout=timeout)
        self._reader.join(10)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(10)


def ctrl_c_under_launch(proc: subprocess.Popen, second_sigint_after: float,
                        sigterm_after: float = LAUNCH_SIGTERM_AFTER_S) -> list[tuple[float, str]]:
    """SIGINT now, SIGINT again ``second_sigint_after`` s later, SIGTERM at ``sigterm_after`` s,
    each only while the process still runs. Returns what was sent and when (s from the first)."""
    sent: list[tuple[float, str]] = []
    start = time.monotonic()

    def send_at(at: float, signum: signal.Signals) -> None:
        while proc.poll() is None and time.monotonic() - start < at:
            time.sleep(0.005)
        if proc.poll() is None:
            proc.send_signal(signum)
            sent.append((round(time.monotonic() - start, 3), signum.name))

    send_at(0.0, signal.SIGINT)
    send_at(second_sigint_after, signal.SIGINT)
    send_at(sigterm_after, signal.SIGTERM)
    return sent


def in_background(fn: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    """Run ``fn`` on a thread; its return value lands in the returned list."""
    box: list[Any] = []
    thread = threading.Thread(target=lambda: box.append(fn()), daemon=True)
    thread.start()
    return thread, box
