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
Depth in the encodings ROS images carry it in (REP 118), without ROS: metres to 16UC1.

A depth camera publishes either ``32FC1`` metres (NaN where it has no depth) or ``16UC1``
millimetres (0 where it has none). The node reads both
(m2sa_ros/messages/image_conversion.py, ``depth_to_metres``); whatever writes depth
images - the node's own conversion back, the bag recorder, the desk camera, the
benchmarks - writes the millimetres with :func:`to_16uc1`, so a depth image written here
reads back as the metres it was made from, to the millimetre.
"""

from __future__ import annotations

import numpy as np


def to_16uc1(depth_m: np.ndarray) -> np.ndarray:
    """
    Convert float metres (H, W; NaN/inf/<=0 invalid) to uint16 millimetres, 0 invalid (REP 118 16UC1).

    Depths beyond 65.535 m are invalid too rather than wrapped.
    """
    depth = np.asarray(depth_m, dtype=np.float64)
    mm = np.round(depth * 1000.0)
    valid = np.isfinite(mm) & (mm > 0) & (mm <= 65535)
    out = np.zeros(depth.shape, np.uint16)
    out[valid] = mm[valid].astype(np.uint16)
    return out
