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
m2sa_core: the M2SA reasoning-segmentation model and everything around it.

A plain Python library (no ROS): model, data readers, metrics, inference and
training helpers. The ROS 2 layer lives in the separate package ``m2sa_ros``.
"""

__version__ = "0.1.0"

from m2sa_core.types import Granularity, Result, Target  # noqa: E402

__all__ = ["Granularity", "Result", "Target", "__version__"]
