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
The package as a ROS user has it.

A colcon install space, sourced over the venv with the upstream ROS packages built
from ros-src/*.repos (launch, ros2cli, bondpy, ...).

`make setup` builds those packages (scripts/build_ros_src.sh) and writes a .pth file into
the venv that makes its python import them, so wherever that file exists a missing
upstream module is a broken setup: :func:`require_upstream` fails the test then, and skips
only on a venv set up without them. CI's `make setup` always builds them, so nothing that
needs them skips there.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import importlib.util
import os
from pathlib import Path
import shutil
import subprocess
import sys
import sysconfig

from m2sa_ros.tools.child_process import ChildProcess
from middleware_log import without_middleware_lines
import pytest

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
COLCON = VENV_BIN / "colcon"
UPSTREAM_PTH = Path(sysconfig.get_paths()["purelib"]) / "m2sa_ros_src.pth"  # written by build_ros_src.sh


def require_upstream(*modules: str) -> None:
    """Fail when an upstream module is missing from a venv that built them; skip on one that did not."""
    missing = [name for name in modules if importlib.util.find_spec(name) is None]
    if not missing:
        return
    if UPSTREAM_PTH.exists() or os.environ.get("CI"):
        pytest.fail(f"{', '.join(missing)} not importable although make setup built the upstream ROS packages "
                    f"({UPSTREAM_PTH}): see build/ros-src-*/build.log", pytrace=False)
    pytest.skip(f"{', '.join(missing)} not built: make setup builds them (scripts/build_ros_src.sh)")


def upstream_install() -> Path:
    """Return the install space of the upstream packages this python imports (build/ros-src-<distro>/install)."""
    require_upstream("ros2cli")
    spec = importlib.util.find_spec("ros2cli")
    assert spec is not None and spec.origin is not None
    # <install>/lib/pythonX.Y/site-packages/ros2cli/__init__.py
    return Path(spec.origin).resolve().parents[4]


def colcon_env(workspace: Path) -> dict[str, str]:
    """Return the environment `source /opt/ros/<distro>/setup.bash` gives, with the venv as the underlay."""
    env = dict(os.environ)
    prefixes = [VENV_BIN.parent]
    # The upstream packages make setup builds are part of that underlay: CMake finds the
    # ament linters there (ament_lint_auto, ament_cmake_copyright, ament_cmake_xmllint).
    lint = importlib.util.find_spec("ament_copyright")
    if lint is not None and lint.origin is not None:
        prefixes.append(Path(lint.origin).resolve().parents[4])  # <install>/lib/pythonX.Y/site-packages/...
    env["PATH"] = ":".join([*(str(prefix / "bin") for prefix in prefixes), env.get("PATH", "")])
    # As /opt/ros/<distro> is on a robot: the install space's setup.sh then sources the
    # upstream packages' local_setup.sh first (colcon chains every prefix of AMENT_PREFIX_PATH
    # that has one), which puts `ros2` on PATH in a shell that sourced nothing else.
    env["AMENT_PREFIX_PATH"] = ":".join(map(str, prefixes))
    env["CMAKE_PREFIX_PATH"] = ":".join(map(str, prefixes))
    env["COLCON_LOG_PATH"] = str(workspace / "log")
    env.pop("PYTHONPATH", None)
    return env


def build_workspace(workspace: Path) -> Path:
    """
    `colcon build` of this checkout into ``workspace`` (src/m2sa_ros links to it); returns ``workspace``.

    A workspace built before is built again in place, which colcon does incrementally.
    """
    if not COLCON.exists():
        pytest.fail(f"{COLCON} missing: make setup installs colcon from requirements.lock", pytrace=False)
    (workspace / "src").mkdir(parents=True, exist_ok=True)
    link = workspace / "src" / "m2sa_ros"
    if not link.is_symlink():
        link.symlink_to(ROOT, target_is_directory=True)
    assert link.resolve() == ROOT, f"{link} points to {link.resolve()}, not this checkout"
    build = subprocess.run(
        [str(COLCON), "build", "--base-paths", "src", "--build-base", "build", "--install-base", "install",
         "--event-handlers", "console_direct+", "--cmake-args", f"-DPython3_EXECUTABLE={sys.executable}",
         "-DBUILD_TESTING=ON"],
        cwd=workspace, env={**colcon_env(workspace), "CMAKE_BUILD_PARALLEL_LEVEL": str(os.cpu_count() or 2)},
        capture_output=True, text=True, timeout=1200)
    assert build.returncode == 0, build.stdout[-6000:] + build.stderr[-3000:]
    assert "Finished <<< m2sa_ros" in build.stdout, build.stdout[-3000:]
    return workspace


@contextmanager
def colcon_test_turn(workspace: Path) -> Iterator[None]:
    """
    Hold the session's one workspace for a `colcon test` run and the reading of its results.

    Under pytest-xdist two test files may run `colcon test` in that workspace at once (the
    linters in one, the registered pytest files in another). ctest starts each test by
    writing a "did not generate a result file" xunit placeholder into build/, so the other
    file's `colcon test-result`, which reads every result under build/, took a linter still
    running for an error (a loaded `make test` failed so). A file lock beside the workspace
    makes each run and its reading one turn.
    """
    from filelock import FileLock

    with FileLock(f"{workspace}.colcon-test.lock"):
        yield


def sourced_env(workspace: Path) -> dict[str, str]:
    """
    Return a user's shell after `. <venv>/setup.sh` and `. <workspace>/install/setup.sh`.

    `ros2` on PATH, the upstream packages and the install space on AMENT_PREFIX_PATH (what `ros2 launch` looks
    packages up in).
    """
    upstream_install()  # fails or skips first when the upstream packages are missing
    setup = VENV_BIN.parent / "setup.sh"
    assert setup.is_file(), f"{setup} missing: make setup writes it"
    # colcon-core writes the POSIX setup.sh (setup.bash comes from colcon-bash, not needed here).
    out = subprocess.run(["bash", "-c", f". {setup} && . {workspace}/install/setup.sh && env -0"],
                         env=colcon_env(workspace), capture_output=True, text=True, timeout=60, check=True)
    return dict(item.split("=", 1) for item in out.stdout.split("\0") if "=" in item)


def ros2(env: dict[str, str], *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess:
    """
    ``ros2 <args>`` in the sourced shell ``env``; stdout and stderr as text, Fast DDS's own log lines left out.

    A verb that looks a node up does so in the ros2 daemon's graph, as at a user's terminal:
    call :func:`ros2_daemon_sees` first, so that the daemon has seen the node. A verb run
    with ``--no-daemon`` instead discovers the graph itself in its ``--spin-time``, which a
    loaded machine can outlast, and then says "Node not found" of a node that is there.
    """
    executable = shutil.which("ros2", path=env.get("PATH"))
    assert executable, f"no ros2 on PATH: {env.get('PATH')}"
    run = subprocess.run([executable, *args], env=env, capture_output=True, text=True, timeout=timeout)
    run.stdout, run.stderr = without_middleware_lines(run.stdout), without_middleware_lines(run.stderr)
    return run


def ros2_daemon_sees(env: dict[str, str], fqn: str, timeout: float = 60.0) -> None:
    """
    Start the ros2 daemon of ``env``'s domain, and return once it lists the lifecycle node ``fqn``.

    The daemon is the long-lived process whose graph the ``ros2`` verbs read; once it has
    listed the node and its ``get_state`` service, ``ros2 lifecycle`` and ``ros2 param``
    find the node at once. The ``ros_shell`` fixture stops it at the end of the session.
    """
    from node_harness import wait_until
    from ros2cli.node.daemon import DaemonNode

    assert env.get("ROS_DOMAIN_ID") == os.environ.get("ROS_DOMAIN_ID"), "the daemon is asked on this process's domain"
    started = ros2(env, "daemon", "start")
    assert started.returncode == 0, started.stdout + started.stderr
    namespace, name = fqn.rsplit("/", 1)
    wanted_service = [f"{fqn}/get_state", ["lifecycle_msgs/srv/GetState"]]

    def listed() -> bool:
        with DaemonNode(None) as daemon:
            if not daemon.connected:
                return False
            return ([name, namespace or "/"] in daemon.get_node_names_and_namespaces()
                    and wanted_service in daemon.get_service_names_and_types())

    wait_until(listed, timeout, f"the ros2 daemon to list {fqn} and its get_state service")


class LaunchProcess(ChildProcess):
    """
    ``ros2 launch`` (or any command) in a process of its own, its output collected line by line.

    With ``terminal=True`` it runs on a pseudo-terminal that is its controlling terminal,
    as in a user's shell: launch sees a tty, and :meth:`ctrl_c` types Ctrl-C, which the
    terminal turns into SIGINT for the whole foreground process group (launch and the
    node); :meth:`kill` ends that whole session. Without it, output goes through a pipe
    and :meth:`ctrl_c` sends SIGINT to launch alone, as a service manager or ``kill -INT``
    does. Either way it leads a session of its own, so that :meth:`kill` takes the nodes
    launch started along, even after launch itself has gone.
    """

    def __init__(self, argv: list[str], env: dict[str, str], terminal: bool = False) -> None:
        super().__init__(argv, env=env, terminal=terminal, collect=True, stdin=subprocess.DEVNULL,
                         start_new_session=True)
        self.start()

    def ctrl_c(self) -> None:
        """Ctrl-C as the terminal delivers it (typed), or SIGINT to launch alone (no terminal)."""
        self.interrupt()
