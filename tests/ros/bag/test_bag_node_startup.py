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
The node a bag tool starts.

A configure failure ends the tool at once with the node's reason in one line, and
SIGINT / SIGTERM to the tool end its node too (no orphan left).

Each test runs the tool as a user does, a process of its own (``m2sa-bag-eval``,
``python -m m2sa_ros.bag.demo``), and looks for the node it started by the private
namespace the tool gives it, which carries the tool's pid.
"""

from __future__ import annotations

import os
from pathlib import Path
import signal
import subprocess
import sys

from middleware_log import without_middleware_lines
from node_harness import wait_until
import psutil
import pytest

pytest.importorskip("rosbags")

pytestmark = [pytest.mark.ros, pytest.mark.integration]

BAG_EVAL = Path(sys.executable).parent / "m2sa-bag-eval"
TEST_FILES = ("MMR_test_obj_only.json", "MMR_test_part_only.json", "MMR_test_mixed.json")


@pytest.fixture(scope="module")
def bag(synth, tmp_path_factory):
    from m2sa_ros.bag.bag_io import make_bag

    return make_bag([synth / name for name in TEST_FILES], tmp_path_factory.mktemp("bags") / "three",
                    storage="mcap", rate_hz=5.0, limit=3)


def _nodes_of(tool_pid: int) -> list[psutil.Process]:
    """Return the running perception nodes started by the tool of pid ``tool_pid`` (its namespace names it)."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if f"__ns:=/m2sa_bag_eval_{tool_pid}" in (proc.info["cmdline"] or []) and \
                    proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except psutil.Error:
            continue
    return found


def _tool(argv: list[str]) -> subprocess.Popen:
    if not BAG_EVAL.exists() and argv[0] == str(BAG_EVAL):
        pytest.skip(f"{BAG_EVAL} not installed (pip install -e .)")
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ))


def _finish(proc: subprocess.Popen, timeout: float) -> tuple[str, str]:
    """Return the tool's stdout and stderr once it has ended, Fast DDS's own lines left out."""
    try:
        out, err = proc.communicate(timeout=timeout)
        return without_middleware_lines(out), without_middleware_lines(err)
    except subprocess.TimeoutExpired:
        for node in _nodes_of(proc.pid):
            node.kill()
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"still running after {timeout} s:\n{out}\n{err}")


def _assert_no_node_left(tool_pid: int) -> None:
    wait_until(lambda: not _nodes_of(tool_pid), timeout=10, what=f"the node of tool {tool_pid} to be gone")


def test_bag_eval_ends_at_the_nodes_configure_failure_naming_its_reason(bag, tmp_path):
    missing, out = tmp_path / "no_such_model", tmp_path / "eval"
    # The default --startup-timeout (300 s) stays: the tool must not wait for it.
    proc = _tool([str(BAG_EVAL), "--bag", str(bag), "--out", str(out), "--quiet",
                  "--node-args", f"-p model_path:={missing}"])
    stdout, stderr = _finish(proc, timeout=150)
    assert proc.returncode == 1, stdout + stderr
    assert stderr.splitlines() == [
        f"m2sa-bag-eval: the perception node could not start: could not load the model ({missing}) on cpu: "
        f"FileNotFoundError: model_path '{missing}' does not exist (node log: {out / 'node.log'})"], stderr
    _assert_no_node_left(proc.pid)
    assert "SIGINT: shutting down" in (out / "node.log").read_text()  # stopped, not killed


@pytest.mark.parametrize("signum, when", [(signal.SIGINT, "active"), (signal.SIGTERM, "active"),
                                          (signal.SIGTERM, "starting")])
def test_a_stop_signal_to_bag_eval_ends_its_node(bag, tmp_path, signum, when):
    out = tmp_path / "eval"
    # Replayed 50x slower than recorded: the run is still going when the signal comes.
    proc = _tool([str(BAG_EVAL), "--bag", str(bag), "--out", str(out), "--quiet", "--rate-factor", "0.02"])
    try:
        if when == "active":
            wait_until(lambda: "active: listening" in _read(out / "node.log") or proc.poll() is not None,
                       timeout=150, what="the node to become active")
        else:
            wait_until(lambda: _nodes_of(proc.pid) or proc.poll() is not None, timeout=60,
                       what="the node process to start")
        assert proc.poll() is None, proc.communicate()
        nodes = _nodes_of(proc.pid)
        assert len(nodes) == 1, nodes
        proc.send_signal(signum)
        stdout, stderr = _finish(proc, timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        for node in _nodes_of(proc.pid):
            node.kill()
    assert proc.returncode == 128 + signum, stdout + stderr
    assert stderr.splitlines()[-1] == (f"m2sa-bag-eval: {signal.Signals(signum).name}; the node was stopped, "
                                       "no report written"), stderr
    assert "Traceback" not in stderr, stderr
    _assert_no_node_left(proc.pid)
    assert not nodes[0].is_running() or nodes[0].status() == psutil.STATUS_ZOMBIE
    assert not (out / "report.json").exists()


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def test_demo_ends_at_the_nodes_configure_failure(tmp_path, capsys):
    from m2sa_ros.bag.demo import main

    broken = tmp_path / "broken_model"
    broken.mkdir()
    (broken / "config.json").write_text("{ not json", encoding="utf-8")  # a checkpoint the node cannot load
    out = tmp_path / "demo"
    code = main(["--out", str(out), "--model-path", str(broken), "--images", "10", "--commands", "1"])
    stderr = capsys.readouterr().err
    assert code == 1, stderr
    (line,) = [line for line in stderr.splitlines() if line.startswith("demo: error:")]
    assert line.startswith(f"demo: error: the perception node could not start: could not load the model ({broken}) "
                           "on cpu: "), line
    assert line.endswith(f"(node log: {out / 'node.log'})"), line
    _assert_no_node_left(os.getpid())


def test_configure_failure_reads_the_reason_from_the_node_log():
    from m2sa_ros.bag.node_subprocess import configure_failure

    assert configure_failure("[INFO] [1.0] [ns.perception_node]: active: listening on /ns/image") is None
    given = ("[ERROR] [1.0] [ns.perception_node]: configure failed: invalid parameters: max_queue=0: must be >= 1\n"
             "[ERROR] [1.1] [ns.perception_node]: autostart: configure failed (see above); the node stays ...\n")
    assert configure_failure(given) == "invalid parameters: max_queue=0: must be >= 1"
    # A configure that raised: rclpy's lifecycle logs its own error, then the autostart line.
    raised = ("[ERROR] [1.0] [ns.perception_node]: error while in state 'unconfigured': releasing everything\n"
              "[ERROR] [1.1] [ns.perception_node]: autostart: configure failed (see above); the node stays ...\n")
    assert configure_failure(raised) == "error while in state 'unconfigured': releasing everything"
    coloured = "\x1b[31m[ERROR] [1.0] [p]: configure failed: model_path 'x' does not exist\x1b[0m\n"
    assert configure_failure(coloured) == "model_path 'x' does not exist"
