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
A target's 3-D geometry from its mask and registered depth, without ROS.

``camera_model.py``: how a pixel becomes a ray, as image_geometry's PinholeCameraModel has
it (rectified through P, raw through K and D). ``registered_depth.py``: depth bound to the
colour image it belongs to, or refused. ``plane_fit.py``: the robust plane (MSAC with a
band sized from the target's own depth noise, then a biweighted least-squares refit).
``target.py``: the points, oriented box and normal of one target. ``centroid.py``: the v2
centroid (median depth of the eroded mask).
``voxel_grid.py``: the cloud's downsampling. ``rigid_transform.py``: those values moved
into another frame with a transform tf2 gives. ``depth_encoding.py``: depth written as REP
118's 16UC1 millimetres. The node's depth step (m2sa_ros/depth/depth_binding.py)
and the message conversion (m2sa_ros/messages/geometry_conversion.py) call these; the tests measure
them against the synthetic world's ground truth and image_geometry. Import the module you
need (``from m2sa_core.geometry.target import target_geometry``); this package face hands
nothing on, so reading one pulls in no other.
"""
