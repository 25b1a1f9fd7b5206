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
README.md's quick start, walked from a fresh clone as CI runs it, so the README cannot drift from the code.

The commands are read from the README itself: ``make demo`` from the quick start's first
block, and the desk block (``. .venv/setup.sh``, then exactly three commands: the node,
the camera, one command) under "A camera at your desk". They run in a fresh copy of the
tracked files (no runs/, build/ or untracked file of this checkout), whose ``.venv`` is
the venv running the tests (``.venv-jazzy`` in CI's Jazzy run): CI's ``make test`` has just
run ``make setup`` in its clone, so the venv is up to date there, and here the copy's files
are dated before the venv's stamps so that ``make`` finds the setup done instead of redoing
it (``make -q setup`` must say so).

What is checked is what a newcomer reads: the demo exits 0 with every command answered
and its report has the figures README.md quotes; the third desk command prints the output
block shown under it (answer and labels exactly, press points and approach directions to
within sensor noise, since the camera redraws its depth artefacts every frame); the README's
opening example is that command and those labels; ``ros2 topic echo /result --field
answer``, which the README offers for reading only the answers, prints the answer; the node
and the camera end with exit status 0 on Ctrl-C.
"""

from __future__ import annotations

from dataclasses import dataclass
import json
import os
from pathlib import Path
import re
import shutil
import subprocess
import sys

from m2sa_ros.tools.child_process import ChildProcess
from middleware_log import without_middleware_lines
import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
OLD = 946684800  # 2000-01-01: the copy's files predate the venv's stamps
VENV = Path(sys.prefix)
DISTRO = "jazzy" if VENV.name == ".venv-jazzy" else "kilted"  # the Makefile's names
POINT_TOLERANCE_M = 0.015  # the depth's sensor noise moves a press point by a few mm between frames
DIRECTION_TOLERANCE = 0.02


@dataclass(frozen=True)
class QuickStart:
    demo: str  # the `make demo` line
    setup: str  # the line every desk terminal runs first
    desk: list[str]  # node, camera, command
    output: list[str]  # the printed lines the README shows for the command
    intro_command: str
    intro_labels: list[str]
    answer_reader: str  # the README's command that prints only the answers


def _commands(block: str) -> list[str]:
    lines = [line.split("  #")[0].split(" # ")[0].strip() for line in block.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def read_quick_start(text: str) -> QuickStart:
    section = text.split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]
    first = re.search(r"```bash\n(.*?)```", section, re.S)
    demo = next(c for c in _commands(first.group(1)) if c.split()[:2] == ["make", "demo"])
    desk_part = section.split("\n### A camera at your desk\n", 1)[1].split("\n### ", 1)[0]
    desk_block, after = re.search(r"```bash\n(.*?)```(.*)", desk_part, re.S).groups()
    commands = _commands(desk_block)
    setup = [c for c in commands if c.startswith((". ", "source "))]
    output = re.search(r"```\n(.*?)```", after, re.S).group(1).splitlines()
    intro = text.split("\n## ", 1)[0]
    intro_command = re.search(r'command go in \("([^"]+)"\)', " ".join(intro.split())).group(1)
    intro_labels = re.findall(r"`([a-z_()]+_\d+(?:'s [a-z_]+)?)`", intro)
    reader = re.search(r"`(ros2 topic echo [^`]*--field answer)`", " ".join(desk_part.split())).group(1)
    return QuickStart(demo, setup[0] if len(setup) == 1 else "", [c for c in commands if c not in setup],
                      output, intro_command, intro_labels, reader)


QUICK = read_quick_start(README.read_text(encoding="utf-8"))
TARGET_LINE = re.compile(r"^  (?P<label>.+): press at \((?P<p>[^)]*)\) m, approach \((?P<a>[^)]*)\)$")


def _numbers(text: str) -> list[float]:
    return [float(v) for v in text.split(",")]


def test_the_quick_start_is_three_commands_and_its_output_is_the_opening_example():
    assert QUICK.demo == "make demo"
    assert QUICK.setup == ". .venv/setup.sh", "every desk terminal starts from the venv's setup.sh"
    assert len(QUICK.desk) == 3, QUICK.desk  # the node, the camera, one command
    node, camera, command = QUICK.desk
    assert node.split()[0] == "m2sa-perception" and camera.split()[0] == "m2sa-camera"
    assert f'"{QUICK.intro_command}"' in command, "the opening example is the quick start's command"
    assert QUICK.output[0].startswith("request ") and QUICK.output[1].startswith("  answer: ")
    labels = [TARGET_LINE.match(line)["label"] for line in QUICK.output[2:]]
    assert labels == QUICK.intro_labels, (labels, QUICK.intro_labels)


# --------------------------------------------------------------------------- a fresh clone
def _tracked_files() -> list[str]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return [name for name in out.decode().split("\0") if name and (ROOT / name).is_file()]


@pytest.fixture(scope="module")
def fresh_clone(tmp_path_factory) -> Path:
    """Return the tracked files as they are now, dated 2000, with this checkout's venv."""
    if not (ROOT / ".git").exists() or shutil.which("git") is None:
        pytest.fail("the quick start test copies the tracked files: it needs the git checkout")
    clone = tmp_path_factory.mktemp("clone")
    for name in _tracked_files():
        target = clone / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target, follow_symlinks=False)
    for path in sorted(clone.rglob("*"), reverse=True):
        os.utime(path, (OLD, OLD), follow_symlinks=False)
    # The README's `. .venv/setup.sh` gets the venv running these tests (CI's Jazzy run: .venv-jazzy).
    (clone / ".venv").symlink_to(VENV)
    if DISTRO == "jazzy":
        (clone / ".venv-jazzy").symlink_to(VENV)
    up_to_date = subprocess.run(["make", "-q", "setup"], cwd=clone, capture_output=True, text=True, env=_env())
    assert up_to_date.returncode == 0, "the venv is not set up: run `make setup` first (CI's `make test` does)"
    return clone


def _shell(command: str, clone: Path, setup: str = "") -> list[str]:
    """``command`` as typed in a terminal of the clone (after ``setup``), as the shell's own process."""
    return ["bash", "-c", f"{setup + ' && ' if setup else ''}exec {command}"]


def _env(**extra: str) -> dict[str, str]:
    """
    Return the terminal's environment.

    PYTHONSAFEPATH: the copy shares this checkout's venv, whose m2sa_ros and m2sa_core are this
    checkout's; the copy's own sources must not shadow them from the working directory (``python
    -m``), or one process would mix two checkouts (in CI's clone the venv's packages and the
    working directory are the same files).
    """
    return dict(os.environ, PYTHONUNBUFFERED="1", PYTHONSAFEPATH="1", ROS_DISTRO=DISTRO, **extra)


class Terminal(ChildProcess):
    """One terminal of the quick start: a process whose output is collected on a thread."""

    def __init__(self, command: str, clone: Path, setup: str) -> None:
        self.command = command
        super().__init__(_shell(command, clone, setup), cwd=clone, env=_env(), collect=True, name=f"`{command}`")
        self.start()

    def wait_for(self, text: str, timeout: float) -> None:
        self.wait_for_line(text, timeout)

    def ctrl_c(self, timeout: float = 60) -> int:
        """Return the exit status after Ctrl-C (SIGINT; SIGKILL when still there ``timeout`` s later)."""
        return int(self.stop(timeout))


def _wait_for_frames(ros_context, node_terminal: Terminal, reader: Terminal) -> None:
    """
    Wait until the node subscribes to the camera's image and says frames reach it.

    What a person waits for by starting the third command after the second.
    """
    from diagnostic_msgs.msg import DiagnosticArray
    from node_harness import spinning, wait_until
    from rclpy.node import Node
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import Image

    seen: list[object] = []
    node_says: list[str] = []
    readers: list[str] = []

    def image_age(msg) -> None:
        node_says.extend(kv.value for status in msg.status for kv in status.values if kv.key == "image_age_ms")
        readers.extend(kv.value for status in msg.status for kv in status.values if kv.key == "result_subscribers")

    watcher = Node("quick_start_watcher", context=ros_context)
    watcher.create_subscription(Image, "/image", seen.append, qos_profile_sensor_data)
    watcher.create_subscription(DiagnosticArray, "/diagnostics", image_age, 10)
    try:
        with spinning(ros_context, watcher):
            wait_until(lambda: any(not i.node_name.startswith("quick_start")
                                   for i in watcher.get_subscriptions_info_by_topic("/image")), 60,
                       "the node's image subscription")
            wait_until(lambda: len(seen) >= 3, 60, "frames from the camera")
            # Frames reaching this watcher do not mean they reach the node (each pair of
            # participants discovers the other on its own): the node's /diagnostics say so,
            # as the README tells a person whose command ended "no image yet".
            wait_until(lambda: node_says and node_says[-1] != "none received", 60,
                       f"the node's /diagnostics to show an image (image_age_ms {node_says[-1:]})")
            # The reader in the graph is not yet the reader the node's publisher has matched
            # (each pair of participants discovers the other on its own): the node says so.
            wait_until(lambda: readers and int(readers[-1]) >= 1, 60,
                       f"the node's result publisher to match the answer reader:\n{reader.output}")
    finally:
        watcher.destroy_node()
    assert node_terminal.proc.poll() is None, node_terminal.output


@pytest.mark.ros
def test_the_three_desk_commands_from_a_fresh_clone(fresh_clone, ros_context):
    node_cmd, camera_cmd, command = QUICK.desk
    node = Terminal(node_cmd, fresh_clone, QUICK.setup)
    camera = reader = None
    try:
        node.wait_for("active: listening", 120)
        camera = Terminal(camera_cmd, fresh_clone, QUICK.setup)
        camera.wait_for("publishing", 60)
        reader = Terminal(QUICK.answer_reader, fresh_clone, QUICK.setup)
        _wait_for_frames(ros_context, node, reader)
        done = subprocess.run(_shell(command, fresh_clone, QUICK.setup), cwd=fresh_clone, capture_output=True,
                              text=True, timeout=300, env=_env())
        assert done.returncode == 0, done.stdout + done.stderr
        printed = without_middleware_lines(done.stdout).splitlines()  # the example's lines only
        assert re.fullmatch(r"request planner-[0-9a-f]{8}: succeeded", printed[0]), done.stdout
        assert re.fullmatch(r"request planner-[0-9a-f]{8}: succeeded", QUICK.output[0])
        assert printed[1] == QUICK.output[1], done.stdout  # the answer, word for word
        assert len(printed) == len(QUICK.output), done.stdout
        for got, shown in zip(printed[2:], QUICK.output[2:]):
            got_m, shown_m = TARGET_LINE.match(got), TARGET_LINE.match(shown)
            assert got_m and got_m["label"] == shown_m["label"], (got, shown)
            assert _numbers(got_m["p"]) == pytest.approx(_numbers(shown_m["p"]), abs=POINT_TOLERANCE_M), (got, shown)
            assert _numbers(got_m["a"]) == pytest.approx(_numbers(shown_m["a"]), abs=DIRECTION_TOLERANCE), (got, shown)
        answer = QUICK.output[1].removeprefix("  answer: ")
        reader.wait_for(answer, 30)
    finally:
        codes = {t.command: t.ctrl_c() for t in (reader, camera, node) if t is not None}
    assert codes[camera_cmd] == 0 and "Traceback" not in camera.output, camera.output
    assert codes[node_cmd] == 0 and "Traceback" not in node.output, node.output


# --------------------------------------------------------------------------- the demo
def _quoted_figures(text: str) -> dict[str, float]:
    """Return the demo's figures README.md's "What you will see" quotes."""
    prose = " ".join(text.split("\n## What you will see\n", 1)[1].split("\n## ", 1)[0].split())
    giou, count = re.search(r"the shipped model scores gIoU (\d\.\d+) and answers with the right number of "
                            r"targets (\d+) % of the time", prose).groups()
    centroid, normal, size = re.search(r"median errors against the synthetic world's 3-D truth of (\d+\.\d) mm "
                                       r"\(centroid\), (\d+\.\d) degrees \(normal\) and (\d+\.\d) mm \(box size\)",
                                       prose).groups()
    ciou = re.search(r"that lifts cIoU from \d\.\d+ to (\d\.\d+)", prose).group(1)
    return {"giou": float(giou), "count": float(count) / 100, "ciou": float(ciou), "centroid_mm": float(centroid),
            "normal_deg": float(normal), "size_mm": float(size)}


@pytest.mark.ros
@pytest.mark.slow  # the demo itself: a few minutes on 2 cores
def test_make_demo_from_a_fresh_clone(fresh_clone):
    quoted = _quoted_figures(README.read_text(encoding="utf-8"))
    done = subprocess.run(_shell(QUICK.demo, fresh_clone), cwd=fresh_clone, capture_output=True, text=True,
                          timeout=1200, env=_env())
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    report_path = re.search(r"^report: +(\S+)$", done.stdout, re.M)
    assert report_path, done.stdout[-4000:]
    report = json.loads(Path(report_path.group(1)).with_suffix(".json").read_text())
    assert report["counts"]["commands_without_result"] == 0
    overall = report["metrics"]["all"]
    assert round(overall["giou"], 2) == quoted["giou"], overall
    assert round(overall["ciou"], 2) == quoted["ciou"], overall
    assert round(overall["count_accuracy"], 2) == quoted["count"], overall
    geometry = report["geometry"]["splits"]["all"]
    assert geometry["pose_share"] == 1.0, geometry  # "every matched target with a pose"
    assert round(geometry["median_centroid_mm"], 1) == quoted["centroid_mm"], geometry
    assert round(geometry["median_normal_deg"], 1) == quoted["normal_deg"], geometry
    assert round(geometry["median_size_mm"], 1) == quoted["size_mm"], geometry
