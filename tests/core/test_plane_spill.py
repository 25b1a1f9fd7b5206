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
A mask that spills onto another surface cannot turn the 3-D fit (m2sa_core.geometry.target).

A model's mask often runs over a thin or slanted target's edge onto whatever lies beside
or behind it. Strips and patches of several sizes and slants, with 2-15 % of the mask's
pixels on a surface 3-15 cm nearer or farther (scattered pixels, or a block at one end
as when a mask runs past a knife's tip, or along one side), with and without depth
noise: the normal stays within 2 degrees, the box's depth within the noise, the spilled
pixels stay out of the points, and the share on the plane says how much was left out.
The grid is seeded, so a failure names a case that fails again. Also: no pose where no
plane holds most of the mask, and the issue's own case, which the former fit (PCA after a
depth band) got 30 degrees wrong.
"""

from __future__ import annotations

from m2sa_core.camera import Intrinsics
from m2sa_core.geometry.registered_depth import register_depth
from m2sa_core.geometry.target import GeometryParams, target_geometry
import numpy as np
import pytest

K = Intrinsics(fx=500.0, fy=500.0, cx=319.5, cy=239.5, width=640, height=480)
RAYS = np.stack([*np.meshgrid((np.arange(K.width) - K.cx) / K.fx, (np.arange(K.height) - K.cy) / K.fy),
                 np.ones((K.height, K.width))], axis=-1)
DISTANCE_M = 0.8  # a tabletop's range: a 60-degree slant spans 0.6-1.2 m, where the band is 12-18 mm
NOISE_M = 0.001  # a 10 px strip's core (6 px across) then fixes its normal to about 0.7 degrees (1 sigma)
SIZES = [(160, 10), (60, 60), (200, 40)]  # (width, height) pixels
SLANTS = [0.0, 30.0, 60.0]  # degrees between the normal and the optical axis
FRACTIONS = [0.02, 0.05, 0.15]
OFFSETS = [-0.15, -0.03, 0.03, 0.10]  # metres along the ray: negative = nearer
PATTERNS = ["scattered", "end", "side"]
EVERY_POINT = GeometryParams(voxel_m=0.0)  # points = the members themselves


def _normal(slant_deg: float, axis: str) -> np.ndarray:
    """
    Return a unit normal facing the camera, tilted by ``slant_deg`` about the image's other axis.

    Axis "x" slants the surface along image x (its depth changes along a row).
    """
    a = np.deg2rad(slant_deg)
    n = np.array([np.sin(a), 0.0, -np.cos(a)]) if axis == "x" else np.array([0.0, np.sin(a), -np.cos(a)])
    return n


def _plane_depth(normal: np.ndarray) -> np.ndarray:
    """(H, W) float64 depth of the plane with ``normal`` through (0, 0, DISTANCE_M)."""
    return (normal @ np.array([0.0, 0.0, DISTANCE_M])) / (RAYS @ normal)


def _mask(width: int, height: int) -> tuple[np.ndarray, slice, slice]:
    rows = slice(K.height // 2 - height // 2, K.height // 2 - height // 2 + height)
    cols = slice(K.width // 2 - width // 2, K.width // 2 - width // 2 + width)
    mask = np.zeros((K.height, K.width), bool)
    mask[rows, cols] = True
    return mask, rows, cols


def _spill(mask: np.ndarray, rows: slice, cols: slice, fraction: float, pattern: str,
           rng: np.random.Generator) -> np.ndarray:
    """Return the mask's pixels that lie on the other surface: ``fraction`` of them, as ``pattern``."""
    spill = np.zeros_like(mask)
    count = int(round(fraction * mask.sum()))
    height, width = rows.stop - rows.start, cols.stop - cols.start
    if pattern == "scattered":
        spill.flat[rng.choice(np.flatnonzero(mask), count, replace=False)] = True
    elif pattern == "end":  # past the long side's end, as past a knife's tip
        if width >= height:
            spill[rows, cols.stop - int(np.ceil(count / height)):cols.stop] = True
        else:
            spill[rows.stop - int(np.ceil(count / width)):rows.stop, cols] = True
    else:  # along one long side
        if width >= height:
            spill[rows.stop - int(np.ceil(count / width)):rows.stop, cols] = True
        else:
            spill[rows, cols.stop - int(np.ceil(count / height)):cols.stop] = True
    return spill & mask


def _off_plane(points: np.ndarray, normal: np.ndarray) -> np.ndarray:
    """(N,) each point's depth minus the true plane's depth along its ray (metres)."""
    p = points.astype(np.float64)
    rays = p / p[:, 2:3]
    return p[:, 2] - (normal @ np.array([0.0, 0.0, DISTANCE_M])) / (rays @ normal)


def _angle(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.degrees(np.arccos(np.clip(a @ b / np.linalg.norm(a) / np.linalg.norm(b), -1.0, 1.0))))


@pytest.mark.parametrize("noise", [0.0, NOISE_M], ids=["exact", "noisy"])
@pytest.mark.parametrize("axis", ["x", "y"])
@pytest.mark.parametrize("slant", SLANTS)
@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_spilled_pixels_cannot_turn_the_fit(size, slant, axis, noise):
    width, height = size
    normal = _normal(slant, axis)
    mask, rows, cols = _mask(width, height)
    rng = np.random.default_rng([width, height, int(slant), ord(axis), int(noise * 1e4)])
    true_depth = _plane_depth(normal)
    measured = (true_depth + rng.normal(0.0, noise, true_depth.shape) if noise else true_depth).astype(np.float32)
    clean = target_geometry(mask, register_depth(measured, K, mask.shape))
    assert clean.has_pose and not clean.edge_on and _angle(clean.normal, normal) < 2.0
    depth = np.empty_like(measured)
    for fraction in FRACTIONS:
        for offset in OFFSETS:
            for pattern in PATTERNS:
                spill = _spill(mask, rows, cols, fraction, pattern, rng)
                target = mask & ~spill
                depth[:] = measured
                depth[spill] += offset
                bound = register_depth(depth, K, mask.shape)
                case = f"{pattern} {spill.sum() / mask.sum():.1%} at {offset * 100:+.0f} cm"
                g = target_geometry(mask, bound)
                assert g.has_pose and not g.edge_on, (case, g.reason)
                assert _angle(g.normal, normal) < 2.0, (case, _angle(g.normal, normal))
                # the depth extent is the noise's, as without the spill
                assert g.extents[2] <= clean.extents[2] + 1e-3 and g.extents[2] <= 8 * noise + 1e-3, \
                    (case, g.extents[2])
                # the members are exactly the target's pixels: none spilled, none lost
                assert g.valid_points == int(target.sum()), case
                assert g.inlier_fraction == pytest.approx(1.0 - spill.sum() / mask.sum()), case
                vs, us = np.nonzero(target)
                on_target = bound.camera.back_project(us, vs, depth[vs, us])
                np.testing.assert_allclose(g.centroid, on_target.mean(axis=0), atol=1e-6, err_msg=case)
                assert np.abs(_off_plane(g.points, normal)).max() < 0.015, case  # the cloud as sent


def test_the_issue_case_a_slanted_strip_with_a_tenth_of_a_metre_spill():
    """
    A 160x10 px strip slanted 30 degrees along its length at 1 m, 4.8 % of its pixels 10 cm nearer.

    The former fit took the strip's width for the normal (30 degrees off, a box 285 mm
    deep, flagged edge-on); now it is the plane, flat, without the spilled pixels.
    """
    normal = _normal(30.0, "x")
    mask, rows, cols = _mask(160, 10)
    depth = _plane_depth(normal) / DISTANCE_M  # the same plane moved out to 1 m, as in the issue
    spill = _spill(mask, rows, cols, 0.048, "scattered", np.random.default_rng(0))
    depth[spill] -= 0.10
    g = target_geometry(mask, register_depth(depth.astype(np.float32), K, mask.shape), EVERY_POINT)
    assert g.has_pose and not g.edge_on
    assert _angle(g.normal, normal) < 0.1 and g.extents[2] < 1e-3
    assert g.valid_points == int((mask & ~spill).sum()) and g.inlier_fraction == pytest.approx(1 - 0.048, abs=1e-3)


def test_no_pose_where_no_plane_holds_most_of_the_mask():
    """
    Two or three surfaces in one mask.

    The larger one's pose when it holds most of the mask (its share says how much),
    none when no plane does, and the reason says so.
    """
    normal = _normal(20.0, "x")
    mask, rows, cols = _mask(90, 60)
    base = _plane_depth(normal)
    depth = base.copy()
    third = np.zeros_like(mask)
    third[rows, cols.start + 60:cols.stop] = True  # the right third is 10 cm behind
    depth[third] += 0.10
    g = target_geometry(mask, register_depth(depth.astype(np.float32), K, mask.shape))
    assert g.has_pose and _angle(g.normal, normal) < 0.5
    assert g.inlier_fraction == pytest.approx(2 / 3, abs=0.01)
    thirds = depth.copy()
    thirds[rows, cols.start + 30:cols.start + 60] += 0.20  # three surfaces of a third each
    g = target_geometry(mask, register_depth(thirds.astype(np.float32), K, mask.shape))
    assert not g.has_pose and g.reason.startswith("no plane holds most of the points"), g.reason
    assert np.isnan(g.centre).all() and 0.3 < g.inlier_fraction < 0.4
    rng = np.random.default_rng(3)  # no surface at all: depth scattered over half a metre
    scattered = np.where(mask, rng.uniform(0.6, 1.1, mask.shape), base)
    g = target_geometry(mask, register_depth(scattered.astype(np.float32), K, mask.shape))
    assert not g.has_pose and "no plane holds most" in g.reason


def test_a_narrow_strip_lying_flat_is_not_taken_for_edge_on():
    """
    The issue's failure without a spill to cause it.

    A strip 10 pixels wide, slanted along or across its length, noisy, keeps its
    fitted normal.
    """
    rng = np.random.default_rng(5)
    for width, height in [(160, 10), (10, 160), (240, 10)]:
        for slant, axis in [(0.0, "x"), (60.0, "x"), (60.0, "y"), (45.0, "x")]:
            normal = _normal(slant, axis)
            mask, _, _ = _mask(width, height)
            depth = _plane_depth(normal) + rng.normal(0.0, NOISE_M, mask.shape)
            g = target_geometry(mask, register_depth(depth.astype(np.float32), K, mask.shape))
            assert g.has_pose and not g.edge_on, (width, height, slant, axis)
            assert _angle(g.normal, normal) < 2.0, (width, height, slant, axis, _angle(g.normal, normal))


def test_the_fit_is_deterministic():
    normal = _normal(30.0, "y")
    mask, rows, cols = _mask(60, 60)
    rng = np.random.default_rng(9)
    depth = _plane_depth(normal) + rng.normal(0.0, NOISE_M, mask.shape)
    depth[_spill(mask, rows, cols, 0.15, "scattered", rng)] += 0.05
    bound = register_depth(depth.astype(np.float32), K, mask.shape)
    first, second = target_geometry(mask, bound), target_geometry(mask, bound)
    np.testing.assert_array_equal(first.rotation, second.rotation)
    np.testing.assert_array_equal(first.points, second.points)
