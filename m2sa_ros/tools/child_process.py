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
A child process as the bag tools, the benchmarks and the tests run one: started, watched, stopped.

Each of them starts a program (the perception node, ``ros2 launch``, a command typed in
a terminal), waits for a line it prints, and ends it as a user would. The details are
the same everywhere, so they live here once (stdlib only: no rclpy, so a tool imports it
before ROS is up):

* **Where the output goes.** ``log_path``: the child writes into the file itself, so the
  log is whole even when this process dies first (the bag tools and the benchmarks keep
  it as the node's log). ``collect``: the lines are read on a thread and kept in memory
  (:attr:`ChildProcess.lines`), for a caller that waits for them. Both: the thread also
  writes each chunk to the file. ``terminal``: the child runs on a pseudo-terminal that
  is its controlling terminal, as in a user's shell, and :meth:`ChildProcess.interrupt`
  types Ctrl-C on it.
* **Waiting for a line ends on the event.** :meth:`ChildProcess.wait_for_line` wakes when
  the reader thread adds a line or reaches the end of the output, and fails at once,
  with everything printed, when the process exits first; not after the whole timeout.
* **Stopping is Ctrl-C first.** :meth:`ChildProcess.stop` sends SIGINT (the node answers
  its pending commands and exits 0) and SIGKILL only when the process is still there
  ``timeout`` s later, so no caller leaves a process behind. A subclass names the
  exceptions (a tool's own stop signals) that must not cut that wait short in
  :attr:`ChildProcess.DEFER_DURING_STOP`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
import os
from pathlib import Path
import signal
import subprocess
import threading
import time
from typing import Any, BinaryIO, TypeVar

# How often a wait looks at the process when no line wakes it: the exit of a process whose
# output a grandchild still holds open (launch's nodes) is no event the reader sees.
POLL_S = 0.1
# After the exit, how long the output may still be read before the wait fails (normally
# the end of the output comes within milliseconds).
EXIT_GRACE_S = 1.0
READER_JOIN_S = 10.0

_Child = TypeVar("_Child", bound="ChildProcess")


class LineNotPrinted(AssertionError):
    """
    The awaited line did not come: the process exited first, or the timeout passed.

    An AssertionError, so that a test that waits for a line fails as an assertion does;
    the message carries everything the process printed.
    """


class ChildProcess:
    """One child process: its output in a log file and/or collected line by line; ended with SIGINT."""

    # Exceptions raised in this thread while stop() waits (a signal handler's) that are held
    # back and raised again once the process is gone, so that they cannot leave it running.
    DEFER_DURING_STOP: tuple[type[BaseException], ...] = ()

    def __init__(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None,
                 cwd: Path | str | None = None, log_path: Path | None = None, collect: bool | None = None,
                 start_new_session: bool = False, terminal: bool = False, stdin: int | None = None,
                 name: str | None = None) -> None:
        """
        Describe the process; :meth:`start` (or ``with``) starts it.

        ``env`` None inherits this process's environment. ``collect`` None collects the
        lines unless a log file takes the output. ``terminal`` implies ``collect`` and a
        session of its own. ``stdin`` (a file descriptor, ``subprocess.DEVNULL``) is
        inherited when None. ``name`` is how failure messages call the process.
        """
        self.argv = list(argv)
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.log_path = Path(log_path) if log_path is not None else None
        self.terminal = terminal
        self.collect = True if terminal else (collect if collect is not None else log_path is None)
        self.start_new_session = start_new_session or terminal
        self.stdin = stdin
        self.name = name or Path(self.argv[0]).name
        self.proc: subprocess.Popen | None = None
        self.lines: list[str] = []
        self._changed = threading.Condition()  # a line came, or the output ended
        self._output_ended = False
        self._log: BinaryIO | None = None
        self._master: int | None = None  # the pseudo-terminal's side this process reads
        self._reader: threading.Thread | None = None

    # ----------------------------------------------------------------------------- start
    def start(self: _Child) -> _Child:
        """Start the process; return self."""
        if self.proc is not None:
            raise RuntimeError(f"{self.name} was started already")
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log = open(self.log_path, "wb")
        common: dict[str, Any] = {"env": self.env, "cwd": self.cwd, "start_new_session": self.start_new_session}
        try:
            if self.terminal:
                import pty

                master, slave = pty.openpty()
                try:
                    self.proc = subprocess.Popen(self.argv, stdin=slave, stdout=slave, stderr=slave,
                                                 preexec_fn=_take_controlling_terminal, **common)
                except BaseException:
                    os.close(master)
                    raise
                finally:
                    os.close(slave)
                self._master = master
                source: int | None = master
            elif self.collect:
                self.proc = subprocess.Popen(self.argv, stdin=self.stdin, stdout=subprocess.PIPE,
                                             stderr=subprocess.STDOUT, **common)
                assert self.proc.stdout is not None
                source = self.proc.stdout.fileno()
            else:
                self.proc = subprocess.Popen(self.argv, stdin=self.stdin,
                                             stdout=self._log if self._log is not None else subprocess.DEVNULL,
                                             stderr=subprocess.STDOUT, **common)
                source = None
        except BaseException:
            self._close_log()
            raise
        if source is not None:
            self._reader = threading.Thread(target=self._read, args=(source,), name=f"{self.name} output",
                                            daemon=True)
            self._reader.start()
        return self

    def _read(self, fd: int) -> None:
        """Read the output until every writer has closed it: lines into ``lines``, chunks into the log."""
        pending = b""
        try:
            while True:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:  # EIO: the last process holding the terminal exited
                    chunk = b""
                if not chunk:
                    break
                *complete, pending = (pending + chunk).split(b"\n")
                with self._changed:
                    if self._log is not None:
                        self._log.write(chunk)
                        self._log.flush()
                    if complete:
                        self.lines.extend(_text(line + b"\n") for line in complete)
                        self._changed.notify_all()
        finally:
            with self._changed:
                if pending:
                    self.lines.append(_text(pending))
                self._output_ended = True
                self._changed.notify_all()

    # ----------------------------------------------------------------------------- state
    @property
    def pid(self) -> int:
        return self._started().pid

    def alive(self) -> bool:
        """Return whether the process was started and still runs."""
        return self.proc is not None and self.proc.poll() is None

    @property
    def exit_code(self) -> int | None:
        """Return the exit status once the process has ended; None while it runs or before it starts."""
        return self.proc.poll() if self.proc is not None else None

    @property
    def output(self) -> str:
        """Return everything the process printed so far: the collected lines, else the log file."""
        if self.collect:
            with self._changed:
                return "".join(self.lines)
        return self.log_text()

    def log_text(self) -> str:
        """Return the log file's text (the collected lines when there is no log file)."""
        if self.log_path is None:
            return self.output if self.collect else ""
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def log_tail(self, lines: int = 30) -> str:
        """Return the last ``lines`` lines of the output, for a message that says why."""
        return "\n".join(self.log_text().splitlines()[-lines:])

    # ----------------------------------------------------------------------------- waiting
    def wait_for_line(self, text: str, timeout: float) -> str:
        """
        Return the first line containing ``text``, once printed.

        Raises :class:`LineNotPrinted` with the output as soon as the process has exited
        without printing it, or when ``timeout`` s pass. Without collected lines the log
        file is read every POLL_S.
        """
        proc = self._started()
        deadline = time.monotonic() + timeout
        exited_at: float | None = None
        scanned = 0  # collected lines already looked at: none of them holds ``text``
        with self._changed:
            while True:
                code = proc.poll()  # before reading: all the output of an exited process is then read
                ended = self._output_ended if self.collect else code is not None
                lines = self.lines if self.collect else self.log_text().splitlines(keepends=True)
                for line in lines[scanned:]:
                    if text in line:
                        return line
                if self.collect:
                    scanned = len(lines)
                now = time.monotonic()
                if code is not None and exited_at is None:
                    exited_at = now
                if ended or (exited_at is not None and now - exited_at > EXIT_GRACE_S):
                    if code is None:  # the output ended a moment before the exit could be seen
                        try:
                            code = proc.wait(EXIT_GRACE_S)
                        except subprocess.TimeoutExpired:
                            pass
                    how = f"exited ({code})" if code is not None else "closed its output"
                    raise LineNotPrinted(f"{self.name} {how} before printing {text!r}:\n{self.output}")
                left = deadline - now
                if left <= 0:
                    raise LineNotPrinted(f"{self.name} printed no {text!r} within {timeout} s:\n{self.output}")
                self._changed.wait(min(left, POLL_S))

    def wait(self, timeout: float | None = None) -> int:
        """Return the exit status once the process has ended and its output is read (subprocess.TimeoutExpired)."""
        code = self._started().wait(timeout=timeout)
        if self._reader is not None:
            self._reader.join(READER_JOIN_S)
        return code

    # ----------------------------------------------------------------------------- ending
    def send_signal(self, signum: int) -> None:
        """Send ``signum`` to the process while it runs."""
        if self.alive():
            assert self.proc is not None
            self.proc.send_signal(signum)

    def interrupt(self) -> None:
        """
        Ctrl-C as a user gives it.

        On a terminal it is typed, and the terminal sends SIGINT to its whole foreground
        process group (``ros2 launch`` and its nodes at once); otherwise SIGINT goes to the
        process alone, as from a service manager or ``kill -INT``.
        """
        if self._master is not None:
            os.write(self._master, b"\x03")
        else:
            self.send_signal(signal.SIGINT)

    def stop(self, timeout: float = 20.0) -> int | None:
        """
        End the process: SIGINT, then SIGKILL after ``timeout`` s; return its exit status.

        The log and the terminal are closed. An exception of DEFER_DURING_STOP raised while
        waiting is raised again once the process is gone. None when it never started.
        """
        deferred: BaseException | None = None
        proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            deadline = time.monotonic() + timeout
            killed = False
            while proc.poll() is None:
                try:
                    proc.wait(None if killed else max(deadline - time.monotonic(), 0.0))
                except subprocess.TimeoutExpired:
                    self._kill_now()
                    killed = True
                except self.DEFER_DURING_STOP as exc:
                    deferred = exc
        self._release()
        if deferred is not None:
            raise deferred
        return self.exit_code

    def kill(self) -> None:
        """
        SIGKILL the process (its whole session, when it has one) and release the output.

        A session's members are killed even when its leader has already ended: a
        ``ros2 launch`` killed or crashed leaves its nodes running otherwise, and they would
        answer in the next test's DDS domain.
        """
        if not self._kill_session() and self.alive():
            assert self.proc is not None
            self.proc.kill()
        if self.proc is not None:
            self.proc.wait()
        self._release()

    def _kill_now(self) -> None:
        """SIGKILL; a process leading a session of its own takes its group along, so nothing it started stays."""
        assert self.proc is not None
        if not self._kill_session():
            self.proc.kill()

    def _kill_session(self) -> bool:
        """SIGKILL the process's session, whether its leader still runs or not; False when it has none left."""
        if self.proc is None or not self.start_new_session:
            return False
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
            return True
        except OSError:  # the group is gone, or was never formed
            return False

    def _release(self) -> None:
        """Once the process has ended: let the reader finish, then close the log, the pipe and the terminal."""
        if self._reader is not None:
            self._reader.join(READER_JOIN_S)
        self._close_log()
        if self._master is not None:
            os.close(self._master)
            self._master = None
        if self.proc is not None and self.proc.stdout is not None and not self.proc.stdout.closed \
                and (self._reader is None or not self._reader.is_alive()):
            self.proc.stdout.close()

    def _close_log(self) -> None:
        with self._changed:
            if self._log is not None:
                self._log.close()
                self._log = None

    def _started(self) -> subprocess.Popen:
        if self.proc is None:
            raise RuntimeError(f"{self.name} was not started")
        return self.proc

    def __enter__(self: _Child) -> _Child:
        return self.start() if self.proc is None else self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def _text(line: bytes) -> str:
    """Return a line as text: any byte decoded, a terminal's CR LF as LF."""
    return line.decode("utf-8", errors="replace").replace("\r\n", "\n")


def _take_controlling_terminal() -> None:
    """In the child, after setsid(): make stdin (the pty) the session's controlling terminal."""
    import fcntl
    import termios

    fcntl.ioctl(0, termios.TIOCSCTTY, 0)
