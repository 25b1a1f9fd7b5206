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
The project's own trained model: its one name and where a checkout keeps it.

The node falls back to it when no model is named (m2sa_ros/model/model_source.py, which also
looks under share/m2sa_ros/models in a colcon install); the demo, the benchmarks and
the tests run it. All of them read its name and place here, so that moving or renaming
it (scripts/train_tiny.sh exports it) is one edit, and a message naming it cannot name
another path than the one that is read.
"""

from __future__ import annotations

from pathlib import Path

SHIPPED_MODEL_NAME = "m2sa-tiny-synth"
# As the docs and messages name it: relative to the repository root, and to share/m2sa_ros.
SHIPPED_MODEL_RELATIVE = f"models/{SHIPPED_MODEL_NAME}"
# Where a checkout (or an editable install) has it; absent in a wheel or a colcon install.
SHIPPED_MODEL = Path(__file__).resolve().parents[1] / "models" / SHIPPED_MODEL_NAME
