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
Lifecycle hygiene: memory handed back, services answering during a load, a clean exit.

Cleanup hands the model's memory back, a long model load blocks neither the lifecycle
services nor /diagnostics, and SIGINT (once or twice) or SIGTERM end the node with exit
status 0 after answering every pending command.
"""

from __future__ import annotations

import os
from pathlib import Path
import signal
import subprocess
import sys
import textwrap
import threading

from fake_models import BoxSegmenter
from node_harness import action_client, spinning, wait_until
import numpy as np
import pytest

pytestmark = [pytest.mark.ros, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
BIG_BYTES = 256 * 2**20


# A node process whose model never finishes on its own: each command "thinks" until it
# is cancelled, so commands are guaranteed to be pending when the signal arrives.
NODE_SCRIPT = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {tests!r})
    import m2sa_ros.perception_node as node_module
    from fake_models import BoxSegmenter
    from m2sa_core.types import Cancelled
    from m2sa_ros.main import main

    class Stuck(BoxSegmenter):
        def segment(self, image, command, **kwargs):
            print("THINKING", flush=True)
            while not kwargs["should_stop"]():
                time.sleep(0.01)
            raise Cancelled("stopped")

    node_module.load_segmenter = lambda params, source: Stuck()
    sys.exit(main(sys.argv))
""")


@pytest.mark.parametrize("signals", [[signal.SIGINT], [signal.SIGINT, signal.SIGINT], [signal.SIGTERM]],
                         ids=["sigint", "sigint-twice", "sigterm"])
def test_signals_end_the_node_with_exit_0_and_every_command_answered(tmp_path, signals, ros_context):
    from diagnostic_msgs.msg import DiagnosticArray
    from m2sa_ros.msg import Command, SegmentationResult
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import Image

    script = tmp_path / "node.py"
    script.write_text(NODE_SCRIPT.format(tests=str(ROOT / "tests")))
    ns = f"/sig_{os.getpid()}_{len(signals)}_{signal.Signals(signals[-1]).name.lower()}"
    proc = subprocess.Popen([sys.executable, str(script), "--ros-args", "-r", f"__ns:={ns}",
                             # the image and the commands travel on different topics: a command
                             # may overtake the image, so it waits for one
                             "-p", "wait_for_image:=30.0", "-p", "image_reliability:=reliable", "-p", "max_queue:=4",
                             "-p", "max_image_age:=0.0",
                             "-p", "diagnostics_period:=0.1"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT)
    probe = Node("signal_probe", context=ros_context)
    reliable = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
    results: list = []
    queue_depths: list[str] = []
    busy: list[str] = []
    probe.create_subscription(SegmentationResult, f"{ns}/result", results.append, reliable)

    def on_diagnostics(msg: DiagnosticArray) -> None:
        for status in msg.status:
            if status.name.startswith(ns + "/"):
                queue_depths.extend(kv.value for kv in status.values if kv.key == "queue_depth")
                busy.extend(kv.value for kv in status.values if kv.key == "busy")

    probe.create_subscription(DiagnosticArray, "/diagnostics", on_diagnostics, 10)
    images = probe.create_publisher(Image, f"{ns}/image", reliable)
    commands = probe.create_publisher(Command, f"{ns}/command_stamped", reliable)
    executor = SingleThreadedExecutor(context=ros_context)
    executor.add_node(probe)
    try:
        for _ in range(600):  # discovery: at most a minute
            if (images.get_subscription_count() and commands.get_subscription_count()
                    and probe.count_publishers(f"{ns}/result")):
                break
            executor.spin_once(timeout_sec=0.1)
            assert proc.poll() is None, proc.stdout.read()
        else:
            raise AssertionError("the node's topics never matched")
        from node_harness import good_image

        # A reliable, volatile reader drops what a writer sent before the reader itself
        # matched it, and the publisher's subscription count only says the writer side has
        # matched. So the first command is (re)sent until the node holds it (busy waiting for
        # the image below); once it does, both sides have matched and c1, c2 cannot be lost.
        # Each re-send is a command of its own ("c0", "c0.1", ...): on a loaded machine an
        # earlier copy may still arrive late, even once shutdown has begun, and every copy
        # must be answered exactly once.
        def node_holds_first() -> bool:
            busy.clear()
            for _ in range(100):  # ten diagnostics periods and more
                executor.spin_once(timeout_sec=0.1)
                assert proc.poll() is None
                if "True" in busy:
                    return True
            return False

        first_ids: list[str] = []
        for attempt in range(5):
            first_ids.append("c0" if attempt == 0 else f"c0.{attempt}")
            commands.publish(Command(request_id=first_ids[-1], text="what can I drink from?"))
            if node_holds_first():
                break
        else:
            raise AssertionError("the node never took command c0")
        for i in (1, 2):  # they queue behind c0, which waits (wait_for_image) for the image below
            commands.publish(Command(request_id=f"c{i}", text="what can I drink from?"))
        lines: list[str] = []
        thinking = threading.Event()

        def read_output() -> None:
            for line in proc.stdout:
                lines.append(line)
                if "THINKING" in line:
                    thinking.set()

        reader = threading.Thread(target=read_output, daemon=True)
        reader.start()
        frame = good_image(1)
        for _ in range(300):  # the keep-latest image, re-sent until the model starts on it
            images.publish(frame)
            if thinking.wait(0.2):
                break
        assert thinking.is_set(), "".join(lines)
        for _ in range(600):  # c1 and c2 wait in the queue behind the running c0
            if any(int(depth) >= 2 for depth in queue_depths):
                break
            executor.spin_once(timeout_sec=0.1)
            assert proc.poll() is None
        else:
            raise AssertionError(f"the node never queued both commands (queue depths {set(queue_depths)})")
        for signum in signals:
            proc.send_signal(signum)
        code = proc.wait(timeout=60)
        reader.join(10)
        out = "".join(lines)
        sent = sorted([*first_ids, "c1", "c2"])
        for _ in range(100):  # drain what is already on the wire
            executor.spin_once(timeout_sec=0.05)
            if len(results) >= len(sent):
                break
        assert code == 0, out
        assert sorted(r.request_id for r in results) == sent, out  # each command answered exactly once
        cancelled = [r for r in results if r.error.startswith("cancelled: node shutting down")]
        # The commands the node held when the signal came (c1, c2 and the copy of c0 it was
        # thinking on) are cancelled, naming the signal. A copy of c0 that reached the node
        # once shutdown had begun gets the same answer, or "node is not active" if it came
        # before the shutdown's first step.
        assert {"c1", "c2"} <= {r.request_id for r in cancelled}, [(r.request_id, r.error) for r in results]
        assert any(r.request_id in first_ids for r in cancelled), [(r.request_id, r.error) for r in results]
        late = [r for r in results if not r.error.startswith("cancelled: node shutting down")]
        assert all(r.request_id in first_ids and r.error.startswith("node is not active") for r in late), \
            [(r.request_id, r.error) for r in results]
        assert not any(r.success for r in results)
        assert all(signal.Signals(signals[0]).name in r.error for r in cancelled)
        assert "Traceback" not in out, out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        executor.shutdown()
        probe.destroy_node()


class HeavySegmenter(BoxSegmenter):
    """A model that holds 256 MiB (touched, so resident) and sits in a reference cycle."""

    def __init__(self) -> None:
        super().__init__()
        self.weights = np.ones(BIG_BYTES, dtype=np.uint8)
        self.me = self  # only a garbage collection frees it
        if _cuda():
            import torch

            self.gpu = torch.ones(BIG_BYTES // 4, dtype=torch.float32, device="cuda")


def _cuda() -> bool:
    torch = sys.modules.get("torch")
    return bool(torch is not None and torch.cuda.is_available())


def _rss() -> int:
    import psutil

    return psutil.Process().memory_info().rss


def test_cleanup_frees_the_model_memory(module_context):
    import gc

    from m2sa_ros.perception_node import PerceptionNode
    from rclpy.lifecycle import TransitionCallbackReturn
    from rclpy.parameter import Parameter

    gc.disable()  # only the node's own collection may free the cycle
    node = PerceptionNode(context=module_context, segmenter_factory=lambda _p, _s: HeavySegmenter(),
                          parameter_overrides=[Parameter("autostart", value=False)])
    try:
        before = _rss()
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        loaded = _rss()
        assert loaded - before > 0.9 * BIG_BYTES
        if _cuda():
            import torch

            reserved = torch.cuda.memory_reserved()
            assert reserved >= BIG_BYTES
        assert node.trigger_cleanup() == TransitionCallbackReturn.SUCCESS
        after = _rss()
        assert loaded - after > 0.9 * BIG_BYTES, (before, loaded, after)
        if _cuda():
            assert torch.cuda.memory_reserved() < reserved - BIG_BYTES // 2
    finally:
        gc.enable()
        node.destroy_node()


def test_model_loading_blocks_neither_lifecycle_services_nor_diagnostics(module_context):
    from diagnostic_msgs.msg import DiagnosticArray
    from lifecycle_msgs.srv import GetState
    from m2sa_ros.perception_node import PerceptionNode
    from rclpy.node import Node
    from rclpy.parameter import Parameter

    loading, release = threading.Event(), threading.Event()

    def slow_factory(_params, _source):
        loading.set()
        assert release.wait(60), "the test never released the load"
        return BoxSegmenter()

    node = PerceptionNode("slow_loader", context=module_context, segmenter_factory=slow_factory,
                          parameter_overrides=[Parameter("diagnostics_period", value=0.1)])
    client_node = Node("lifecycle_probe", context=module_context)
    statuses: list = []
    got = threading.Condition()

    def on_diag(msg: DiagnosticArray) -> None:
        with got:
            statuses.extend(s for s in msg.status if "slow_loader" in s.name)
            got.notify_all()

    client_node.create_subscription(DiagnosticArray, "/diagnostics", on_diag, 10)
    get_state = client_node.create_client(GetState, "/slow_loader/get_state")
    try:
        with spinning(module_context, node, client_node, threads=6):
            try:
                assert loading.wait(30), "autostart never began configuring"
                assert get_state.wait_for_service(timeout_sec=30)
                future = get_state.call_async(GetState.Request())
                done = threading.Event()
                future.add_done_callback(lambda _f: done.set())
                assert done.wait(30), "get_state blocked behind the model load"
                assert future.result().current_state.label == "configuring"
                with got:
                    assert got.wait_for(lambda: any(s.message.startswith("configuring") for s in statuses), 30)
                    status = next(s for s in statuses if s.message.startswith("configuring"))
                assert status.level == bytes([0])  # OK: loading is not an error
                release.set()
                with got:  # active: "ready", or the shipped tiny model's warning (the source it resolved)
                    assert got.wait_for(lambda: any(s.name.endswith(": m2sa perception") and {
                        kv.key: kv.value for kv in s.values}.get("state") == "active" for s in statuses), 30)
            finally:
                release.set()  # before the executor stops: autostart's configure waits for it
    finally:
        client_node.destroy_node()
        node.close()


def _waiting_box_node(ros_context, ns: str):
    """
    Return an unconfigured in-process node with the box model whose commands wait for a reliable image.

    The test drives its transitions itself (no autostart) and sends the image over DDS.
    """
    from m2sa_ros.perception_node import PerceptionNode
    from rclpy.parameter import Parameter

    return PerceptionNode(context=ros_context, namespace=ns, segmenter_factory=lambda _p, _s: BoxSegmenter(),
                          parameter_overrides=[Parameter("autostart", value=False),
                                               Parameter("wait_for_image", value=10.0),
                                               Parameter("max_image_age", value=0.0),
                                               Parameter("image_reliability", value="reliable")])


def test_a_command_that_arrives_while_activation_finishes_is_answered_not_refused(ros_context, monkeypatch):
    """
    A planner sends its command as soon as it sees the node's command subscription.

    Activation opens the subscriptions before it creates the action servers; a command
    landing in between must be served (the node is becoming active), not answered "node
    is not active". Here the first action server blocks until the command's result is
    out, so the command lands in that gap every time.
    """
    from m2sa_ros.msg import Command, SegmentationResult
    import m2sa_ros.perception_node as node_module
    from node_harness import good_image
    from rclpy.lifecycle import TransitionCallbackReturn
    from rclpy.node import Node
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import Image

    ns = f"/early_{os.getpid()}"
    node = _waiting_box_node(ros_context, ns)
    probe = Node("early_planner", context=ros_context)
    reliable = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
    results: list = []
    arrived = threading.Event()

    def on_result(msg) -> None:
        results.append(msg)
        arrived.set()

    probe.create_subscription(SegmentationResult, f"{ns}/result", on_result, reliable)
    images = probe.create_publisher(Image, f"{ns}/image", reliable)
    commands = probe.create_publisher(Command, f"{ns}/command_stamped", reliable)
    real_action_server = node_module.ActionServer

    def action_server_after_a_command(*args, **kwargs):
        # The command subscription exists now; once our publishers have matched it, send a command
        # (re-sent until the reliable endpoints have matched both ways) and hold activation until it
        # is answered.
        wait_until(lambda: commands.get_subscription_count() and images.get_subscription_count(), 10,
                   "the node's command and image subscriptions")
        for attempt in range(50):
            images.publish(good_image(1))
            commands.publish(Command(request_id=f"early{attempt}", text="what can I drink from?"))
            if arrived.wait(0.2):
                break
        monkeypatch.setattr(node_module, "ActionServer", real_action_server)
        return real_action_server(*args, **kwargs)

    try:
        with spinning(ros_context, node, probe):
            assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
            monkeypatch.setattr(node_module, "ActionServer", action_server_after_a_command)
            assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
            assert arrived.wait(10), "no command was answered"
            first = results[0]
            assert first.error != "node is not active", "a command sent once the subscription matched was refused"
            assert first.success, first.error
    finally:
        probe.destroy_node()
        node.close()


def test_a_goal_accepted_just_before_deactivate_is_answered_with_the_close_reason(ros_context):
    """
    A goal accepted in the moment before the node closes runs its execute callback after.

    That is Ctrl-C landing between rclpy's goal response and the execute callback. The
    planner holds an accepted goal; its answer must say what happened to it, as the
    queued goals' answers do ("cancelled: node deactivated"), not "node is not active";
    after activate again the same goal is served.
    """
    from m2sa_ros.action import Segment
    from node_harness import good_image
    from rclpy.lifecycle import TransitionCallbackReturn
    from rclpy.node import Node
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import Image

    ns = f"/late_goal_{os.getpid()}"
    node = _waiting_box_node(ros_context, ns)
    real_execute = node._intake.on_goal
    closing = {"on": True}

    def execute_after_the_close(goal_handle, camera=None):
        if closing["on"]:  # the close runs on another thread while this goal waits to execute
            closer = threading.Thread(target=node.trigger_deactivate)
            closer.start()
            closer.join(30)
        return real_execute(goal_handle, camera=camera)

    node._intake.on_goal = execute_after_the_close
    planner = Node("late_goal_planner", context=ros_context)
    images = planner.create_publisher(Image, f"{ns}/image", QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE))
    client = action_client(planner, Segment, f"{ns}/segment")

    def one_goal(request_id: str):
        sent = client.send_goal_async(Segment.Goal(command="what can I drink from?", request_id=request_id))
        handle = wait_until(lambda: sent.done() and sent.result(), 30, "goal response")
        assert handle.accepted
        done = handle.get_result_async()
        return wait_until(lambda: done.done() and done.result(), 30, "goal result").result.result

    try:
        with spinning(ros_context, node, planner):
            assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
            assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
            assert client.wait_for_server(timeout_sec=30)
            late = one_goal("late")
            assert (late.request_id, late.success, late.error) == ("late", False, "cancelled: node deactivated")
            closing["on"] = False
            assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
            assert client.wait_for_server(timeout_sec=30)
            wait_until(lambda: images.get_subscription_count() > 0, 30, "the image subscription")
            images.publish(good_image(1))
            served = one_goal("served")
            assert served.success, served.error  # the reason is gone with the close it belonged to
    finally:
        client.destroy()
        planner.destroy_node()
        node.close()
