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

DDS traffic of the tests stays on this machine (loopback discovery) and on a domain of
its own, so parallel runs and other ROS graphs on the network never see each other.
"""

from __future__ import annotations

import os
from pathlib import Path
import random

os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
os.environ.setdefault("ROS_DOMAIN_ID", str(random.Random(os.getpid()).randint(1, 100)))
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


def pytest_collection_modifyitems(config, items):
    """Skip the tests marked `ros` without the built interfaces; `make test` always builds them."""
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
