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
Rigid transforms as numpy checks them, for the tests of ``target_frame``.

A test broadcasts or buffers a transform built from a translation and an (x, y, z, w)
quaternion (``m2sa_ros.tf.frame_transform.transform_msg``) and applies the same
transform to the optical-frame values with numpy here: the reference the node's move is
held to. Tests import it by name (``from tf_frames import transform_matrix``).
"""

from __future__ import annotations

import numpy as np
from scipy.spatial.transform import Rotation


def transform_matrix(translation, quaternion) -> np.ndarray:
    """Return the 4x4 homogeneous matrix of a translation (3,) and an (x, y, z, w) quaternion (4,)."""
    m = np.eye(4)
    m[:3, :3], m[:3, 3] = Rotation.from_quat(quaternion).as_matrix(), translation
    return m


def apply_matrix(m: np.ndarray, points) -> np.ndarray:
    """Move ``points`` (N x 3, or one 3-vector) by ``m`` (4x4), in float64."""
    return np.asarray(points, np.float64) @ m[:3, :3].T + m[:3, 3]
