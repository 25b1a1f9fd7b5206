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
tf: a result's 3-D values moved into the robot's frame (``target_frame``) with tf2.

``frame_transform``: the transform looked up at the image's stamp, the result moved with
it, and a transform to and from geometry_msgs. Import the module you need; this package
face hands nothing on.
"""
