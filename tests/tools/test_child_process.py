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
m2sa_ros/tools/child_process.py: the one child-process helper of the bag tools, the benchmarks and the tests.

The children are small Python programs that print ``ready`` and wait; every wait here
ends on what the child prints or on its exit, never on a fixed sleep.
"""

from __future__ import annotations

import os
import signal
import sys
import time

from m2sa_ros.tools.child_process import ChildProcess, LineNotPrinted
from node_harness import wait_until
import psutil
import pytest


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


READY = _python("print('ready', flush=True); import time; time.sleep(600)")
# Exits 0 on SIGINT, as the node does, saying so.
POLITE = _python("import signal, sys, time\n"
                 "def bye(*_):\n    print('got SIGINT', flush=True)\n    sys.exit(0)\n"
                 "signal.signal(signal.SIGINT, bye)\nprint('ready', flush=True)\ntime.sleep(600)")
# A node that hangs: SIGINT does nothing.
STUBBORN = _python("import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                   "print('ready', flush=True)\ntime.sleep(600)")


@pytest.fixture
def children():
    """Return a list for the test's children; each is killed at the end, whatever happened."""
    started: list[ChildProcess] = []
    yield started
    for child in started:
        child.kill()


def _start(children: list[ChildProcess], argv: list[str], **options) -> ChildProcess:
    child = ChildProcess(argv, **options)
    children.append(child)
    return child.start()


def test_a_child_not_started_says_so_without_starting_anything():
    child = ChildProcess(READY)
    assert not child.alive() and child.exit_code is None and child.output == ""
    assert child.stop() is None  # nothing to stop: a tool's finally may call it before the start
    with pytest.raises(RuntimeError, match="not started"):
        child.wait_for_line("ready", 1)


@pytest.mark.integration
def test_wait_for_line_returns_the_line_once_printed(children):
    child = _start(children, _python("print('loading', flush=True); print('active: listening on /image', "
                                     "flush=True); import time; time.sleep(600)"))
    assert child.wait_for_line("listening", timeout=60) == "active: listening on /image\n"
    assert child.alive() and child.exit_code is None
    assert child.lines[0] == "loading\n"
    assert child.output == "loading\nactive: listening on /image\n"


@pytest.mark.integration
def test_wait_for_line_fails_at_once_with_the_output_when_the_process_exits_first(children):
    child = _start(children, _python("import sys; print('configure failed: no model', flush=True); sys.exit(3)"),
                   name="the node")
    start = time.monotonic()
    with pytest.raises(LineNotPrinted) as failed:
        child.wait_for_line("active", timeout=300)
    assert time.monotonic() - start < 60, "the exit ends the wait, not the timeout"
    assert str(failed.value).startswith("the node exited (3) before printing 'active':\n"), failed.value
    assert "configure failed: no model" in str(failed.value)
    assert isinstance(failed.value, AssertionError)  # a test that waits fails as an assertion does


def _with_a_grandchild(children, leader_stays: bool, **options) -> tuple[ChildProcess, psutil.Process]:
    """Start a child that starts a long-lived grandchild (as launch starts a node) and stays or ends."""
    child = _start(children, _python("import subprocess, sys, time\n"
                                     "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
                                     "print('grandchild', g.pid, flush=True)\n"
                                     + ("time.sleep(600)" if leader_stays else "")), **options)
    return child, psutil.Process(int(child.wait_for_line("grandchild", 60).split()[1]))


def _gone(process: psutil.Process) -> bool:
    return not process.is_running() or process.status() == psutil.STATUS_ZOMBIE


@pytest.mark.integration
def test_the_exit_ends_the_wait_even_while_a_grandchild_holds_the_output(children):
    """Launch's nodes inherit its output: the pipe stays open after launch exits."""
    child, grandchild = _with_a_grandchild(children, leader_stays=False)
    try:
        with pytest.raises(LineNotPrinted, match=r"exited \(0\) before printing 'never'"):
            child.wait_for_line("never", timeout=300)
    finally:
        grandchild.kill()


@pytest.mark.integration
def test_wait_for_line_fails_after_the_timeout_when_the_line_does_not_come(children):
    child = _start(children, READY)
    child.wait_for_line("ready", 60)
    with pytest.raises(LineNotPrinted, match=r"printed no 'active' within 0.2 s:\nready\n"):
        child.wait_for_line("active", timeout=0.2)
    assert child.alive()


@pytest.mark.integration
def test_stop_is_ctrl_c_and_returns_the_exit_status(children):
    child = _start(children, POLITE)
    child.wait_for_line("ready", 60)
    assert child.stop(timeout=60) == 0
    assert child.exit_code == 0 and not child.alive()
    assert child.lines[-1] == "got SIGINT\n"  # the output is read to its end before stop returns


@pytest.mark.integration
def test_stop_kills_a_process_that_ignores_ctrl_c_after_the_timeout(children):
    child = _start(children, STUBBORN)
    child.wait_for_line("ready", 60)
    assert child.stop(timeout=0.5) == -signal.SIGKILL


@pytest.mark.integration
def test_a_log_file_alone_is_written_by_the_child_and_read_back(children, tmp_path):
    log = tmp_path / "logs" / "node.log"  # its folder is made
    child = _start(children, _python("for i in range(5): print('line', i, flush=True)\n"
                                     "print('ready', flush=True)\nimport time; time.sleep(600)"),
                   log_path=log)
    assert not child.collect and child.lines == []
    assert child.wait_for_line("ready", 60) == "ready\n"  # read from the file
    assert child.log_tail(2) == "line 4\nready"
    assert child.stop(timeout=60) == -signal.SIGINT  # Python's own Ctrl-C: KeyboardInterrupt, then SIGINT
    assert log.read_text().startswith("line 0\nline 1\n")
    assert child.output == child.log_text() == log.read_text()


@pytest.mark.integration
def test_a_log_file_and_the_lines_together(children, tmp_path):
    log = tmp_path / "node.log"
    child = _start(children, POLITE, log_path=log, collect=True)
    child.wait_for_line("ready", 60)
    child.stop(60)
    assert child.lines == ["ready\n", "got SIGINT\n"]
    assert log.read_text() == "ready\ngot SIGINT\n" == child.log_text()


@pytest.mark.integration
def test_the_context_manager_starts_and_stops(tmp_path):
    with ChildProcess(POLITE, log_path=tmp_path / "node.log", cwd=tmp_path, env={**os.environ, "X": "1"}) as child:
        child.wait_for_line("ready", 60)
        assert child.alive()
    assert child.exit_code == 0
    assert child.log_tail() == "ready\ngot SIGINT"


class Stopping(KeyboardInterrupt):
    """What the bag tools' stop_on_signals raises on the tool's SIGINT or SIGTERM."""


class Patient(ChildProcess):
    DEFER_DURING_STOP = (Stopping,)


@pytest.mark.integration
def test_a_deferred_exception_during_stop_waits_for_the_child_and_comes_after(children):
    """The bag tools' second Ctrl-C or SIGTERM must not leave the node running."""
    slow_to_stop = _python("import signal, sys, time\n"
                           "def bye(*_):\n    print('stopping', flush=True)\n    time.sleep(1.0)\n    sys.exit(0)\n"
                           "signal.signal(signal.SIGINT, bye)\nprint('ready', flush=True)\ntime.sleep(600)")
    child = Patient(slow_to_stop)
    children.append(child)
    child.start()
    child.wait_for_line("ready", 60)

    def stop_signal(*_) -> None:
        raise Stopping()

    previous = signal.signal(signal.SIGALRM, stop_signal)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.2)  # lands while stop() waits for the child
        with pytest.raises(Stopping):
            child.stop(timeout=60)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert child.exit_code == 0, child.output  # the child ended on its own, not killed
    assert child.lines == ["ready\n", "stopping\n"]


@pytest.mark.integration
def test_on_a_terminal_ctrl_c_is_typed_and_reaches_the_child(children):
    child = _start(children, _python("import signal, sys, time\n"
                                     "def bye(*_):\n    print('got SIGINT', flush=True)\n    sys.exit(0)\n"
                                     "signal.signal(signal.SIGINT, bye)\n"
                                     "print('tty', sys.stdin.isatty(), sys.stdout.isatty(), flush=True)\n"
                                     "time.sleep(600)"),
                   terminal=True)
    assert child.wait_for_line("tty", 60) == "tty True True\n"  # the terminal's CR LF read as LF
    child.interrupt()
    assert child.wait(60) == 0
    assert child.lines[-1] == "^Cgot SIGINT\n"  # the terminal echoes what was typed


@pytest.mark.integration
def test_kill_ends_a_session_with_what_it_started(children):
    child, grandchild = _with_a_grandchild(children, leader_stays=True, start_new_session=True)
    child.kill()
    assert child.exit_code == -signal.SIGKILL
    wait_until(lambda: _gone(grandchild), 30, "the grandchild to be killed with its session")


@pytest.mark.integration
def test_kill_ends_what_a_session_started_after_its_leader_is_gone(children):
    """A crashed or killed ``ros2 launch`` must not leave its nodes running into the next test."""
    child, grandchild = _with_a_grandchild(children, leader_stays=False, start_new_session=True)
    assert child.wait(60) == 0 and grandchild.is_running()  # the leader ended, what it started runs on
    child.kill()
    wait_until(lambda: _gone(grandchild), 30, "the orphaned grandchild to be killed with its session")


@pytest.mark.integration
@pytest.mark.parametrize("restored", [True, False], ids=["restored", "inherited"])
def test_a_suite_started_with_ctrl_c_ignored_still_gives_its_children_ctrl_c(restored):
    """
    tests/ctrl_c.py in a process started as a script's background job starts it: SIGINT ignored.

    Restored, its child starts with SIGINT at the default and dies of the Ctrl-C it is
    sent; left as inherited, the child starts with SIGINT ignored (as it says itself).
    """
    import subprocess

    script = ("import ctrl_c, signal, subprocess, sys\n"
              f"print(ctrl_c.restore_ctrl_c() if {restored} else 'kept', flush=True)\n"
              "child = subprocess.Popen([sys.executable, '-c', 'import signal, time; "
              "print(signal.getsignal(signal.SIGINT) is signal.SIG_IGN, flush=True); time.sleep(60)'], "
              "stdout=subprocess.PIPE, text=True)\n"
              "ignored = child.stdout.readline().strip()\n"
              "print(ignored, flush=True)\n"
              "if ignored == 'False':\n    child.send_signal(signal.SIGINT); print(child.wait(timeout=60))\n"
              "else:\n    child.kill(); child.wait()\n")
    tests = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-c", script], env={**os.environ, "PYTHONPATH": tests},
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    said = out.stdout.split()
    assert said == (["True", "False", str(-signal.SIGINT)] if restored else ["kept", "True"]), out.stdout
