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
A rigid transform (rotation and translation) applied to a target's 3-D values, without ROS.

A planner works in ``base_link`` or ``odom``, the geometry is measured in the camera's
optical frame; tf2 gives the transform between the two as a translation and a unit
quaternion (x, y, z, w), and this module moves the values with it: points (the cloud,
the centroid) and poses (the box centre and its axes). Sizes need nothing: a box's
extents are along its own axes, which turn with it.

The arithmetic is float64 whatever comes in (a float32 cloud of a target 3 m away moved
by a transform of a few metres would otherwise lose a tenth of a millimetre), and the
rotation is scipy's, so quaternion conventions are the ones geometry_msgs uses:
x, y, z, w with the rotation taking source-frame coordinates to target-frame ones
(``p_target = R p_source + t``), as tf2's ``lookup_transform(target, source, ...)`` means.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
from scipy.spatial.transform import Rotation


@dataclass(frozen=True)
class RigidTransform:
    """``p_target = rotation @ p_source + translation``; rotation (3, 3), translation (3,), float64."""

    rotation: np.ndarray
    translation: np.ndarray

    @classmethod
    def from_quaternion(cls, translation: "np.ndarray | tuple[float, float, float]",
                        quaternion: "np.ndarray | tuple[float, float, float, float]") -> RigidTransform:
        """
        Build the transform from a translation (3,) and a quaternion (4,) x, y, z, w.

        The quaternion is normalised here: a published one is often off unit length by float rounding.
        """
        q = np.asarray(quaternion, dtype=np.float64).reshape(4)
        norm = float(np.linalg.norm(q))
        if not np.isfinite(q).all() or norm < 1e-9:
            raise ValueError(f"not a rotation: quaternion {q.tolist()}")
        t = np.asarray(translation, dtype=np.float64).reshape(3)
        if not np.isfinite(t).all():
            raise ValueError(f"not a translation: {t.tolist()}")
        return cls(Rotation.from_quat(q / norm).as_matrix(), t)

    @classmethod
    def from_matrix(cls, matrix: np.ndarray) -> RigidTransform:
        """From a homogeneous (4, 4) matrix whose top-left (3, 3) is a rotation."""
        m = np.asarray(matrix, dtype=np.float64).reshape(4, 4)
        return cls(Rotation.from_matrix(m[:3, :3]).as_matrix(), m[:3, 3].copy())

    @property
    def matrix(self) -> np.ndarray:
        """(4, 4) homogeneous matrix."""
        m = np.eye(4)
        m[:3, :3], m[:3, 3] = self.rotation, self.translation
        return m

    @cached_property
    def _turn(self) -> Rotation:
        """Return the rotation as scipy's, made once: a result moves every target's pose with it."""
        return Rotation.from_matrix(self.rotation)

    @cached_property
    def quaternion(self) -> np.ndarray:
        """(4,) x, y, z, w of the rotation."""
        return self._turn.as_quat()

    def apply(self, points: np.ndarray) -> np.ndarray:
        """(N, 3) or (3,) points -> the same shape, float64, in the target frame."""
        p = np.asarray(points, dtype=np.float64)
        return p @ self.rotation.T + self.translation

    def apply_pose(self, position: np.ndarray, quaternion: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """
        Return a pose (position (3,), orientation x, y, z, w (4,)) -> (position (3,), quaternion (4,)).

        The pose's axes turn with the frame (``R_target = R R_source``), so a box's z axis -
        the approach direction - stays the same direction in space.
        """
        return self.apply(position), quaternion_product(self.quaternion, quaternion)


def quaternion_product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """
    (4,) x, y, z, w of the rotation ``a`` after ``b`` (Hamilton product ``a b``), unit length.

    Written out rather than through scipy's Rotation, whose object per pose costs more
    than the product itself, and a result turns every target's pose.
    """
    ax, ay, az, aw = (float(v) for v in np.asarray(a, np.float64).reshape(4))
    bx, by, bz, bw = (float(v) for v in np.asarray(b, np.float64).reshape(4))
    q = np.array([aw * bx + ax * bw + ay * bz - az * by,
                  aw * by - ax * bz + ay * bw + az * bx,
                  aw * bz + ax * by - ay * bx + az * bw,
                  aw * bw - ax * bx - ay * by - az * bz])
    return q / np.linalg.norm(q)
