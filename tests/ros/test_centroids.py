"""Depth centroids against known geometry, and the stamp-matching buffer."""

from __future__ import annotations

import numpy as np
import pytest

from m2sa_ros.centroids import Intrinsics, StampedBuffer, erode_mask, mask_centroid

K = Intrinsics(fx=100.0, fy=120.0, cx=40.0, cy=30.0, width=80, height=60)


def _scene():
    """A wall at 2 m with a box face at 1 m covering rows 20..39, columns 50..69."""
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


def test_stamped_buffer_nearest_within_tolerance():
    buf: StampedBuffer[str] = StampedBuffer(capacity=3)
    assert buf.nearest(0, 10**9) is None
    for stamp, name in [(100, "a"), (200, "b"), (300, "c"), (400, "d")]:
        buf.push(stamp, name)
    assert len(buf) == 3  # "a" fell out
    assert buf.nearest(260, 100) == "c"
    assert buf.nearest(240, 100) == "b"
    assert buf.nearest(100, 50) is None  # "b" is 100 away, "a" is gone
    assert buf.nearest(460, 50) is None
    with pytest.raises(ValueError):
        StampedBuffer(capacity=0)
