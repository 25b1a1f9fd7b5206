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
QoS per topic through rclpy's QoS overriding options, read back from the graph.

Every subscription and publisher of the node has ``qos_overrides.<topic>.<entity>.<policy>``
parameters (history, depth, reliability), listed by the node's own list_parameters service
as ``ros2 param list`` shows them; an override given with ``--ros-args -p`` changes that
one topic's QoS (read from the DDS graph: ``get_subscriptions_info_by_topic``), while
``image_reliability`` stays the default of the image, depth and camera_info. Re-activating
and re-configuring keep the overrides; a bad one fails configure in one line.
"""

from __future__ import annotations

from fake_models import BoxSegmenter
from node_harness import wait_until
import pytest

pytestmark = [pytest.mark.ros, pytest.mark.integration]

# Entities rclpy and the libraries create with their own QoS, which must match their peers':
# parameter events and rosout (rclpy), the lifecycle manager's bond (bondpy), tf (tf2_ros).
BUILTIN = {"/parameter_events", "/rosout", "/bond", "/tf", "/tf_static"}


@pytest.fixture
def rig(ros_context):
    """make(*ros_args, **params) -> an active node with those --ros-args, and a client node; both spun."""
    import threading

    from m2sa_ros.rclpy_support.executor_spin import spin_through_destroyed_entities
    from m2sa_ros.perception_node import PerceptionNode
    from rclpy.executors import MultiThreadedExecutor
    from rclpy.node import Node
    from rclpy.parameter import Parameter

    made: list = []
    client = Node("qos_probe", context=ros_context)
    executor = MultiThreadedExecutor(num_threads=4, context=ros_context)
    executor.add_node(client)
    thread = threading.Thread(target=spin_through_destroyed_entities, args=(executor,), daemon=True)
    thread.start()

    def make(*ros_args: str, start: bool = True, **params):
        from rclpy.lifecycle import TransitionCallbackReturn

        params = {"autostart": False, **params}
        node = PerceptionNode(context=ros_context, segmenter_factory=lambda _p, _s: BoxSegmenter(),
                              cli_args=["--ros-args", *ros_args] if ros_args else None,
                              parameter_overrides=[Parameter(k, value=v) for k, v in params.items()])
        made.append(node)
        executor.add_node(node)
        if start:
            assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
            assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
        return node, client

    try:
        yield make
    finally:
        executor.shutdown()
        for node in made:
            node.close()
        client.destroy_node()
        thread.join(10)


def _graph_reliability(client, topic: str, entity: str = "subscription"):
    """Return the reliability the DDS graph reports for the perception node's ``entity`` on ``topic``."""
    def found():
        infos = (client.get_subscriptions_info_by_topic(topic) if entity == "subscription"
                 else client.get_publishers_info_by_topic(topic))
        ours = [i for i in infos if i.node_name == "perception_node"]
        return ours[0].qos_profile.reliability if ours else None

    return wait_until(found, 10, f"{topic}'s {entity} in the graph")


def _listed(client, node_name: str = "/perception_node") -> list[str]:
    """Return the node's parameter names through its list_parameters service (what `ros2 param list` calls)."""
    from rcl_interfaces.srv import ListParameters

    cli = client.create_client(ListParameters, f"{node_name}/list_parameters")
    assert cli.wait_for_service(10)
    future = cli.call_async(ListParameters.Request())
    wait_until(future.done, 10, "list_parameters")
    client.destroy_client(cli)
    return list(future.result().result.names)


def test_every_subscription_and_publisher_has_its_qos_parameters_with_its_actual_qos(rig):
    from m2sa_ros.params.topic_qos import POLICIES, policy_value

    node, client = rig()
    listed = _listed(client)
    entities = [(s.topic_name, "subscription", s.qos_profile) for s in node.subscriptions] + \
               [(p.topic_name, "publisher", p.qos_profile) for p in node.publishers]
    ours = [(t, e, q) for t, e, q in entities if t not in BUILTIN]
    topics = {t for t, _, _ in ours}
    assert {"/image", "/depth", "/camera_info", "/command", "/command_stamped", "/result", "/overlay", "/markers",
            "/target_points", "/diagnostics"} <= topics, topics
    for topic, entity, qos in ours:
        for policy in POLICIES:
            name = f"qos_overrides.{topic}.{entity}.{policy}"
            assert name in listed, f"{name} missing from the node's parameters"
            assert node.get_parameter(name).value == policy_value(qos, policy), name
            assert node.describe_parameter(name).read_only, name
    assert len(listed) == len(set(listed))
    # The defaults: sensors best effort (image_reliability), commands and outputs reliable.
    values = {n: node.get_parameter(n).value for n in listed if n.startswith("qos_overrides.")}
    assert values["qos_overrides./image.subscription.reliability"] == "best_effort"
    assert values["qos_overrides./image.subscription.depth"] == 1
    assert values["qos_overrides./depth.subscription.depth"] == 5
    assert values["qos_overrides./command.subscription.depth"] == 100
    assert values["qos_overrides./result.publisher.reliability"] == "reliable"
    from rclpy.qos import ReliabilityPolicy

    assert _graph_reliability(client, "/image") == ReliabilityPolicy.BEST_EFFORT
    assert _graph_reliability(client, "/result", "publisher") == ReliabilityPolicy.RELIABLE


def test_an_override_given_with_ros_args_takes_effect_on_that_topic_alone(rig):
    from rclpy.qos import ReliabilityPolicy

    node, client = rig("-p", "qos_overrides./image.subscription.reliability:=reliable",
                       "-p", "qos_overrides./result.publisher.depth:=50")
    assert _graph_reliability(client, "/image") == ReliabilityPolicy.RELIABLE
    assert _graph_reliability(client, "/depth") == ReliabilityPolicy.BEST_EFFORT  # image_reliability's default
    assert _graph_reliability(client, "/camera_info") == ReliabilityPolicy.BEST_EFFORT
    assert node.get_parameter("qos_overrides./image.subscription.reliability").value == "reliable"
    image_sub = next(s for s in node.subscriptions if s.topic_name == "/image")
    assert image_sub.qos_profile.reliability == ReliabilityPolicy.RELIABLE and image_sub.qos_profile.depth == 1
    assert node.camera().outputs.result.qos_profile.depth == 50
    # One topic's override does not leak into the others created from the same defaults.
    assert node.camera().outputs.markers.qos_profile.depth == 10


def test_depth_reliable_while_the_image_stays_best_effort(rig):
    """The issue's case: a depth that must not be dropped, an image where the newest frame is all."""
    from rclpy.qos import ReliabilityPolicy

    node, client = rig("-p", "qos_overrides./depth.subscription.reliability:=reliable")
    assert _graph_reliability(client, "/depth") == ReliabilityPolicy.RELIABLE
    assert _graph_reliability(client, "/image") == ReliabilityPolicy.BEST_EFFORT


def test_image_reliability_stays_the_default_of_image_depth_and_camera_info(rig):
    from rclpy.qos import ReliabilityPolicy

    node, client = rig(image_reliability="reliable")
    for topic in ("/image", "/depth", "/camera_info"):
        assert _graph_reliability(client, topic) == ReliabilityPolicy.RELIABLE, topic
        assert node.get_parameter(f"qos_overrides.{topic}.subscription.reliability").value == "reliable"


def test_reactivating_and_reconfiguring_keep_the_overrides_and_follow_a_changed_image_reliability(rig):
    from rclpy.lifecycle import TransitionCallbackReturn
    from rclpy.parameter import Parameter
    from rclpy.qos import ReliabilityPolicy

    node, client = rig("-p", "qos_overrides./depth.subscription.reliability:=reliable")
    before = _listed(client)
    # Subscriptions are created again at every activate, publishers at every configure.
    assert node.trigger_deactivate() == TransitionCallbackReturn.SUCCESS
    assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
    assert _listed(client) == before
    assert node.trigger_deactivate() == TransitionCallbackReturn.SUCCESS
    assert node.trigger_cleanup() == TransitionCallbackReturn.SUCCESS
    assert node.set_parameters([Parameter("image_reliability", value="reliable")])[0].successful
    assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
    assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
    after = _listed(client)
    assert sorted(after) == sorted(before) and len(after) == len(set(after))  # declared once each
    # Not given: it follows image_reliability. Given: it stays.
    assert node.get_parameter("qos_overrides./image.subscription.reliability").value == "reliable"
    assert _graph_reliability(client, "/image") == ReliabilityPolicy.RELIABLE
    assert node.get_parameter("qos_overrides./depth.subscription.reliability").value == "reliable"
    assert node.describe_parameter("qos_overrides./image.subscription.reliability").read_only
    # And back: a user-given override is never touched, the default follows again.
    assert node.trigger_deactivate() == TransitionCallbackReturn.SUCCESS
    assert node.trigger_cleanup() == TransitionCallbackReturn.SUCCESS
    assert node.set_parameters([Parameter("image_reliability", value="best_effort")])[0].successful
    assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
    assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
    assert _graph_reliability(client, "/camera_info") == ReliabilityPolicy.BEST_EFFORT
    depth_sub = next(s for s in node.subscriptions if s.topic_name == "/depth")
    assert depth_sub.qos_profile.reliability == ReliabilityPolicy.RELIABLE


def test_the_overrides_are_read_only_like_every_qos_override(rig):
    from rclpy.parameter import Parameter

    node, _ = rig()
    result = node.set_parameters([Parameter("qos_overrides./image.subscription.reliability", value="reliable")])[0]
    assert not result.successful


def test_a_bad_override_fails_configure_in_one_line_and_a_typo_is_named(rig, capfd):
    from rclpy.lifecycle import TransitionCallbackReturn

    node, _ = rig("-p", "qos_overrides./image.subscription.reliability:=sometimes",
                  "-p", "qos_overrides./depth.subscription.depth:=-3", start=False)
    assert node.trigger_configure() == TransitionCallbackReturn.FAILURE
    err = capfd.readouterr().err
    lines = [line for line in err.splitlines() if "invalid QoS overrides" in line]
    assert len(lines) == 1, err
    assert "qos_overrides./image.subscription.reliability='sometimes': must be one of" in lines[0]
    assert "qos_overrides./depth.subscription.depth=-3: must be an integer >= 0" in lines[0]
    assert "Traceback" not in err

    node, _ = rig("-p", "qos_overrides./imgae.subscription.reliability:=reliable", "-r", "__node:=typo_node")
    err = capfd.readouterr().err
    lines = [line for line in err.splitlines() if "QoS override(s) for no topic of this node" in line]
    assert len(lines) == 1 and "qos_overrides./imgae.subscription.reliability" in lines[0], err


def test_compressed_topics_are_covered_too(rig):
    from rclpy.qos import ReliabilityPolicy

    node, client = rig("-p", "qos_overrides./depth/compressedDepth.subscription.reliability:=reliable",
                       use_compressed=True, use_compressed_depth=True)
    assert _graph_reliability(client, "/depth/compressedDepth") == ReliabilityPolicy.RELIABLE
    assert _graph_reliability(client, "/image/compressed") == ReliabilityPolicy.BEST_EFFORT
    assert node.get_parameter("qos_overrides./image/compressed.subscription.depth").value == 1
