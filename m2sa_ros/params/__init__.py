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
The node's parameters: the one table, its meeting with rclpy, and each topic's QoS.

``node_params``: every parameter's name, type, default, range and documentation, checked
without ROS (:data:`~m2sa_ros.params.node_params.PARAMETERS`); ``ros_parameters``: declared
with rclpy and every set screened; ``topic_qos``: each topic's default QoS and the
``qos_overrides.*`` parameters; ``qos_entities``: the node's subscriptions and publishers
created with them; ``parameter_group``: the base of each concern's settings, read by the
table's names. A new parameter starts in ``node_params``. Import the module
you need; this package face hands nothing on.
"""
