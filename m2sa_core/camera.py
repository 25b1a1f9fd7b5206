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
Pinhole camera intrinsics, shared by the robot side and the synthetic world.

The node reads them from sensor_msgs/CameraInfo to back-project masks into 3-D, and the
synthetic world uses the same intrinsics to render registered depth and its ground
truth; one type means the ground truth and the geometry under test agree on what a
pixel's ray is (REP 103 optical frame: x right, y down, z forward; pixel centres at
integer coordinates, as CameraInfo's K has them).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Intrinsics:
    """Pinhole intrinsics of an image of ``width`` x ``height`` pixels."""

    fx: float
    fy: float
    cx: float
    cy: float
    width: int
    height: int

    @classmethod
    def from_k(cls, k: "list[float] | np.ndarray", width: int, height: int) -> "Intrinsics":
        """Read the row-major 3x3 K of a CameraInfo; a K with zero focal length is an error."""
        k = np.asarray(k, dtype=np.float64).reshape(-1)
        if k.size != 9:
            raise ValueError(f"camera_info K must have 9 elements, got {k.size}")
        if k[0] <= 0 or k[4] <= 0:
            raise ValueError(f"camera_info K has a non-positive focal length (fx={k[0]}, fy={k[4]}): "
                             "the camera is not calibrated")
        return cls(fx=float(k[0]), fy=float(k[4]), cx=float(k[2]), cy=float(k[5]),
                   width=int(width), height=int(height))

    @property
    def k(self) -> list[float]:
        """Row-major 3x3 K, as sensor_msgs/CameraInfo.k holds it."""
        return [self.fx, 0.0, self.cx, 0.0, self.fy, self.cy, 0.0, 0.0, 1.0]

    def rays(self) -> np.ndarray:
        """(H, W, 3) float64 rays with z = 1 through every pixel centre: P = z * ray."""
        u = (np.arange(self.width, dtype=np.float64) - self.cx) / self.fx
        v = (np.arange(self.height, dtype=np.float64) - self.cy) / self.fy
        rays = np.empty((self.height, self.width, 3))
        rays[..., 0] = u[None, :]
        rays[..., 1] = v[:, None]
        rays[..., 2] = 1.0
        return rays
