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
Deprecated path: the target geometry moved to :mod:`m2sa_core.geometry` (no ROS in it).

The old name goes in the next release.

``register_depth``, ``RegisteredDepth`` and ``DepthMismatch`` are in
m2sa_core/geometry/registered_depth.py, ``target_geometry``, ``TargetGeometry`` and
``GeometryParams`` in m2sa_core/geometry/target.py, ``voxel_downsample`` in
m2sa_core/geometry/voxel_grid.py. This module hands those names on, with a
DeprecationWarning.
"""

import warnings

from m2sa_core.camera import Intrinsics  # noqa: F401 - the old module's name for it
from m2sa_core.geometry.registered_depth import DepthMismatch, register_depth, RegisteredDepth  # noqa: F401
from m2sa_core.geometry.target import GeometryParams, target_geometry, TargetGeometry  # noqa: F401
from m2sa_core.geometry.voxel_grid import voxel_downsample  # noqa: F401

warnings.warn("m2sa_ros.target_geometry moved to m2sa_core.geometry (registered_depth, target, voxel_grid); "
              "import it from there (the old path goes in the next release)", DeprecationWarning, stacklevel=2)
