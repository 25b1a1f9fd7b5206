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
A target's cloud, downsampled on a voxel grid before it travels.

Every valid pixel of an object at 640x480 is thousands of points (50 KiB as a
PointCloud2); a grasp planner needs the surface's shape, not every pixel. The mean point
of each occupied cube keeps the shape at the voxel's resolution (a 5 mm button stays) and
cuts the cloud by the pixels a voxel holds (bench/RESULTS.md has the sizes).
"""

from __future__ import annotations

import numpy as np


def voxel_downsample(points: np.ndarray, voxel_m: float) -> np.ndarray:
    """
    (M, 3) float32: the mean point of every occupied ``voxel_m`` cube of ``points`` (N, 3), ordered by voxel.

    ``voxel_m`` <= 0 returns the points as float32.
    """
    points = np.asarray(points, dtype=np.float64).reshape(-1, 3)
    if voxel_m <= 0 or len(points) == 0:
        return points.astype(np.float32)
    cells = np.floor(points / voxel_m).astype(np.int64)
    cells -= cells.min(axis=0)
    span = cells.max(axis=0) + 1
    keys = (cells[:, 0] * span[1] + cells[:, 1]) * span[2] + cells[:, 2]
    _, inverse, counts = np.unique(keys, return_inverse=True, return_counts=True)
    out = np.empty((counts.size, 3))
    for axis in range(3):
        out[:, axis] = np.bincount(inverse, weights=points[:, axis], minlength=counts.size) / counts
    return out.astype(np.float32)
