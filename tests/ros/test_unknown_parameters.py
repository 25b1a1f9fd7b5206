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
Start-up overrides the node does not declare are named once, with the nearest declared name, and the node starts anyway.

A preset that is none is one error, not a warning first.

The node runs as a user starts it (``m2sa-perception --ros-args ...``), its output read
line by line, so the tests count what a user reads.
"""

from __future__ import annotations

from pathlib import Path
import signal
import sys

from node_process import NodeProcess, start_active_node
import pytest

pytestmark = [pytest.mark.ros, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
ENTRY = Path(sys.executable).parent / "m2sa-perception"


def _argv(*ros_args: str) -> list[str]:
    if not ENTRY.exists():
        pytest.skip(f"{ENTRY} not installed (make setup)")
    return [str(ENTRY), "--ros-args", *ros_args]


def _stop(node: NodeProcess) -> list[str]:
    """SIGINT, wait for the exit (0), the output's lines."""
    node.proc.send_signal(signal.SIGINT)
    code = node.wait(timeout=60)
    assert code == 0, node.output
    return node.output.splitlines()


def _mentioning(lines: list[str], text: str) -> list[str]:
    return [line for line in lines if text in line]


# --------------------------------------------------------------------------- no ROS
def test_unknown_overrides_pairs_each_typo_with_its_parameter():
    from m2sa_ros.params.node_params import PARAMETER_NAMES
    from m2sa_ros.params.ros_parameters import unknown_overrides

    declared = [*PARAMETER_NAMES, "use_sim_time"]
    given = ["mask_treshold", "max_queue", "max_que", "publish_overlai", "use_sim_tme", "zzz_unrelated",
             "qos_overrides./image.subscription.depth"]  # QoS ones are declared with their topics, later
    assert unknown_overrides(given, declared) == [
        ("mask_treshold", "mask_threshold"), ("max_que", "max_queue"), ("publish_overlai", "publish_overlay"),
        ("use_sim_tme", "use_sim_time"), ("zzz_unrelated", None)]


def test_a_preset_that_is_none_is_refused_naming_the_presets():
    from m2sa_core.model import PRESETS
    from m2sa_ros.model.model_source import PRESETS as NAMES
    from m2sa_ros.model.model_source import resolve_model_source

    assert sorted(NAMES) == sorted(PRESETS)  # spelled out so that choosing a model never imports torch
    with pytest.raises(ValueError, match=r"^preset 'huge' is not a preset \(presets: tiny, tiny-authors, 7b, 13b\)$"):
        resolve_model_source("", "huge", candidates=[])
    assert resolve_model_source("", "tiny-authors", candidates=[]).is_preset


# --------------------------------------------------------------------------- the node, as started
def test_a_mistyped_p_override_gets_one_warning_and_the_node_starts():
    node = start_active_node(_argv("-r", "__ns:=/typo_p", "-p", "mask_treshold:=0.5"), cwd=ROOT)
    try:
        lines = _stop(node)
    finally:
        node.kill()
    named = _mentioning(lines, "mask_treshold")
    assert len(named) == 1, lines
    assert named[0].startswith("[WARN]") and named[0].endswith(
        "parameter 'mask_treshold' is not a parameter of this node and is ignored; did you mean mask_threshold?")
    assert _mentioning(lines, "active: listening"), lines


def test_typos_in_a_params_file_are_named_for_this_node_and_for_all(tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text("/**:\n  ros__parameters:\n    max_que: 3\n"
                      "/typo_file/perception_node:\n  ros__parameters:\n    publish_overlai: false\n    amodal: true\n"
                      "some_other_node:\n  ros__parameters:\n    not_for_us: 1\n", encoding="utf-8")
    node = start_active_node(_argv("-r", "__ns:=/typo_file", "--params-file", str(params)), cwd=ROOT)
    try:
        lines = _stop(node)
    finally:
        node.kill()
    warnings = [line for line in lines if line.startswith("[WARN]") and "is not a parameter of this node" in line]
    assert [w.split("]: ", 1)[1] for w in warnings] == [
        "parameter 'max_que' is not a parameter of this node and is ignored; did you mean max_queue?",
        "parameter 'publish_overlai' is not a parameter of this node and is ignored; did you mean publish_overlay?",
    ], lines
    assert not _mentioning(lines, "not_for_us"), lines  # another node's parameter is that node's business
    assert _mentioning(lines, "active: listening"), lines


def test_a_bad_preset_is_one_error_without_a_warning_first():
    node = NodeProcess(_argv("-r", "__ns:=/bad_preset", "-p", "preset:=huge"), cwd=ROOT)
    try:
        node.wait_for_line("autostart: configure failed", timeout=120)
        lines = _stop(node)
    finally:
        node.kill()
    assert _mentioning(lines, "huge") == [
        next(line for line in lines if line.startswith("[ERROR]") and "huge" in line)], lines
    (error,) = _mentioning(lines, "huge")
    assert error.endswith("configure failed: could not load the model (huge) on cpu: ValueError: preset 'huge' "
                          "is not a preset (presets: tiny, tiny-authors, 7b, 13b)"), error
    assert not [line for line in lines if line.startswith("[WARN]")], lines  # no "random weights" first
