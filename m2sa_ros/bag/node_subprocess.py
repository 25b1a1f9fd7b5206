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
The perception node as a subprocess of a bag tool: started, watched while it starts, stopped.

``m2sa-bag-eval`` and ``make demo`` start the node themselves (``python -m m2sa_ros.main``
in a session of its own, its output in DIR/node.log) and must not outlive it, nor it them:

* **Fail fast.** A node whose configure fails (a model_path that does not exist, a bad
  parameter) does not exit: a lifecycle node stays up, unconfigured, for a fixed
  configure. Waiting for it to become active would take the whole ``--startup-timeout``
  (300 s) in silence, although the node said why within seconds. So while it starts,
  the tool reads the log and gives up at the first ``configure failed`` line, naming the
  node's reason in one line (:class:`NodeStartError`).
* **Clean up.** The node runs in a session of its own, so a terminal's Ctrl-C reaches
  only the tool, which stops the node in its ``finally`` (SIGINT, whose pending commands
  the node answers; SIGKILL if it is still there 20 s later). Python's default SIGTERM
  ends a process without running a ``finally``, which left the node running;
  :func:`stop_on_signals` turns SIGINT and SIGTERM into :class:`Interrupted`, and ignores
  repeats while the stop runs, so a second Ctrl-C cannot cut it short either.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
import re
import signal
import subprocess
import sys
import threading
from typing import Any

from m2sa_ros.tools.child_process import ChildProcess

# How the node says configure failed: perception_node.py logs "configure failed: <reason>",
# and its autostart "autostart: configure failed (see above)" after any failed configure
# (one that raised is logged by rclpy's lifecycle as an error of its own, not with that prefix).
CONFIGURE_FAILED = "configure failed"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # rcutils colours a terminal's log lines
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class NodeStartError(RuntimeError):
    """The node will not become active: it logged a configure failure, or exited. One line."""


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM to the tool; unwinds through the ``finally`` that stops the node."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signal_name = signal.Signals(signum).name
        self.exit_status = 128 + int(signum)  # what a shell reports for a process the signal ended


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """
    Within the block, the first SIGINT or SIGTERM raises :class:`Interrupted` in the main thread.

    Later ones are ignored until the block is left (the node's stop is under way).

    Outside the main thread (where Python cannot install handlers) it does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []

    def handle(signum: int, _frame: Any) -> None:
        if received:
            return
        received.append(signum)
        raise Interrupted(signum)

    previous = {signum: signal.signal(signum, handle) for signum in STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def configure_failure(log_text: str) -> str | None:
    """
    Why the node's configure failed, from its log; None while it has not failed.

    The reason is the text of the first ``configure failed: <reason>`` line, else the
    message of the first error line (a configure that raised), else the failure line.
    """
    lines = [_ANSI.sub("", line).strip() for line in log_text.splitlines()]
    failed = [line for line in lines if CONFIGURE_FAILED in line]
    if not failed:
        return None
    for line in failed:
        at = line.find(CONFIGURE_FAILED + ": ")
        if at >= 0:
            return line[at + len(CONFIGURE_FAILED) + 2:].strip()
    first = next((line for line in lines if line.startswith("[ERROR]")), failed[0])
    return first.split("]: ", 1)[-1]


class NodeProcess(ChildProcess):
    """The perception node as a subprocess, its output in a log file; stopped with SIGINT."""

    # The tool's stop signal (stop_on_signals) waits until the node is gone.
    DEFER_DURING_STOP = (Interrupted,)

    def __init__(self, namespace: str, node_args: Sequence[str], log_path: Path) -> None:
        self.namespace = namespace
        super().__init__([sys.executable, "-m", "m2sa_ros.main", "--ros-args",
                          "-r", f"__ns:={namespace}",
                          # A replayed bag must not lose frames: a reliable subscription.
                          "-p", "image_reliability:=reliable",
                          # Bag time: /clock comes from the replayer.
                          "-p", "use_sim_time:=true", *node_args],
                         log_path=log_path, start_new_session=True, name="the perception node")
        self.command = self.argv

    @property
    def process(self) -> subprocess.Popen | None:
        return self.proc

    def check_starting(self) -> None:
        """
        Raise NodeStartError when the node cannot become active any more.

        It logged a configure failure (it would stay up, unconfigured) or it exited. Called
        while waiting for it.
        """
        reason = configure_failure(self.log_text())
        if reason is not None:
            raise NodeStartError(f"the perception node could not start: {reason} (node log: {self.log_path})")
        if not self.alive():
            last = next((line for line in reversed(self.log_tail().splitlines()) if line.strip()), "no output")
            raise NodeStartError(f"the perception node exited (code {self.exit_code}) before becoming active: "
                                 f"{_ANSI.sub('', last).strip()} (node log: {self.log_path})")

    def stop(self, timeout: float = 20.0) -> int | None:
        """
        Stop the node: SIGINT, then SIGKILL after ``timeout`` s.

        A stop signal to the tool meanwhile (the first one, raised by :func:`stop_on_signals`)
        is raised again only once the node is gone.
        """
        return super().stop(timeout)
