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
Fixtures the ROS tests share.

``graph`` (node_harness.Graph on a fresh rclpy context, per test) and ``tiny`` (the real
tiny Segmenter with random weights and its steering hook, once per module) serve the
tests of the node over DDS (test_node_dds.py, test_node_track.py, test_node_geometry.py
and the others that run nodes on a Graph). ``graph`` uses ``ros_context``, so the
autouse guard of tests/conftest.py refuses it to a test not marked `integration`.

One colcon install space of the package per test session: a `colcon build` takes minutes
on a 2-core CPU, so the tests that run the package from an install space
(tests/ros/test_colcon_build.py, test_launch_run.py, test_ros2_cli.py, test_nav2_bond.py)
share one. ``M2SA_COLCON_WS=<folder>`` keeps it in that folder between
sessions, where colcon builds again incrementally (for working on those tests).
"""

from __future__ import annotations

import os
from pathlib import Path
import subprocess

from fake_models import Steering
from node_harness import Graph
import pytest
from ros_install import build_workspace, sourced_env, upstream_install


@pytest.fixture
def graph(ros_context):
    """Yield perception node(s) and a client node spinning on ``ros_context``, closed after the test."""
    g = Graph(ros_context)
    try:
        yield g
    finally:
        g.close()


@pytest.fixture(scope="module")
def tiny():
    """Yield the real tiny Segmenter (random weights) and its steering hook, built once per module."""
    from m2sa_core.inference import Segmenter

    segmenter = Segmenter.from_pretrained("tiny", device="cpu", frame_cache_size=4, max_new_tokens=48)
    steering = Steering()
    handle = segmenter.model.llm.lm_head.register_forward_hook(steering.hook)
    yield segmenter, steering
    handle.remove()


@pytest.fixture(scope="session")
def colcon_workspace(tmp_path_factory) -> Path:
    """
    Return a colcon workspace whose install/ holds this checkout's package, built once per run.

    Under pytest-xdist every worker that runs such a test asks for it: the first builds it
    in the run's shared temporary folder while the others wait on a file lock, then all
    use that one build.
    """
    from filelock import FileLock

    run_folder = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        run_folder = run_folder.parent  # this run's, shared by its workers
    kept = os.environ.get("M2SA_COLCON_WS")
    workspace = Path(kept) if kept else run_folder / "colcon_ws"
    with FileLock(str(run_folder / "colcon_ws.lock")):
        built = run_folder / "colcon_ws.built"
        if not built.exists():
            build_workspace(workspace)
            built.touch()
    return workspace


@pytest.fixture(scope="session")
def ros_shell(colcon_workspace) -> dict[str, str]:
    """
    Yield the environment of a shell that sourced the venv's setup.sh and the install space's setup.sh.

    The ``ros2`` verbs read the graph from the ros2 daemon of the process's domain, as at a
    user's terminal (ros_install.ros2_daemon_sees starts it); it would outlive the session,
    so it is stopped at the end.
    """
    env = sourced_env(colcon_workspace)
    yield env
    subprocess.run([str(upstream_install() / "bin" / "ros2"), "daemon", "stop"], env=env,
                   capture_output=True, timeout=60)
