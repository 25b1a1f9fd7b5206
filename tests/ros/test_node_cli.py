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
The `m2sa-perception` console entry point.

Standard ROS arguments, the shipped parameters file, autostart, a clear log
line for a bad parameter, clean Ctrl-C.
"""

from __future__ import annotations

import os
from pathlib import Path
import subprocess
import sys
import time

from node_process import ctrl_c
import numpy as np
import pytest

pytestmark = [pytest.mark.ros, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
ENTRY = Path(sys.executable).parent / "m2sa-perception"
PARAMS = ROOT / "config" / "perception.yaml"


def _start(*ros_args: str) -> subprocess.Popen:
    if not ENTRY.exists():
        pytest.skip(f"{ENTRY} not installed (pip install -e .)")
    return subprocess.Popen([str(ENTRY), "--ros-args", *ros_args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=dict(os.environ), cwd=ROOT)


def test_entry_point_with_params_file_remaps_and_serves(ros_context):
    from m2sa_ros.srv import Segment
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node

    proc = _start("--params-file", str(PARAMS), "-p", "preset:=tiny", "-p", "max_new_tokens:=8",
                  "-r", "__ns:=/cli_robot", "-r", "image:=/cli_robot/camera/color")
    node = Node("cli_client", context=ros_context)
    try:
        client = node.create_client(Segment, "/cli_robot/segment")
        assert client.wait_for_service(timeout_sec=90), "service never appeared (autostart failed?)"
        request = Segment.Request(command="turn on the TV")
        rgb = np.random.default_rng(0).integers(0, 256, (48, 64, 3), dtype=np.uint8)
        request.image.height, request.image.width, request.image.encoding = 48, 64, "rgb8"
        request.image.step, request.image.data = 64 * 3, rgb.tobytes()
        future = client.call_async(request)
        executor = SingleThreadedExecutor(context=ros_context)
        executor.add_node(node)
        executor.spin_until_future_complete(future, timeout_sec=90)
        executor.shutdown()
        assert future.done()
        result = future.result().result
        assert result.success, result.error
        assert (result.height, result.width) == (48, 64)
        wanted = {"/cli_robot/camera/color", "/cli_robot/result", "/cli_robot/command"}
        deadline = time.monotonic() + 20  # endpoints are discovered independently of the service
        while not wanted <= set(dict(node.get_topic_names_and_types())) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert wanted <= set(dict(node.get_topic_names_and_types())), "remapped topics not found"
    finally:
        node.destroy_node()
        code, out = ctrl_c(proc, must_exit=True)
    assert code == 0, out
    assert "random weights" in out  # the untrained preset is announced
    assert "Traceback" not in out, out


def test_bad_parameter_is_a_clear_log_line_not_a_traceback():
    proc = _start("--params-file", str(PARAMS), "-p", "max_queue:=0", "-p", "device:=gpu")
    deadline = time.monotonic() + 60
    lines: list[str] = []
    os.set_blocking(proc.stdout.fileno(), False)
    while time.monotonic() < deadline and not any("configure failed" in line for line in lines):
        chunk = proc.stdout.readline()
        if chunk:
            lines.append(chunk)
        else:
            time.sleep(0.05)
    os.set_blocking(proc.stdout.fileno(), True)
    alive = proc.poll() is None
    code, out = ctrl_c(proc, must_exit=True)
    out = "".join(lines) + out
    assert "configure failed: invalid parameters: device='gpu'" in out, out
    assert "max_queue=0: must be >= 1" in out
    assert alive, "the node must stay up (unconfigured) for a fixed configure"
    assert "Traceback" not in out and code == 0, out


def test_the_node_process_hands_the_gil_back_to_the_model_thread_quickly():
    """
    The node process hands the GIL back to the model thread quickly.

    At Python's default 5 ms switch interval, each of the model's small operations could wait
    that long for an executor thread busy with a message (a /clock at 100 Hz under simulated
    time): `make demo` measured 7.8 s commands that take 45 ms alone.
    """
    code = ("import sys\nfrom m2sa_ros import main as node\n"
            "try:\n    node.main(['perception_node', '--ros-args', '--params-file', '/nonexistent/p.yaml'])\n"
            "except SystemExit:\n    pass\nprint('switch interval', sys.getswitchinterval())\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    from m2sa_ros.main import GIL_SWITCH_INTERVAL_S

    value = float(proc.stdout.split("switch interval")[-1])
    assert value <= 0.0005 and abs(value - GIL_SWITCH_INTERVAL_S) < 1e-9
