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

r"""
Launch the M2SA perception node for one camera, or for several with one model.

    ros2 launch m2sa_ros perception.launch.py image_topic:=/camera/color/image_raw \
        command_topic:=/robot/command namespace:=front_camera device:=cuda

    # One node, one model, two cameras: head/image, head/result, head/segment, wrist/...
    ros2 launch m2sa_ros perception.launch.py cameras:="[head, wrist]" image_topic:=color/image_raw

    # For a lifecycle manager (Nav2's): the node waits unconfigured; restarted if it dies.
    ros2 launch m2sa_ros perception.launch.py autostart:=false respawn:=true

    # With RViz on the node's overlay, markers and target points, under the namespace.
    ros2 launch m2sa_ros perception.launch.py namespace:=front_camera rviz:=true

With ``cameras`` the topic arguments are relative names applied under every camera
(``image_topic:=color/image_raw`` remaps ``head/image`` to ``head/color/image_raw``).

Arguments left empty keep the parameters file's values, so `params_file` is the one
place for everything else. Without a ROS installation (launch / launch_ros are not on
PyPI) the same node runs as

    m2sa-perception --ros-args --params-file config/perception.yaml \\
        -r image:=/camera/color/image_raw -r command:=/robot/command

``rviz:=true`` writes an RViz config for this launch (rviz/m2sa_perception.rviz with the
namespace and cameras applied to its topics, and the fixed frame set) and opens rviz2
with it; the shipped file itself has the topics of a node without namespace. Where rviz2
is not installed (a headless robot), it says so in one warning and starts the node alone.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
import tempfile

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import LifecycleNode, Node

PACKAGE = "m2sa_ros"
RVIZ_TEMPLATE = "m2sa_perception.rviz"
LOG_LEVELS = ("debug", "info", "warn", "error", "fatal")
RELIABILITIES = ("best_effort", "reliable")  # m2sa_ros.params.node_params.RELIABILITIES
# The node's outputs the RViz config shows, relative to the node's (and camera's) namespace.
VIEW_TOPICS = ("overlay", "markers", "target_points")
DEFAULT_FIXED_FRAME = "camera_color_optical_frame"

# (name, default, description); an empty default means "use the parameters file".
ARGUMENTS = (
    ("model_path", "", "Checkpoint directory; empty: the parameters file's (by default the shipped model)"),
    ("preset", "", "Model preset (tiny, tiny-authors, 7b, 13b) with random weights, when no model_path"),
    ("device", "", "Torch device (cpu, cuda, cuda:N, mps, xpu, xpu:N); empty: the parameters file's"),
    ("image_topic", "image", "sensor_msgs/Image topic of the colour camera"),
    ("command_topic", "command", "std_msgs/String topic of the language commands"),
    ("command_stamped_topic", "command_stamped", "m2sa_ros/Command topic: commands with request ids"),
    ("depth_topic", "depth", "Depth image registered to the colour camera (16UC1 mm / 32FC1 m)"),
    ("camera_info_topic", "camera_info", "sensor_msgs/CameraInfo of the colour camera"),
    ("namespace", "", "Namespace of the node and its topics"),
    ("cameras", "", 'Camera names served by one node and one model, e.g. "[head, wrist]"; '
                    "empty: the parameters file's (one camera)"),
    ("use_sim_time", "false", "true: run on /clock (bag replay, simulation)"),
    ("node_name", "perception_node", "Name of the node"),
    ("params_file", "", "Parameters YAML; empty: share/m2sa_ros/config/perception.yaml"),
    ("log_level", "info", "Log level of the node: debug, info, warn, error or fatal"),
    ("use_compressed", "", "true: subscribe to <image_topic>/compressed (sensor_msgs/CompressedImage) "
                           "instead of the raw image; empty: the parameters file's"),
    ("use_compressed_depth", "", "true: subscribe to <depth_topic>/compressedDepth (image_transport's "
                                 "compressedDepth) instead of the raw depth; empty: the parameters file's"),
    ("image_reliability", "", "best_effort or reliable: the image, depth and camera_info subscriptions; "
                              "empty: the parameters file's"),
    ("depth_reliability", "", "best_effort or reliable for the depth subscription alone "
                              "(its qos_overrides parameter); empty: image_reliability's"),
    ("camera_info_reliability", "", "best_effort or reliable for the camera_info subscription alone "
                                    "(its qos_overrides parameter); empty: image_reliability's"),
    ("autostart", "", "true: configure and activate at start-up; false: wait unconfigured for "
                      "lifecycle transitions (a lifecycle manager); empty: the parameters file's"),
    ("target_frame", "", "Frame of the targets' 3-D values, e.g. base_link or odom (tf2 at the image's stamp); "
                         "empty: the parameters file's (by default the camera's optical frame)"),
    ("tf_timeout", "", "Longest wait (s) for target_frame's transform at an image's stamp; "
                       "empty: the parameters file's"),
    ("max_image_age", "", "Refuse a command whose newest image is older than this many seconds (0: any age); "
                          "empty: the parameters file's"),
    ("respawn", "false", "true: start the node again whenever its process exits"),
    ("respawn_delay", "2.0", "Seconds to wait before a respawn"),
    ("rviz", "false", "true: also open RViz on the node's overlay, markers and target points"),
    ("rviz_fixed_frame", "", "RViz's fixed frame; empty: the node's target_frame when the parameters "
                             "set one, else " + DEFAULT_FIXED_FRAME),
)


def _share_file(*parts: str) -> str:
    """
    Return a file of the package beside this launch file.

    Share/m2sa_ros/ when installed, the repository in a checkout (so a test reads the
    files it is about, not an old install).
    """
    return str(Path(__file__).resolve().parents[1].joinpath(*parts))


def _flag(name: str, text: str, empty: bool | None = None) -> bool | None:
    """Return a true/false argument; ``empty`` is what an empty value means (None: keep the file's)."""
    value = text.strip().lower()
    if not value:
        return empty
    if value not in ("true", "false"):
        raise ValueError(f"{name} must be true or false, got '{text}'")
    return value == "true"


def _choice(name: str, text: str, options: tuple[str, ...]) -> str:
    value = text.strip().lower()
    if value and value not in options:
        raise ValueError(f"{name} must be one of {', '.join(options)}, got '{text}'")
    return value


def _seconds(name: str, text: str, most: float) -> float | None:
    """Parse a number of seconds in [0, most] ("0.5"); None for an empty argument (the file's value)."""
    if not text.strip():
        return None
    try:
        seconds = float(text)
    except ValueError:
        raise ValueError(f"{name} must be a number of seconds, got '{text}'") from None
    if not 0.0 <= seconds <= most:
        raise ValueError(f"{name} must be between 0 and {most:g} seconds, got '{text}'")
    return seconds


def _camera_list(text: str) -> list[str]:
    """Parse "[head, wrist]" (YAML) or "head,wrist" into ["head", "wrist"]; "" into []."""
    import yaml

    text = text.strip()
    if not text:
        return []
    names = yaml.safe_load(text) if text.startswith("[") else [n.strip() for n in text.split(",")]
    if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
        raise ValueError(f"cameras must be a list of names like \"[head, wrist]\", got '{text}'")
    return names


def _topics(value: dict) -> list[tuple[str, str]]:
    """Return (the node's relative name, the argument's target) of every input topic argument."""
    image_topic = value["image_topic"]
    return [
        ("image", image_topic),
        # image_transport convention: the compressed stream is <image_topic>/compressed.
        ("image/compressed", image_topic.rstrip("/") + "/compressed"),
        ("command", value["command_topic"]),
        ("command_stamped", value["command_stamped_topic"]),
        ("depth", value["depth_topic"]),
        # image_transport convention: the compressedDepth stream is <depth_topic>/compressedDepth.
        ("depth/compressedDepth", value["depth_topic"].rstrip("/") + "/compressedDepth"),
        ("camera_info", _camera_info_target(value["camera_info_topic"], image_topic)),
    ]


def _camera_info_target(camera_info_topic: str, image_topic: str) -> str:
    """
    Return camera_info_topic, or by default the image topic's sibling ``camera_info``.

    The node reads camera_info from beside its image, as image_transport's CameraSubscriber
    does (m2sa_ros/cameras/transport_names.py); remapping it there by name keeps the per-topic
    reliability argument on the topic the node reads.
    """
    if camera_info_topic != "camera_info":
        return camera_info_topic
    parent = image_topic.rstrip("/").rpartition("/")[0]
    return f"{parent}/camera_info" if parent or image_topic.startswith("/") else "camera_info"


def _remappings(value: dict, cameras: list[str]) -> list[tuple[str, str]]:
    """Return the topic arguments as remappings: of the single camera's names, or under every camera."""
    topics = _topics(value)
    if not cameras:
        return topics
    absolute = [target for _, target in topics if target.startswith("/")]
    if absolute:
        raise ValueError(f"with cameras, topic arguments must be relative names (applied under each "
                         f"camera), got {absolute[0]}")
    return [(f"{camera}/{name}", f"{camera}/{target}") for camera in cameras for name, target in topics]


def absolute_name(namespace: str, *names: str) -> str:
    """
    Return a relative ROS name (``head/depth``) under ``namespace`` as the node resolves it.

    An absolute one (``/camera/depth``) as it is.
    """
    parts = [p.strip("/") for p in names if p.strip("/")]
    if names and names[-1].startswith("/"):
        return "/" + names[-1].strip("/")
    return "/" + "/".join([p for p in namespace.strip("/").split("/") if p] + parts)


def reliability_overrides(value: dict, cameras: list[str], compressed_depth: bool = False) -> dict[str, str]:
    """
    ``qos_overrides.<topic>.subscription.reliability`` for the per-topic reliability arguments.

    rclpy names a subscription's QoS parameters after its fully qualified topic after
    remapping, so the name is built from the namespace, the camera and the argument's
    target exactly as the node will resolve it; with ``compressed_depth`` the depth
    subscription is the compressedDepth one.
    """
    overrides = {}
    targets = dict(_topics(value))
    depth = "depth/compressedDepth" if compressed_depth else "depth"
    for argument, topic in (("depth_reliability", depth), ("camera_info_reliability", "camera_info")):
        reliability = _choice(argument, value[argument], RELIABILITIES)
        if not reliability:
            continue
        for camera in cameras or [""]:
            where = (camera, targets[topic]) if camera else (targets[topic],)
            overrides[f"qos_overrides.{absolute_name(value['namespace'], *where)}.subscription.reliability"] = \
                reliability
    return overrides


def node_overrides(value: dict, cameras: list[str]) -> dict:
    """Return the parameters the arguments set over the parameters file (an empty argument sets none)."""
    overrides: dict = {key: value[key] for key in ("model_path", "preset", "device") if value[key]}
    overrides["use_sim_time"] = _flag("use_sim_time", value["use_sim_time"], empty=False)
    for name in ("use_compressed", "use_compressed_depth", "autostart"):
        flag = _flag(name, value[name])
        if flag is not None:
            overrides[name] = flag
    image_reliability = _choice("image_reliability", value["image_reliability"], RELIABILITIES)
    if image_reliability:
        overrides["image_reliability"] = image_reliability
    if cameras:
        overrides["cameras"] = cameras
    if value["target_frame"].strip():
        overrides["target_frame"] = value["target_frame"].strip()
    for name, most in (("tf_timeout", 10.0), ("max_image_age", 3600.0)):  # node_params.py's ranges
        seconds = _seconds(name, value[name], most)
        if seconds is not None:
            overrides[name] = seconds
    overrides.update(reliability_overrides(value, cameras, overrides.get("use_compressed_depth") is True))
    return overrides


def _file_parameter(params_file: str, name: str, node_name: str) -> object:
    """``name`` as the parameters file gives it to the node ("/**" or the node's own entry)."""
    import yaml

    with open(params_file, encoding="utf-8") as f:
        data = yaml.safe_load(f) or {}
    value = None
    for key, entry in data.items():
        params = (entry or {}).get("ros__parameters", {}) if isinstance(entry, dict) else {}
        if name in params and (key == "/**" or key.strip("/").endswith(node_name)):
            value = params[name]
    return value


def rviz_config(template: dict, namespace: str, cameras: list[str], fixed_frame: str) -> dict:
    """
    Return the RViz config of this launch.

    The template's view displays on the node's topics (once per camera), the other
    displays as they are, and the fixed frame.
    """
    config = copy.deepcopy(template)
    manager = config["Visualization Manager"]
    displays = []
    views = []
    for display in manager["Displays"]:
        topic = str((display.get("Topic") or {}).get("Value", "")).strip("/")
        (views if topic in VIEW_TOPICS else displays).append((display, topic))
    displays = [display for display, _ in displays]
    for camera in cameras or [""]:
        for display, topic in views:
            shown = copy.deepcopy(display)
            shown["Topic"]["Value"] = absolute_name(namespace, camera, topic)
            if camera:
                shown["Name"] = f"{camera}: {display['Name']}"
            displays.append(shown)
    manager["Displays"] = displays
    manager["Global Options"]["Fixed Frame"] = fixed_frame
    return config


def _rviz(value: dict, cameras: list[str], params_file: str, overrides: dict) -> Node:
    import yaml

    fixed_frame = value["rviz_fixed_frame"].strip()
    if not fixed_frame:
        target_frame = overrides.get("target_frame", _file_parameter(params_file, "target_frame", value["node_name"]))
        fixed_frame = target_frame if isinstance(target_frame, str) and target_frame else DEFAULT_FIXED_FRAME
    with open(_share_file("rviz", RVIZ_TEMPLATE), encoding="utf-8") as f:
        template = yaml.safe_load(f)
    config = rviz_config(template, value["namespace"], cameras, fixed_frame)
    with tempfile.NamedTemporaryFile("w", prefix="m2sa_perception_", suffix=".rviz", delete=False) as f:
        yaml.safe_dump(config, f, sort_keys=False)
    return Node(package="rviz2", executable="rviz2", name="rviz2", namespace=value["namespace"],
                arguments=["-d", f.name], output="screen")


def _warn_undeclared(context) -> None:
    """
    One warning per ``name:=value`` of the command line that this file does not declare.

    ros2 launch keeps such an argument without a word, so a typo (``target_fame:=base_link``)
    would leave the node on its default unnoticed. The warning names the nearest declared
    argument, as the node does for an unknown parameter. An argument meant for a launch
    file that includes this one is named too, and can be ignored.
    """
    import difflib

    declared = [name for name, _, _ in ARGUMENTS]
    for arg in getattr(context, "argv", None) or []:
        name = arg.split(":=", 1)[0].strip()
        if ":=" not in arg or name in declared:
            continue
        nearest = difflib.get_close_matches(name, declared, n=1)
        hint = f"; did you mean '{nearest[0]}'?" if nearest else ""
        _warn(f"launch argument '{name}' is not one of perception.launch.py's and does nothing here"
              f"{hint} (ros2 launch m2sa_ros perception.launch.py --show-args lists them)")


def _node(context, *_args, **_kwargs):
    _warn_undeclared(context)
    value = {name: LaunchConfiguration(name).perform(context) for name, _, _ in ARGUMENTS}
    params_file = value["params_file"] or _share_file("config", "perception.yaml")
    cameras = _camera_list(value["cameras"])
    if _flag("use_compressed_depth", value["use_compressed_depth"]) is None \
            and _file_parameter(params_file, "use_compressed_depth", value["node_name"]) is True:
        value["use_compressed_depth"] = "true"  # the file's choice: the reliability override follows it
    overrides = node_overrides(value, cameras)
    log_level = _choice("log_level", value["log_level"], LOG_LEVELS) or "info"
    try:
        respawn_delay = float(value["respawn_delay"])
    except ValueError:
        raise ValueError(f"respawn_delay must be a number of seconds, got '{value['respawn_delay']}'") from None
    if respawn_delay < 0:
        raise ValueError(f"respawn_delay must be >= 0, got '{value['respawn_delay']}'")
    actions = [LifecycleNode(
        package=PACKAGE,
        executable="perception_node",
        name=value["node_name"],
        namespace=value["namespace"],
        output="screen",
        parameters=[params_file, overrides],
        remappings=_remappings(value, cameras),
        ros_arguments=["--log-level", log_level],
        respawn=_flag("respawn", value["respawn"], empty=False),
        respawn_delay=respawn_delay,
    )]
    if _flag("rviz", value["rviz"], empty=False):
        if _installed("rviz2"):
            actions.append(_rviz(value, cameras, params_file, overrides))
        else:
            # rviz2 is a GUI a headless robot need not have, so package.xml does not declare it.
            distro = os.environ.get("ROS_DISTRO", "<distro>")
            _warn(f"rviz:=true, but rviz2 is not installed here (sudo apt install ros-{distro}-rviz2): "
                  "the node starts without RViz")
    return actions


def _warn(message: str) -> None:
    """Log one warning as launch prints its own (the screen and launch's log file)."""
    import launch.logging

    launch.logging.get_logger("perception.launch").warning(message)


def _installed(package: str) -> bool:
    """Say whether the ament index (AMENT_PREFIX_PATH) has ``package``, as ``ros2 run`` would find it."""
    from ament_index_python.packages import get_package_prefix, PackageNotFoundError

    try:
        get_package_prefix(package)
    except (PackageNotFoundError, OSError):  # OSError: no AMENT_PREFIX_PATH at all
        return False
    return True


def generate_launch_description() -> LaunchDescription:
    return LaunchDescription(
        [DeclareLaunchArgument(name, default_value=default, description=description)
         for name, default, description in ARGUMENTS]
        + [OpaqueFunction(function=_node)]
    )
