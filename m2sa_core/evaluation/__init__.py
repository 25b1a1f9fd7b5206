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
How good the answers are: the paper's metrics and the breakdowns that say where they fail.

``metrics.py``: gIoU, cIoU, Hungarian matching, amodal and mask-type accuracy, per-split
reports. ``answer_errors.py``: what a free answer got wrong about its targets, by kind of
mistake. ``target_breakdown.py``: gIoU by what each target is and by its size. The
evaluators of training/ and the bag tools read these; inference uses only the mask
overlap of ``metrics.py``. Import the module you need (``from m2sa_core.evaluation.metrics
import ...``); this package face hands nothing on, so reading one pulls in no other.
"""
