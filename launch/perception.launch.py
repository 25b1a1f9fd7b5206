"""Launch the M2SA perception node for one camera, or for several with one model.

    ros2 launch m2sa_ros perception.launch.py image_topic:=/camera/color/image_raw \\
        command_topic:=/robot/command namespace:=front_camera device:=cuda

    # One node, one model, two cameras: head/image, head/result, head/segment, wrist/...
    ros2 launch m2sa_ros perception.launch.py cameras:="[head, wrist]" image_topic:=color/image_raw

With ``cameras`` the topic arguments are relative names applied under every camera
(``image_topic:=color/image_raw`` remaps ``head/image`` to ``head/color/image_raw``).

Arguments left empty keep the parameters file's values, so `params_file` is the one
place for everything else. Without a ROS installation (launch / launch_ros are not on
PyPI) the same node runs as

    m2sa-perception --ros-args --params-file config/perception.yaml \\
        -r image:=/camera/color/image_raw -r command:=/robot/command
"""

from __future__ import annotations

import os

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import LifecycleNode

PACKAGE = "m2sa_ros"

# (name, default, description); an empty default means "use the parameters file".
ARGUMENTS = (
    ("model_path", "", "Checkpoint directory; empty: the shipped models/m2sa-tiny-synth"),
    ("preset", "", "Model preset (tiny, 7b, 13b) with random weights, when no model_path"),
    ("device", "", "Torch device (cpu, cuda, cuda:N); empty: the parameters file's"),
    ("image_topic", "image", "sensor_msgs/Image topic of the colour camera"),
    ("command_topic", "command", "std_msgs/String topic of the language commands"),
    ("command_stamped_topic", "command_stamped", "m2sa_ros/Command topic: commands with request ids"),
    ("depth_topic", "depth", "Depth image registered to the colour camera (16UC1 mm / 32FC1 m)"),
    ("camera_info_topic", "camera_info", "sensor_msgs/CameraInfo of the colour camera"),
    ("namespace", "", "Namespace of the node and its topics"),
    ("cameras", "", "Camera names served by one node and one model, e.g. \"[head, wrist]\"; "
                    "empty: the parameters file's (one camera)"),
    ("use_sim_time", "false", "true: run on /clock (bag replay, simulation)"),
    ("node_name", "perception_node", "Name of the node"),
    ("params_file", "", "Parameters YAML; empty: share/m2sa_ros/config/perception.yaml"),
)


def _default_params_file() -> str:
    from ament_index_python.packages import get_package_share_directory

    return os.path.join(get_package_share_directory(PACKAGE), "config", "perception.yaml")


def _camera_list(text: str) -> list[str]:
    """ "[head, wrist]" (YAML) or "head,wrist" -> ["head", "wrist"]; "" -> []."""
    import yaml

    text = text.strip()
    if not text:
        return []
    names = yaml.safe_load(text) if text.startswith("[") else [n.strip() for n in text.split(",")]
    if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
        raise ValueError(f"cameras must be a list of names like \"[head, wrist]\", got '{text}'")
    return names


def _remappings(value: dict, cameras: list[str]) -> list[tuple[str, str]]:
    """The topic arguments as remappings: of the single camera's names, or under every camera."""
    image_topic = value["image_topic"]
    topics = [
        ("image", image_topic),
        # image_transport convention: the compressed stream is <image_topic>/compressed.
        ("image/compressed", image_topic.rstrip("/") + "/compressed"),
        ("command", value["command_topic"]),
        ("command_stamped", value["command_stamped_topic"]),
        ("depth", value["depth_topic"]),
        ("camera_info", value["camera_info_topic"]),
    ]
    if not cameras:
        return topics
    absolute = [target for _, target in topics if target.startswith("/")]
    if absolute:
        raise ValueError(f"with cameras, topic arguments must be relative names (applied under each "
                         f"camera), got {absolute[0]}")
    return [(f"{camera}/{name}", f"{camera}/{target}") for camera in cameras for name, target in topics]


def _node(context, *_args, **_kwargs):
    value = {name: LaunchConfiguration(name).perform(context) for name, _, _ in ARGUMENTS}
    params_file = value["params_file"] or _default_params_file()
    overrides: dict = {key: value[key] for key in ("model_path", "preset", "device") if value[key]}
    use_sim_time = value["use_sim_time"].strip().lower()
    if use_sim_time not in ("true", "false"):
        raise ValueError(f"use_sim_time must be true or false, got '{value['use_sim_time']}'")
    overrides["use_sim_time"] = use_sim_time == "true"
    cameras = _camera_list(value["cameras"])
    if cameras:
        overrides["cameras"] = cameras
    return [LifecycleNode(
        package=PACKAGE,
        executable="perception_node",
        name=value["node_name"],
        namespace=value["namespace"],
        output="screen",
        parameters=[params_file, overrides],
        remappings=_remappings(value, cameras),
    )]


def generate_launch_description() -> LaunchDescription:
    return LaunchDescription(
        [DeclareLaunchArgument(name, default_value=default, description=description)
         for name, default, description in ARGUMENTS]
        + [OpaqueFunction(function=_node)]
    )
