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
The node's cameras: what belongs to each camera, its name and the topics its inputs come on.

``camera_state``: one camera's buffers, tracks, counters and ROS entities inside the node
(:class:`~m2sa_ros.cameras.camera_state.Camera`); ``camera_outputs``: its publishers, the
narrow object the pipeline publishes a result and its views on; ``camera_names``: the ``cameras``
parameter's names, checked without ROS; ``latest_frame``: the keep-latest image a command
refers to; ``transport_names``: the topics of a camera's image, depth and camera_info, as
image_transport names them. Import the module you need; this package face hands nothing on.
"""
