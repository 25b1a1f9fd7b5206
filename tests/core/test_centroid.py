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

"""The v2 centroid (m2sa_core.geometry.centroid) against known geometry, and Intrinsics from K."""

from __future__ import annotations

from m2sa_core.camera import Intrinsics
from m2sa_core.geometry.camera_model import PinholeCameraModel
from m2sa_core.geometry.centroid import erode_mask, mask_centroid
import numpy as np
import pytest

K = Intrinsics(fx=100.0, fy=120.0, cx=40.0, cy=30.0, width=80, height=60)


def _scene():
    """Return a wall at 2 m with a box face at 1 m covering rows 20..39, columns 50..69."""
    depth = np.full((60, 80), 2.0, np.float32)
    depth[20:40, 50:70] = 1.0
    mask = np.zeros((60, 80), bool)
    mask[20:40, 50:70] = True
    return depth, mask


def test_box_face_centroid_matches_the_pinhole_model():
    depth, mask = _scene()
    x, y, z = mask_centroid(mask, depth, K, erosion_px=2)
    # Mask centre pixel (59.5, 29.5) at 1 m: x = (59.5-40)/100, y = (29.5-30)/120.
    assert z == pytest.approx(1.0)
    assert x == pytest.approx(0.195, abs=1e-6)
    assert y == pytest.approx(-0.5 / 120, abs=1e-6)


def test_the_centroid_goes_through_the_camera_model():
    """A rectified image's pixels go through P (here P != K), a raw one's through K and D."""
    depth, mask = _scene()
    k = [100.0, 0.0, 40.0, 0.0, 120.0, 30.0, 0.0, 0.0, 1.0]
    p = [90.0, 0.0, 38.0, 0.0, 0.0, 110.0, 31.0, 0.0, 0.0, 0.0, 1.0, 0.0]
    rectified = PinholeCameraModel.from_camera_info(k=k, p=p, d=[0.1, -0.05, 0.0, 0.0, 0.0],
                                                    distortion_model="plumb_bob", width=80, height=60)
    x, y, z = mask_centroid(mask, depth, rectified, erosion_px=2)
    assert (x, y, z) == pytest.approx(((59.5 - 38) / 90, (29.5 - 31) / 110, 1.0), abs=1e-9)
    raw = PinholeCameraModel.from_camera_info(k=k, p=p, d=[0.1, -0.05, 0.0, 0.0, 0.0],
                                              distortion_model="plumb_bob", width=80, height=60, rectified=False)
    expected = raw.back_project(np.array([59.5]), np.array([29.5]), np.array([1.0]))[0]
    assert mask_centroid(mask, depth, raw, erosion_px=2) == pytest.approx(tuple(expected), abs=1e-9)
    assert abs(expected[0] - 0.195) > 5e-4  # the distortion moved it (K alone gives 0.195)


def test_erosion_keeps_background_at_the_border_out():
    depth, mask = _scene()
    sloppy = mask.copy()
    sloppy[18:42, 48:72] = True  # a mask 2 px too large: a border of wall at 2 m
    sloppy_depth = depth.copy()
    sloppy_depth[20:40, 50:56] = 2.0  # and part of the face reads as wall (mixed pixels)
    _, _, z_eroded = mask_centroid(sloppy, sloppy_depth, K, erosion_px=3)
    _, _, z_raw = mask_centroid(sloppy, sloppy_depth, K, erosion_px=0)
    assert z_eroded == pytest.approx(1.0)
    assert z_raw == pytest.approx(2.0)  # without erosion the median is pulled to the wall


def test_invalid_depth_is_ignored_and_all_invalid_gives_none():
    depth, mask = _scene()
    depth[20:30, 50:70] = np.nan  # upper half of the face has no depth
    x, y, z = mask_centroid(mask, depth, K, erosion_px=0)
    assert z == pytest.approx(1.0)
    assert y == pytest.approx((34.5 - 30) / 120)  # only the valid lower half counts
    depth[:] = np.nan
    assert mask_centroid(mask, depth, K) is None
    assert mask_centroid(np.zeros_like(mask), _scene()[0], K) is None


def test_thin_mask_survives_erosion():
    thin = np.zeros((60, 80), bool)
    thin[30, 10:30] = True  # one pixel high: erosion would remove it entirely
    np.testing.assert_array_equal(erode_mask(thin, 3), thin)
    assert mask_centroid(thin, np.full((60, 80), 0.5, np.float32), K)[2] == pytest.approx(0.5)


def test_size_mismatches_are_errors_not_wrong_points():
    depth, mask = _scene()
    with pytest.raises(ValueError, match="mask 40x30 and depth 80x60 differ"):
        mask_centroid(mask[:30, :40], depth, K)
    small_k = Intrinsics.from_k(np.eye(3).ravel() * 50, width=40, height=30)
    with pytest.raises(ValueError, match="camera_info is 40x30 but depth is 80x60"):
        mask_centroid(mask, depth, small_k)


def test_intrinsics_from_camera_info_k():
    k = [525.0, 0.0, 319.5, 0.0, 525.0, 239.5, 0.0, 0.0, 1.0]
    intr = Intrinsics.from_k(k, 640, 480)
    assert (intr.fx, intr.fy, intr.cx, intr.cy) == (525.0, 525.0, 319.5, 239.5)
    with pytest.raises(ValueError, match="not calibrated"):
        Intrinsics.from_k([0.0] * 9, 640, 480)
    with pytest.raises(ValueError, match="9 elements"):
        Intrinsics.from_k([1.0] * 4, 640, 480)
