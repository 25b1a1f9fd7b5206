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
Node health for /diagnostics: the node's status and each camera's.

``node_status``: the counters the worker updates and the DiagnosticArray the node
publishes (diagnostic_updater is not on PyPI); ``camera_health``: whether each camera is
alive, judged as diagnostic_updater's FrequencyStatus and TimeStampStatus judge a topic.
Each camera's depth has its own account in m2sa_ros/depth/depth_health.py. Import the
module you need; this package face hands nothing on.
"""
