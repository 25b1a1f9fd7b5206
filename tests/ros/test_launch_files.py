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
The parameters file and the launch file.

Their keys and arguments, the docs that list them, and the launch description on the
real launch / launch_ros (not on PyPI: a ROS install's, or scripts/build_ros_src.sh's
build from ros-src/*.repos). What each argument does is
tests/ros/test_launch_arguments.py's.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

from m2sa_ros.params.node_params import PARAMETERS, validate
import pytest
import yaml

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
PARAMS_FILE = ROOT / "config" / "perception.yaml"
LAUNCH_FILE = ROOT / "launch" / "perception.launch.py"
REQUIRED_ARGUMENTS = {"model_path", "preset", "device", "image_topic", "command_topic", "namespace",
                      "params_file", "use_sim_time", "command_stamped_topic", "log_level", "use_compressed",
                      "image_reliability", "depth_reliability", "camera_info_reliability", "autostart", "respawn",
                      "respawn_delay", "rviz", "rviz_fixed_frame", "target_frame", "tf_timeout", "max_image_age"}


def _node_parameters() -> dict:
    data = yaml.safe_load(PARAMS_FILE.read_text())
    assert list(data) == ["/**"], "parameters must apply to the node under any namespace"
    return data["/**"]["ros__parameters"]


def test_params_file_keys_are_exactly_the_declared_parameters():
    values = _node_parameters()
    declared = {spec.name for spec in PARAMETERS}
    assert set(values) - declared == set(), "undeclared parameters in config/perception.yaml"
    assert declared - set(values) == set(), "declared parameters missing from config/perception.yaml"


def test_params_file_values_pass_validation_and_match_the_defaults():
    values = _node_parameters()
    validate(values)
    for spec in PARAMETERS:
        assert values[spec.name] == spec.default, spec.name


@pytest.mark.ros
def test_params_file_is_read_by_the_ros_parameter_parser(ros_context):
    """
    The params file is read by the ROS parameter parser: "/**" matches a namespaced node.

    The rcl library's own YAML parser, the one behind --params-file (which launch passes the file
    to), gives the node under a namespace exactly the declared parameters: "/**" matches
    it. (rclpy's Python parameter_dict_from_yaml_file is not that parser, and resolves
    "/**" for a named node only from rclpy 9, Kilted, on.)
    """
    from rclpy.node import Node
    from rclpy.parameter import Parameter

    node = Node("perception_node", namespace="robot1", context=ros_context,
                cli_args=["--ros-args", "--params-file", str(PARAMS_FILE)])
    try:
        overrides = dict(node._parameter_overrides)  # what rcl parsed for this node, before any declare
    finally:
        node.destroy_node()
    assert set(overrides) == {spec.name for spec in PARAMETERS}
    for spec in PARAMETERS:
        if spec.default == []:  # YAML's [] has no element type, so rcl leaves it untyped
            assert overrides[spec.name].type_ == Parameter.Type.NOT_SET, spec.name
        else:
            assert overrides[spec.name].value == spec.default, spec.name


def _launch_arguments() -> set[str]:
    tree = ast.parse(LAUNCH_FILE.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "ARGUMENTS" for t in node.targets):
            return {elt.elts[0].value for elt in node.value.elts}
    raise AssertionError("ARGUMENTS table not found in the launch file")


def test_launch_file_declares_the_documented_arguments():
    assert REQUIRED_ARGUMENTS <= _launch_arguments()


def test_launch_file_imports_and_describes_the_node():
    spec = importlib.util.spec_from_file_location("perception_launch", LAUNCH_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    description = module.generate_launch_description()
    names = {entity.name for entity in description.entities if hasattr(entity, "default_value")}
    assert REQUIRED_ARGUMENTS <= names


def _doc_type(default) -> str:
    """Return the type the docs' parameter table gives a parameter with this default."""
    if isinstance(default, list):
        return "string[]"
    return {bool: "bool", int: "int", float: "double", str: "string"}[type(default)]


def _doc_default(default) -> str:
    if isinstance(default, bool):
        return f"`{str(default).lower()}`"
    if isinstance(default, list):
        return f"`{default}`".replace("'", "")
    return f"`{default}`" if default != "" else '`""`'


def test_interface_doc_parameter_table_agrees_with_the_one_table():
    # The table of docs/ROS_INTERFACE.md is written by hand beside PARAMETERS (node_params.py):
    # its names, types, defaults, when each applies and each range are checked against it.
    text = (ROOT / "docs" / "ROS_INTERFACE.md").read_text()
    table = text.split("| Name | Type | Default | When | Meaning |\n|---|---|---|---|---|\n", 1)[1].split("\n\n", 1)[0]
    rows = {}
    for line in table.splitlines():
        name, kind, default, when, meaning = (cell.strip() for cell in line.strip().strip("|").split(" | ", 4))
        rows[name.strip("`")] = (kind, default, when, meaning)
    assert list(rows) == [spec.name for spec in PARAMETERS], "the table's rows are not PARAMETERS' names, in order"
    for spec in PARAMETERS:
        kind, default, when, meaning = rows[spec.name]
        expected_when = "read-only" if spec.read_only else "now" if spec.runtime else "configure"
        assert (kind, default, when) == (_doc_type(spec.default), _doc_default(spec.default), expected_when), spec.name
        if spec.minimum is not None:
            assert f"Range {spec.minimum}..{spec.maximum}." in meaning, (spec.name, meaning)


def test_interface_doc_lists_every_parameter_and_launch_argument():
    text = (ROOT / "docs" / "ROS_INTERFACE.md").read_text()
    rows = {line.split("|")[1].strip().strip("`") for line in text.splitlines() if line.startswith("| `")}
    assert {spec.name for spec in PARAMETERS} <= rows
    for argument in REQUIRED_ARGUMENTS:
        assert f"`{argument}`" in text, argument
    assert "m2sa-perception --ros-args --params-file config/perception.yaml" in text
