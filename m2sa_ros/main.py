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
The node's process: ``m2sa-perception`` and ``ros2 run m2sa_ros perception_node``.

Owns what belongs to the process rather than to the node: the GIL switch interval, the
executor and its threads, and the way SIGINT / SIGTERM end it (:class:`ShutdownRequest`).
"""

from __future__ import annotations

import signal
import sys
import threading
from typing import Any

from m2sa_core.cli_errors import cli_entry
from m2sa_ros.params.node_params import check_params_files
from m2sa_ros.perception_node import PerceptionNode
from m2sa_ros.rclpy_support.executor_spin import spin_through_destroyed_entities
from m2sa_ros.rclpy_support.signal_event import SignalSafeEvent
import rclpy
from rclpy.executors import MultiThreadedExecutor
from rclpy.signals import SignalHandlerOptions

# The worker thread runs the model's thousands of small torch operations, and each one
# lets go of the GIL. With Python's default 5 ms switch interval, each can then wait up to
# 5 ms to get it back from an executor thread that took it for a message: under simulated
# time a /clock at 100 Hz is enough. `make demo` measured inference p50 431 ms and max 7.8 s
# at 5 ms, p50 58 ms and max 0.14 s at 0.2 ms, with the same answers (bench/RESULTS.md).
GIL_SWITCH_INTERVAL_S = 0.0002

SHUTDOWN_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def prefer_the_model_thread() -> None:
    """Shorten the GIL switch interval of the node's process (see GIL_SWITCH_INTERVAL_S)."""
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)


class ShutdownRequest:
    """
    SIGINT / SIGTERM -> one orderly shutdown; repeated signals are only counted.

    In a terminal, Ctrl-C reaches every process of the foreground group, so the node gets
    SIGINT at once; ``ros2 launch -n`` forwards its own a few hundred ms later, and launch
    in either mode sends SIGTERM 5 s after the Ctrl-C, then SIGKILL. rclpy's own handler
    would shut the context down on the first one, after which no pending command could be
    answered. Here the first signal only sets an event; main() then answers pending
    commands and exits 0.

    The process must also survive signals that come after main() returns. Interpreter
    finalization puts the default action back for every signal that has a Python handler
    (and leaves ignored ones alone), and tearing down torch and DDS afterwards takes a
    second or more: a forwarded SIGINT in that window would kill the process with -2.
    :meth:`ignore_from_now_on` closes that window once everything has been answered.
    """

    def __init__(self) -> None:
        self.event = SignalSafeEvent()  # threading.Event.set() can deadlock in a handler (signal_event.py)
        self.signal_name = ""
        self.repeats = 0

    def install(self) -> None:
        for signum in SHUTDOWN_SIGNALS:
            signal.signal(signum, self._handle)

    def _handle(self, signum: int, _frame: Any) -> None:
        if self.event.is_set():
            self.repeats += 1
            return
        self.signal_name = signal.Signals(signum).name
        self.event.set()

    def ignore_from_now_on(self) -> None:
        """
        Ignore SIGINT and SIGTERM for the rest of the process (its exit is under way).

        SIGKILL still ends a process whose teardown hangs, as ``ros2 launch`` sends it.
        """
        for signum in SHUTDOWN_SIGNALS:
            signal.signal(signum, signal.SIG_IGN)


def executor_threads(max_queue: Any, names: Any) -> tuple[int, int]:
    """
    (blocking-call cap, executor threads) for the node's parameters.

    Threads: sensors and commands (per camera), lifecycle services, diagnostics, timers,
    plus one per service/action call that can usefully wait (per camera: the running
    command and a full queue). Values out of range fall back to the defaults; configure
    reports them.
    """
    cameras = len(names) if isinstance(names, (list, tuple)) and 0 < len(names) <= 64 else 1
    waiting = (max_queue + 1 if isinstance(max_queue, int) and 0 < max_queue <= 64 else 5) * cameras
    return waiting, waiting + 3 + 2 * cameras


@cli_entry("m2sa-perception")
def main(args: list[str] | None = None) -> int:
    """
    Console entry point ``m2sa-perception`` (and ``ros2 run m2sa_ros perception_node``).

    Takes the standard ROS arguments: ``--ros-args -p name:=value --params-file FILE
    -r from:=to``. Exits 0 on SIGINT or SIGTERM after answering every pending command.
    """
    argv = args if args is not None else sys.argv
    prefer_the_model_thread()
    check_params_files(argv)
    shutdown = ShutdownRequest()
    shutdown.install()  # before rclpy.init: a signal during start-up is handled too
    rclpy.init(args=argv, signal_handler_options=SignalHandlerOptions.NO)
    node: PerceptionNode | None = None
    executor: MultiThreadedExecutor | None = None
    spinner: threading.Thread | None = None
    try:
        node = PerceptionNode()
        waiting, threads = executor_threads(node.get_parameter("max_queue").value,
                                            node.get_parameter("cameras").value)
        node.blocking_call_limit = waiting
        executor = MultiThreadedExecutor(num_threads=threads)
        executor.add_node(node)
        logger = node.get_logger()
        spinner = threading.Thread(
            target=spin_through_destroyed_entities, name="m2sa-executor", daemon=True,
            args=(executor, lambda exc: logger.debug(f"executor: entity destroyed while waiting ({exc})")))
        spinner.start()
        while not shutdown.event.wait(0.5):
            if not spinner.is_alive():
                break
        if shutdown.signal_name:
            node.get_logger().info(f"{shutdown.signal_name}: shutting down; answering pending commands")
        # The executor keeps spinning while pending commands are answered, so service
        # and action replies still go out; only then does it stop.
        node.stop(f"node shutting down ({shutdown.signal_name or 'executor stopped'})")
    finally:
        if executor is not None:
            executor.shutdown()
        if spinner is not None:
            spinner.join(timeout=10)
        if node is not None:
            try:
                node.close()
            except Exception as exc:  # noqa: BLE001 - exiting anyway; say why it was unclean
                print(f"perception_node: unclean shutdown: {type(exc).__name__}: {exc}", file=sys.stderr)
        rclpy.try_shutdown()
        shutdown.ignore_from_now_on()
    return 0


if __name__ == "__main__":
    sys.exit(main())
