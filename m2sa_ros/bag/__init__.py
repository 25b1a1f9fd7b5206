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
Offline tools around the node: record bags with ground truth, replay them, score them.

None of this runs on the robot. ``bag_io`` writes and reads rosbag2 files,
``ground_truth`` their sidecar JSON files and ``cli`` is ``m2sa-bag``; ``replay`` drives
a live node with a bag on the bag's own time, ``scoring`` and ``report`` turn the
results into figures and pictures (``absence_scoring``: commands about something not in
view, rejected or not), ``evaluate`` is ``m2sa-bag-eval``, and ``demo`` is
``make demo`` (see docs/BAG_REPLAY.md). For the ``track`` action: ``sequences`` records
camera sequences with per-frame ground truth, ``tracking`` replays them as track goals
and ``tracking_report`` scores them per frame.
"""
