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
The programs beside the node, and what they share with the benchmarks and the tests.

``desk_camera``: ``m2sa-camera``, a camera at your desk (stills, a folder, a video or the
synthetic world) for trying the node without a robot or a bag; ``child_process``: a child
process started, watched and stopped as the bag tools, the benchmarks and the tests run
one. The bag tools are in m2sa_ros/bag/. Import the module you need; this package face
hands nothing on.
"""
