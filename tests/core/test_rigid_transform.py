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

"""m2sa_core.geometry.rigid_transform: points and poses moved as a 4x4 matrix moves them."""

from __future__ import annotations

from m2sa_core.geometry.rigid_transform import RigidTransform
import numpy as np
import pytest
from scipy.spatial.transform import Rotation


def _random(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(quaternion x, y, z, w, translation, the same as a 4x4 matrix)."""
    rng = np.random.default_rng(seed)
    q = Rotation.random(random_state=seed).as_quat()
    t = rng.uniform(-3, 3, 3)
    m = np.eye(4)
    m[:3, :3], m[:3, 3] = Rotation.from_quat(q).as_matrix(), t
    return q, t, m


@pytest.mark.parametrize("seed", range(5))
def test_points_move_as_the_homogeneous_matrix_moves_them(seed):
    q, t, m = _random(seed)
    transform = RigidTransform.from_quaternion(t, q)
    points = np.random.default_rng(100 + seed).uniform(-2, 2, (50, 3)).astype(np.float32)
    expected = (np.column_stack([points.astype(np.float64), np.ones(50)]) @ m.T)[:, :3]
    np.testing.assert_allclose(transform.apply(points), expected, atol=1e-12)
    np.testing.assert_allclose(transform.apply(points[0]), expected[0], atol=1e-12)
    np.testing.assert_allclose(transform.matrix, m, atol=1e-12)
    assert transform.apply(points).dtype == np.float64  # float32 in, float64 arithmetic


@pytest.mark.parametrize("seed", range(5))
def test_a_pose_turns_with_the_frame_and_keeps_its_axes_in_space(seed):
    q, t, m = _random(seed)
    transform = RigidTransform.from_quaternion(t, q)
    pose_q = Rotation.random(random_state=50 + seed).as_quat()
    position = np.array([0.1, -0.2, 1.3])
    moved_position, moved_q = transform.apply_pose(position, pose_q)
    np.testing.assert_allclose(moved_position, m[:3, :3] @ position + t, atol=1e-12)
    # Each of the box's axes is the same direction in space: R_target = R R_source.
    np.testing.assert_allclose(Rotation.from_quat(moved_q).as_matrix(),
                               m[:3, :3] @ Rotation.from_quat(pose_q).as_matrix(), atol=1e-12)
    assert np.linalg.norm(moved_q) == pytest.approx(1.0)


def test_a_quaternion_off_unit_length_is_normalised_and_a_zero_one_refused():
    transform = RigidTransform.from_quaternion((0, 0, 0), (0.0, 0.0, 0.7071, 0.7072))
    np.testing.assert_allclose(transform.apply([1.0, 0.0, 0.0]), [0.0, 1.0, 0.0], atol=1e-3)  # ~90 deg about z
    np.testing.assert_allclose(transform.rotation @ transform.rotation.T, np.eye(3), atol=1e-12)
    with pytest.raises(ValueError, match="not a rotation"):
        RigidTransform.from_quaternion((0, 0, 0), (0, 0, 0, 0))
    with pytest.raises(ValueError, match="not a translation"):
        RigidTransform.from_quaternion((np.nan, 0, 0), (0, 0, 0, 1))


def test_from_matrix_round_trips():
    _q, _t, m = _random(7)
    np.testing.assert_allclose(RigidTransform.from_matrix(m).matrix, m, atol=1e-12)
