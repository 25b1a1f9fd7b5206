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
Workarounds for what rclpy (and the Python under it) does not do as the node needs.

Each module names the upstream issue or behaviour it works around, so that it can go
when upstream changes: ``rclpy_compat`` (Humble's rclpy lacks the pre- and post-set
parameter callbacks), ``executor_spin`` (the executor's destroy-while-waiting races),
``blocking_calls`` (rclpy answers a service or action only when its callback returns),
``goal_status_repeat`` (the action client's status-before-response race),
``shutdown_delivery`` (results that must leave before the executor stops),
``lifecycle_bond`` (rclpy's LifecycleNode has no side of Nav2's bond) and ``signal_event``
(an event a signal handler may set, where rclpy's own SIGINT handling is replaced). Import
the module you need; this package face hands nothing on.
"""
