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
launch/perception.launch.py's arguments, on the real launch / launch_ros.

The launch description is evaluated as ``ros2 launch`` evaluates it (its arguments
declared, the OpaqueFunction run in a LaunchContext), and the command line it gives the
node is handed to a real PerceptionNode, so each argument is checked for what it must
do in the node: the namespace, the parameters read, the log level, the node left
unconfigured. rviz2 is not on PyPI: for ``rviz:=true`` the rviz2 action and the RViz
config generated for the launch are checked instead, with an ament index that lists an
rviz2 package (``rviz2_installed``), and without one, the warning. Starting it all with
``ros2 launch`` is tests/ros/test_launch_files.py's and the CLI tests' job.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

from fake_models import BoxSegmenter
import pytest
import yaml

pytestmark = [pytest.mark.ros, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
LAUNCH_FILE = ROOT / "launch" / "perception.launch.py"
PARAMS_FILE = ROOT / "config" / "perception.yaml"
RVIZ_TEMPLATE = ROOT / "rviz" / "m2sa_perception.rviz"


def _launch_module() -> Any:
    spec = importlib.util.spec_from_file_location("perception_launch", LAUNCH_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def rviz2_installed(tmp_path, monkeypatch) -> None:
    """Put first on AMENT_PREFIX_PATH an install prefix whose ament index lists rviz2, as a sourced rviz2 does."""
    marker = tmp_path / "rviz2_prefix" / "share" / "ament_index" / "resource_index" / "packages" / "rviz2"
    marker.parent.mkdir(parents=True)
    marker.touch()
    monkeypatch.setenv("AMENT_PREFIX_PATH", f"{tmp_path / 'rviz2_prefix'}:{os.environ.get('AMENT_PREFIX_PATH', '')}")


class Launched:
    """
    What the launch description starts for ``arguments``.

    The node action, its ROS arguments as the process gets them, and the rviz2 action
    (None unless rviz:=true).
    """

    def __init__(self, argv: list[str] | None = None, **arguments: str) -> None:
        from launch import LaunchContext
        from launch.utilities import perform_substitutions
        from launch_ros.actions import LifecycleNode

        self.context = LaunchContext(argv=argv)  # argv: the name:=value words of the command line
        self.context.launch_configurations.update({"params_file": str(PARAMS_FILE), **arguments})
        actions = []
        for entity in _launch_module().generate_launch_description().entities:
            actions += entity.visit(self.context) or []  # DeclareLaunchArgument fills defaults; the function runs
        nodes = [a for a in actions if isinstance(a, LifecycleNode)]
        assert len(nodes) == 1, actions
        self.node = nodes[0]
        others = [a for a in actions if a is not self.node]
        self.rviz = others[0] if others else None
        assert len(others) <= 1, others
        self.node._perform_substitutions(self.context)  # what Node.execute does first
        # Node.execute fills these two in from the values it has just expanded.
        self.context.extend_locals({"ros_specific_arguments": {
            "name": f"__node:={arguments.get('node_name', 'perception_node')}",
            "ns": f"__ns:={self.node.expanded_node_namespace}"}})
        cmd = [perform_substitutions(self.context, part) for part in self.node.cmd[1:]]  # [0]: the executable
        self.ros_args = cmd[cmd.index("--ros-args"):]

    @staticmethod
    def cameras_of(text: str) -> list[str]:
        """Return the camera names a ``cameras:=`` value gives, as the launch file parses it."""
        return _launch_module()._camera_list(text)

    def parameter_files(self) -> list[dict]:
        files = [self.ros_args[i + 1] for i, arg in enumerate(self.ros_args) if arg == "--params-file"]
        return [yaml.safe_load(Path(f).read_text()) for f in files]

    def start(self, context: Any, segmenter: Any) -> Any:
        """Return the real node with exactly the ROS arguments the launch gives its process."""
        from m2sa_ros.perception_node import PerceptionNode

        return PerceptionNode(context=context, cli_args=self.ros_args, segmenter_factory=lambda _p, _s: segmenter)

    def rviz_config(self) -> dict:
        assert self.rviz is not None, "no rviz2 action"
        from launch.utilities import perform_substitutions

        self.rviz._perform_substitutions(self.context)
        cmd = [perform_substitutions(self.context, part) for part in self.rviz.cmd[1:]]
        return yaml.safe_load(Path(cmd[cmd.index("-d") + 1]).read_text())


def _view_topics(config: dict) -> dict[str, str]:
    return {d["Name"]: d["Topic"]["Value"] for d in config["Visualization Manager"]["Displays"] if "Topic" in d}


# The node's process as launch starts it (m2sa_ros.main: rclpy.init with the process's
# arguments, then PerceptionNode()), stopped before it spins: the log level is the
# process's (rcl reads --log-level at init), so it is looked at in a process of its own.
PROCESS = """
import json, sys
import rclpy
from m2sa_ros.perception_node import PerceptionNode
rclpy.init(args=sys.argv)
node = PerceptionNode()
names = ("autostart", "use_compressed", "image_reliability", "device", "use_sim_time")
print(json.dumps({"name": node.get_fully_qualified_name(), "state": node.lifecycle_state(),
                  "autostarts": node._autostart_timer is not None,
                  "log_level": node.get_logger().get_effective_level().name,
                  "parameters": {n: node.get_parameter(n).value for n in names},
                  "compressed": node.resolve_topic_name("image/compressed"),
                  "depth": node.resolve_topic_name("depth")}))
node.destroy_node()
rclpy.shutdown()
"""


def test_autostart_false_leaves_the_node_unconfigured_with_the_arguments_applied():
    """
    The lifecycle manager's bring-up.

    The node waits unconfigured under its namespace, with the parameters, remappings
    and log level the arguments gave.
    """
    import json
    import subprocess
    import sys

    launched = Launched(namespace="robot1", autostart="false", log_level="debug", use_compressed="true",
                        image_reliability="reliable", image_topic="/camera/color/image_raw", device="cpu")
    out = subprocess.run([sys.executable, "-c", PROCESS, *launched.ros_args], capture_output=True, text=True,
                         timeout=120, check=True)
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen == {"name": "/robot1/perception_node", "state": "unconfigured", "autostarts": False,
                    "log_level": "DEBUG",
                    "parameters": {"autostart": False, "use_compressed": True, "image_reliability": "reliable",
                                   "device": "cpu", "use_sim_time": False},
                    "compressed": "/camera/color/image_raw/compressed", "depth": "/robot1/depth"}, out.stderr


def test_empty_arguments_keep_the_parameters_file_and_autostart_is_its_default(ros_context):
    launched = Launched()
    params_file, overrides = launched.parameter_files()
    assert params_file == yaml.safe_load(PARAMS_FILE.read_text())
    assert overrides == {"/perception_node": {"ros__parameters": {"use_sim_time": False}}}  # nothing else
    assert launched.ros_args[:3] == ["--ros-args", "--log-level", "info"]
    assert launched.rviz is None
    node = launched.start(ros_context, BoxSegmenter())
    try:
        assert node.get_parameter("autostart").value is True and node._autostart_timer is not None
        assert node.get_fully_qualified_name() == "/perception_node"
    finally:
        node.destroy_node()


@pytest.mark.parametrize("cameras, depth_topic, expected", [
    ("", "depth", ["/front/depth"]),
    ("", "/camera/aligned_depth", ["/camera/aligned_depth"]),
    ("[head, wrist]", "aligned/depth", ["/front/head/aligned/depth", "/front/wrist/aligned/depth"]),
])
def test_a_per_topic_reliability_is_the_qos_override_of_the_topic_the_node_subscribes(
        ros_context, cameras, depth_topic, expected):
    """
    A subscription's QoS parameters are named after its topic as resolved (namespace and remapping applied).

    The launch file's names must be those, or they set nothing.
    """
    from rclpy.lifecycle import TransitionCallbackReturn
    from rclpy.qos import ReliabilityPolicy

    launched = Launched(namespace="front", cameras=cameras, depth_topic=depth_topic,
                        depth_reliability="reliable", camera_info_reliability="best_effort", autostart="false")
    node = launched.start(ros_context, BoxSegmenter())
    try:
        overrides = {name: p.value for name, p in node._parameter_overrides.items() if name.startswith("qos_")}
        prefixes = [f"{c}/" for c in ("head", "wrist")] if cameras else [""]
        resolved = [node.resolve_topic_name(f"{prefix}depth") for prefix in prefixes]
        assert resolved == expected
        for topic in resolved:
            assert overrides.pop(f"qos_overrides.{topic}.subscription.reliability") == "reliable"
        for prefix in prefixes:
            info = node.resolve_topic_name(f"{prefix}camera_info")
            assert overrides.pop(f"qos_overrides.{info}.subscription.reliability") == "best_effort"
        assert overrides == {}
        # And the node's subscriptions take them: the depth reliable, the image the default.
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
        reliability = {sub.topic_name: sub.qos_profile.reliability for sub in node.subscriptions}
        for topic in resolved:
            assert reliability[topic] == ReliabilityPolicy.RELIABLE
        for prefix in prefixes:
            assert reliability[node.resolve_topic_name(f"{prefix}image")] == ReliabilityPolicy.BEST_EFFORT
            assert reliability[node.resolve_topic_name(f"{prefix}camera_info")] == ReliabilityPolicy.BEST_EFFORT
    finally:
        node.close()


def test_compressed_depth_is_remapped_and_its_reliability_follows_it(ros_context):
    """
    With use_compressed_depth the node reads <depth_topic>/compressedDepth.

    The launch's depth_topic must reach that subscription too, and depth_reliability
    must name it.
    """
    from rclpy.lifecycle import TransitionCallbackReturn
    from rclpy.qos import ReliabilityPolicy

    launched = Launched(namespace="front", depth_topic="/camera/aligned_depth", use_compressed_depth="true",
                        depth_reliability="reliable", autostart="false")
    node = launched.start(ros_context, BoxSegmenter())
    try:
        topic = node.resolve_topic_name("depth/compressedDepth")
        assert topic == "/camera/aligned_depth/compressedDepth"
        overrides = {name: p.value for name, p in node._parameter_overrides.items() if name.startswith("qos_")}
        assert overrides == {f"qos_overrides.{topic}.subscription.reliability": "reliable"}
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
        reliability = {sub.topic_name: sub.qos_profile.reliability for sub in node.subscriptions}
        assert reliability[topic] == ReliabilityPolicy.RELIABLE
        assert "/camera/aligned_depth" not in reliability  # the raw depth is not subscribed
    finally:
        node.close()


def test_respawn_and_its_delay_reach_the_process_action():
    launched = Launched(respawn="true", respawn_delay="5")
    # launch keeps these private (no getter); ExecuteLocal is the class that holds them.
    assert launched.node._ExecuteLocal__respawn is True
    assert launched.node._ExecuteLocal__respawn_delay == 5.0
    default = Launched()
    assert default.node._ExecuteLocal__respawn is False


@pytest.mark.parametrize("arguments, complaint", [
    ({"log_level": "loud"}, "log_level must be one of debug, info, warn, error, fatal, got 'loud'"),
    ({"autostart": "no"}, "autostart must be true or false, got 'no'"),
    ({"respawn_delay": "soon"}, "respawn_delay must be a number of seconds, got 'soon'"),
    ({"respawn_delay": "-1"}, "respawn_delay must be >= 0"),
    ({"depth_reliability": "sometimes"}, "depth_reliability must be one of best_effort, reliable"),
    ({"rviz": "yes"}, "rviz must be true or false, got 'yes'"),
    ({"tf_timeout": "soon"}, "tf_timeout must be a number of seconds, got 'soon'"),
    ({"max_image_age": "-1"}, "max_image_age must be between 0 and 3600 seconds, got '-1'"),
])
def test_a_bad_argument_is_one_line_naming_it(arguments, complaint):
    with pytest.raises(ValueError, match=complaint.replace("(", r"\(")):
        Launched(**arguments)


def test_rviz_opens_on_the_namespaces_topics_and_the_configured_fixed_frame(rviz2_installed):
    launched = Launched(namespace="front_camera", rviz="true")
    assert (launched.rviz.node_package, launched.rviz.node_executable) == ("rviz2", "rviz2")
    config = launched.rviz_config()
    assert _view_topics(config) == {"M2SA overlay": "/front_camera/overlay", "M2SA targets": "/front_camera/markers",
                                    "M2SA target points": "/front_camera/target_points"}
    assert config["Visualization Manager"]["Global Options"]["Fixed Frame"] == "camera_color_optical_frame"
    template = yaml.safe_load(RVIZ_TEMPLATE.read_text())
    kept = [d["Class"] for d in config["Visualization Manager"]["Displays"] if "Topic" not in d]
    assert kept == [d["Class"] for d in template["Visualization Manager"]["Displays"] if "Topic" not in d]
    assert Launched(namespace="front_camera", rviz="true", rviz_fixed_frame="base_link").rviz_config()[
        "Visualization Manager"]["Global Options"]["Fixed Frame"] == "base_link"


def test_rviz_shows_every_camera_and_follows_the_nodes_target_frame(tmp_path, rviz2_installed):
    params = yaml.safe_load(PARAMS_FILE.read_text())
    params["/**"]["ros__parameters"]["target_frame"] = "base_link"
    params_file = tmp_path / "params.yaml"
    params_file.write_text(yaml.safe_dump(params))
    config = Launched(cameras="[head, wrist]", rviz="true", params_file=str(params_file)).rviz_config()
    assert _view_topics(config) == {
        "head: M2SA overlay": "/head/overlay", "head: M2SA targets": "/head/markers",
        "head: M2SA target points": "/head/target_points", "wrist: M2SA overlay": "/wrist/overlay",
        "wrist: M2SA targets": "/wrist/markers", "wrist: M2SA target points": "/wrist/target_points"}
    assert config["Visualization Manager"]["Global Options"]["Fixed Frame"] == "base_link"


def _launched_with_warnings(argv: list[str] | None = None, **arguments: str) -> tuple[Launched, list[Any]]:
    """Return what the launch description starts for ``arguments``, and the warnings it logged meanwhile."""
    import logging

    import launch.logging

    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = records.append
    logger = launch.logging.get_logger("perception.launch")  # what ros2 launch prints on screen
    logger.addHandler(handler)
    try:
        return Launched(argv=argv, **arguments), records
    finally:
        logger.removeHandler(handler)


def test_without_rviz2_rviz_true_is_one_warning_and_the_node_alone():
    """A headless robot has no rviz2: the launch says how to get it and starts the node."""
    import logging

    from ament_index_python.packages import get_package_prefix, PackageNotFoundError

    with pytest.raises((PackageNotFoundError, OSError)):
        get_package_prefix("rviz2")  # not on PyPI, so never in this venv
    launched, records = _launched_with_warnings(namespace="front_camera", rviz="true")
    assert launched.rviz is None and launched.node is not None
    assert [r.levelno for r in records] == [logging.WARNING], records
    assert "rviz2 is not installed" in records[0].getMessage() and "apt install ros-" in records[0].getMessage()


def test_the_shipped_rviz_config_is_the_node_without_namespace():
    """
    The shipped RViz config is the node's without a namespace.

    ``rviz2 -d rviz/m2sa_perception.rviz`` works as it is for the default node, and the
    launch file finds in it exactly the displays it moves under a namespace.
    """
    template = yaml.safe_load(RVIZ_TEMPLATE.read_text())
    assert sorted(_view_topics(template).values()) == ["/markers", "/overlay", "/target_points"]
    assert _launch_module().rviz_config(template, "", [], "camera_color_optical_frame") == template


def test_target_frame_tf_timeout_and_max_image_age_reach_the_node(ros_context):
    launched = Launched(target_frame="base_link", tf_timeout="0.25", max_image_age="2", autostart="false")
    node = launched.start(ros_context, BoxSegmenter())
    try:
        held = {name: node.get_parameter(name).value for name in ("target_frame", "tf_timeout", "max_image_age")}
        assert held == {"target_frame": "base_link", "tf_timeout": 0.25, "max_image_age": 2.0}
        assert isinstance(held["max_image_age"], float)  # "2" is the double the parameter is declared as
    finally:
        node.destroy_node()
    # Empty (the default): the parameters file's values, untouched.
    assert not {"target_frame", "tf_timeout", "max_image_age"} & set(Launched().parameter_files()[1][
        "/perception_node"]["ros__parameters"])


def _undeclared_warnings(argv: list[str], **arguments: str) -> list[str]:
    """Return the launch file's warnings for a command line of ``argv``."""
    return [r.getMessage() for r in _launched_with_warnings(argv, **arguments)[1]]


def test_an_undeclared_launch_argument_is_one_warning_naming_the_nearest_declared_one():
    said = _undeclared_warnings(["namespace:=front", "target_fame:=base_link", "colour:=red"], namespace="front")
    assert len(said) == 2, said
    assert said[0].startswith("launch argument 'target_fame' is not one of perception.launch.py's")
    assert "did you mean 'target_frame'?" in said[0] and "--show-args" in said[0]
    assert "colour" in said[1] and "did you mean" not in said[1]
    assert _undeclared_warnings(["namespace:=front", "max_image_age:=1.0"], namespace="front",
                                max_image_age="1.0") == []


def _documented_launch_lines() -> list[tuple[str, dict[str, str]]]:
    """
    Every ``ros2 launch m2sa_ros perception.launch.py`` line of the README and docs/, with its arguments.

    A line continued with a backslash is read whole; a comment after ``#`` is not part of it.
    """
    import re
    import shlex

    found = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        lines = doc.read_text().splitlines()
        for number, line in enumerate(lines, 1):
            following = number
            while line.endswith("\\") and following < len(lines):  # a command continued on the next line
                line, following = line[:-1] + " " + lines[following], following + 1
            start = line.find("ros2 launch m2sa_ros perception.launch.py")
            if start < 0:
                continue
            words = shlex.split(line[start:].split("#", 1)[0].split("`", 1)[0])[4:]
            arguments = dict(word.split(":=", 1) for word in words if re.fullmatch(r"[a-z_]+:=.*", word))
            if arguments:
                found.append((f"{doc.name}:{number}", arguments))
    return found


# Arguments that act in the launch, not in the node's parameters or names.
LAUNCH_ONLY = {"respawn", "respawn_delay", "rviz", "rviz_fixed_frame", "log_level", "params_file", "node_name"}


def test_every_launch_argument_the_docs_show_reaches_the_node(ros_context):
    """
    Each ``name:=value`` the docs write after ``ros2 launch``, given to the launch, is what the node holds.

    A name the launch file does not declare fails here, where ros2 launch would drop it
    without a word. Parameters are read from the node; topics from its remappings.
    """
    from m2sa_ros.params.node_params import PARAMETERS

    lines = _documented_launch_lines()
    assert any("target_frame" in arguments for _, arguments in lines), "the docs show target_frame:= with launch"
    declared = {name for name, _, _ in _launch_module().ARGUMENTS}
    parameters = {spec.name: spec for spec in PARAMETERS}
    topics = {"image_topic": "image", "command_topic": "command", "command_stamped_topic": "command_stamped",
              "depth_topic": "depth", "camera_info_topic": "camera_info"}
    for where, arguments in lines:
        assert set(arguments) <= declared, f"{where}: {sorted(set(arguments) - declared)} not declared"
        launched = Launched(**{"autostart": "false", **arguments})
        node = launched.start(ros_context, BoxSegmenter())
        try:
            for name, value in arguments.items():
                if name in parameters and name != "cameras":
                    spec = parameters[name]
                    kind = type(spec.default)
                    expected = value.lower() == "true" if kind is bool else kind(value)
                    assert node.get_parameter(name).value == expected, (where, name)
                elif name == "cameras":
                    assert list(node.get_parameter("cameras").value) == launched.cameras_of(value), where
                elif name == "namespace":
                    assert node.get_namespace() == "/" + value.strip("/"), where
                elif name in topics:
                    prefixes = [f"{c}/" for c in launched.cameras_of(arguments.get("cameras", ""))] or [""]
                    for prefix in prefixes:
                        resolved = node.resolve_topic_name(f"{prefix}{topics[name]}")
                        if value.startswith("/"):
                            assert resolved == value, (where, name, resolved)
                        else:  # relative: under the node's namespace (and the camera's)
                            assert resolved.endswith("/" + value), (where, name, resolved)
                else:  # the launch's own (respawn, rviz, ...): checked by the tests above
                    assert name in LAUNCH_ONLY, f"{where}: nothing here checks {name}:= in the node"
        finally:
            node.destroy_node()


def test_camera_info_follows_the_image_topic_and_its_reliability_argument_with_it(ros_context):
    """image_topic:= moves camera_info beside the image (image_transport's way), camera_info_reliability:= with it."""
    from lifecycle_msgs.msg import State
    from rclpy.qos import ReliabilityPolicy

    launched = Launched(image_topic="/camera/color/image_raw", camera_info_reliability="reliable", autostart="false")
    node = launched.start(ros_context, BoxSegmenter())
    try:
        node.trigger_configure()
        node.trigger_activate()
        assert node._state_machine.current_state[0] == State.PRIMARY_STATE_ACTIVE
        reliability = {sub.topic_name: sub.qos_profile.reliability for sub in node.subscriptions}
        assert reliability["/camera/color/camera_info"] == ReliabilityPolicy.RELIABLE, sorted(reliability)
        assert reliability["/camera/color/image_raw"] == ReliabilityPolicy.BEST_EFFORT
        assert "/camera_info" not in reliability
    finally:
        node.close()
