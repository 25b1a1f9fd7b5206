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
The ``track`` action: a command answered once by the full model, then followed frame by frame.

``track_action``: the goals, their frames through the command pipeline and their one
final result; ``tracks``: each track's decisions (is a frame due, is a target lost, when
and why the track ends), apart from DDS. Import the module you need; this package face
hands nothing on.
"""
