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
Test-wide settings.

Each test process (the one pytest, or each worker of `pytest -n`) takes a DDS domain of
its own from domain_coordinator, the tool ROS 2's own CI uses: it holds a port for the
domain as long as the process lives, so no two processes on this machine share one, and
a worker never sees another worker's nodes. Discovery stays on this machine, and Fast
DDS talks over UDP on loopback only: its shared-memory transport locks files in /dev/shm
that every process of the machine shares, and on a loaded machine a lock not taken in time
prints the middleware's own error and changes the transport under a test.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from pathlib import Path
import random
import subprocess
import sys

from ctrl_c import restore_ctrl_c

# Set by this file when it chose the domain, so that a pytest-xdist worker, which inherits
# the controller's environment, can tell an inherited choice from the user's own.
_CHOSEN_HERE = "M2SA_TEST_DOMAIN_CHOSEN"
_domain_reservation = contextlib.ExitStack()


def _reserve_domain() -> None:
    """Give this process a ROS_DOMAIN_ID no other process here holds, unless the user set one."""
    inherited = os.environ.get("ROS_DOMAIN_ID")
    if inherited is not None and inherited != os.environ.get(_CHOSEN_HERE):
        return  # the user's own choice
    try:
        from domain_coordinator import domain_id
    except ImportError:  # a venv without the ROS test tools: pure-Python tests only
        chosen = random.Random(os.getpid()).randint(1, 100)
    else:
        chosen = _domain_reservation.enter_context(domain_id())
    os.environ["ROS_DOMAIN_ID"] = os.environ[_CHOSEN_HERE] = str(chosen)


_reserve_domain()
restore_ctrl_c()  # tests/ctrl_c.py: a suite started in the background still Ctrl-C's its children
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    # The workers share the cores: torch's default of a thread per core in every worker would
    # put several threads on each core and slow every test down.
    _threads = str(max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])))
    for _variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_variable, _threads)
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
os.environ.setdefault("FASTDDS_BUILTIN_TRANSPORTS", "UDPv4")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest  # noqa: E402


def _ros_available() -> bool:
    try:
        import m2sa_ros.msg  # noqa: F401
        import rclpy  # noqa: F401
    except ImportError:
        return False
    return True


ROS_AVAILABLE = _ros_available()


# Fixtures that open a DDS participant or build and start the package: a test that uses one
# is an integration test.
_INTEGRATION_FIXTURES = frozenset({"ros_context", "module_context", "colcon_workspace", "ros_shell"})


def _import_torch_before_the_guard() -> None:
    """
    Import torch, once per process, where it is installed.

    Its first import probes the CUDA libraries with a child process (cuda.pathfinder runs
    ldconfig): the library's, not the test's. Under the guard it failed whichever fast test
    happened to import torch first in its worker, so a file's verdict hung on the order
    xdist handed out the files.
    """
    if "torch" not in sys.modules and importlib.util.find_spec("torch") is not None:
        import torch  # noqa: F401


def _build_matplotlib_font_cache_before_the_guard() -> None:
    """
    Import matplotlib's font manager, once per process, where matplotlib is installed.

    On a machine that has never run matplotlib (a fresh CI machine: no fontlist-*.json
    under ~/.cache/matplotlib) its first import lists the system fonts with ``fc-list``, a
    child process: the library's, not the test's. Under the guard that failed whichever
    fast test first drew a figure in its worker, and left the cache unwritten, so the
    verdict hung on the machine's history and on the order xdist handed out the files.
    """
    if "matplotlib.font_manager" not in sys.modules and importlib.util.find_spec("matplotlib") is not None:
        import matplotlib.font_manager  # noqa: F401


@pytest.fixture(autouse=True)
def _fast_tier_stays_in_process(request, monkeypatch):
    """
    Refuse a child process or a DDS participant in a test not marked `integration`.

    The fast tier (``-m "not integration"``) is what a developer runs on every change, so
    it must stay in one process and off the network; this keeps the marker true as tests
    are added, instead of a list someone has to remember.
    """
    if request.node.get_closest_marker("integration") is not None:
        return
    used = sorted(_INTEGRATION_FIXTURES.intersection(request.fixturenames))
    if used:
        pytest.fail(f"{request.node.nodeid} uses {', '.join(used)} (DDS or the installed package): "
                    'mark it `integration` (CONTRIBUTING.md, "Tests")', pytrace=False)

    _import_torch_before_the_guard()
    _build_matplotlib_font_cache_before_the_guard()

    def refuse(what: str):
        def refused(*_args, **_kwargs):
            raise AssertionError(f"{request.node.nodeid} starts {what}: mark it `integration` "
                                 '(CONTRIBUTING.md, "Tests")')
        return refused

    monkeypatch.setattr(subprocess.Popen, "_execute_child", refuse("a child process"))
    if ROS_AVAILABLE:
        from rclpy.context import Context

        monkeypatch.setattr(Context, "init", refuse("rclpy (a DDS participant)"))


def pytest_collection_modifyitems(config, items):
    """
    Put the files that hold a `slow` test first; skip the `ros` tests without the built interfaces.

    pytest-xdist (`make test`) hands whole files to its workers in this order, so a long file
    started last would leave the other workers idle while it runs; a stable sort keeps each
    file's own order. `make test` always builds the interfaces.
    """
    slow_files = {item.path for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: item.path not in slow_files)
    if ROS_AVAILABLE:
        return
    skip = pytest.mark.skip(reason="rclpy / m2sa_ros interfaces not built: run `make setup`")
    for item in items:
        if "ros" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def ros_context():
    """Yield a fresh rclpy context per test, shut down afterwards even when the test fails."""
    import rclpy

    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        yield context
    finally:
        if context.ok():
            rclpy.shutdown(context=context)


@pytest.fixture(scope="module")
def module_context():
    """
    One rclpy context for a whole test module, shut down after its last test.

    For modules whose tests share a node harness or a model: creating a context per
    test would make them slower without isolating anything they check.
    """
    import rclpy

    context = rclpy.Context()
    rclpy.init(context=context)
    yield context
    context.try_shutdown()


@pytest.fixture
def config_on_small_world(tmp_path):
    """
    Return a repository config copied with its ``data/synth`` paths on a small world of its own.

    Training and benchmark tests run the real configs, whose data is the full synthetic
    world; ``make(config, images, replace={...})`` writes the world (seed 5, 128 px) once per
    test and the copy beside it, with any further text replaced. Returns (config, world).
    """
    from m2sa_core.data.synthetic import main as synth_main

    repo = Path(__file__).resolve().parents[1]
    world = tmp_path / "world"

    def make(config: str, images: int, replace: dict[str, str] | None = None) -> tuple[Path, Path]:
        if not world.exists():
            assert synth_main(["--out", str(world), "--images", str(images), "--seed", "5", "--size", "128",
                               "--quiet"]) == 0
        text = (repo / config).read_text().replace("data/synth", str(world))
        for old, new in (replace or {}).items():
            assert old in text, f"{config} has no {old!r} to replace"
            text = text.replace(old, new)
        copy = tmp_path / Path(config).name
        copy.write_text(text)
        return copy, world

    return make
