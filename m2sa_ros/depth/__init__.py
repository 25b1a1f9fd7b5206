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
Depth: a colour frame's registered depth and camera_info, bound, measured and accounted for.

``stamped_buffer``: the last few depth and camera_info messages, looked up by the colour
image's stamp; ``compressed_depth``: image_transport's compressedDepth format, decoded
(and encoded) without the plugin; ``depth_settings``: every depth parameter's value by its
name in the parameter table, and the 3-D fit's constants, built once and handed whole to
the depth step; ``depth_binding``: the one place that decides whether a depth may be used
with a frame and measures the frame's targets with it (through m2sa_core.geometry's
camera model); ``depth_health``: what became of each frame's depth, and when to warn, by
cause. A new depth parameter is read here: a field of DepthSettings and its use (its
declaration is in m2sa_ros/params/node_params.py). Import the module you need; this
package face hands nothing on.
"""
