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
The node's messages: every conversion between a ROS message and numpy or m2sa_core values.

``image_conversion``: sensor_msgs images to and from numpy (cv_bridge's semantics, the
encoding table); ``mask_encoding``: a target's masks on the wire (cropped 1-bit PNGs);
``result_conversion``: an m2sa_core Result to m2sa_ros/SegmentationResult, and the error
result; ``geometry_conversion``: a target's pose, size and points; ``cloud_conversion``:
points to and from PointCloud2; ``detection_conversion``: vision_msgs detections;
``markers``: RViz markers; ``answer_feedback``: the ``segment`` action's feedback, once per
change. A new output field or image encoding goes here. Import the module you need; this
package face hands nothing on.
"""
