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
Target geometry (m2sa_core.geometry.target) against the synthetic world's 3-D ground truth.

For object and part targets of seeded scenes: centroid error (mm), normal angle error
(degrees) and box size error (mm, the true visible points' extents on the box's own
axes), clean and with 20 % holes (NaN, and 0 through a 16UC1 message), Gaussian noise
(sigma 3 mm), mixed pixels in a 2-px ring at the mask border, and all three at once.
The bounds are medians and 90th percentiles over all targets, a little above what the
code measures (figures in bench/RESULTS.md), so a regression fails them. With mixed
pixels a few thin handles (3-5 px across, every pixel in the 2-px mixed ring) have no
plane that holds most of their depth and get no pose rather than a tilted one. Plus the
rules on analytic planes: edge-on, a line, too few points, flying pixels, mismatched
depth. Spilled masks: tests/core/test_plane_spill.py.
"""

from __future__ import annotations

from m2sa_core.camera import Intrinsics
from m2sa_core.data.synthetic.depth import render_depth
from m2sa_core.data.synthetic.depth_noise import add_holes, add_noise, bleed_edges
from m2sa_core.data.synthetic.scene import render_layout
from m2sa_core.evaluation.geometry_errors import geometry_errors
from m2sa_core.geometry.depth_encoding import to_16uc1
from m2sa_core.geometry.registered_depth import DepthMismatch, register_depth
from m2sa_core.geometry.target import GeometryParams, target_geometry
from m2sa_core.geometry.voxel_grid import voxel_downsample
import numpy as np
import pytest

SEEDS = range(16)


def _degrade(depth, mask, rng, condition: str):
    if condition in ("bleed", "all"):
        depth = bleed_edges(depth, mask, rng, width_px=2)
    if condition in ("noise", "all"):
        depth = add_noise(depth, rng, 0.003)
    if condition in ("holes", "all"):
        depth = add_holes(depth, rng, 0.2)
    if condition == "holes16":  # 0 = no depth, through 16UC1 millimetres and back (REP 118)
        mm = to_16uc1(add_holes(depth, rng, 0.2, invalid=0.0))
        depth = np.where(mm > 0, mm.astype(np.float32) / 1000.0, np.float32(np.nan)).astype(np.float32)
    return depth


def measure(condition: str, size: int = 256, seeds=SEEDS) -> dict[str, np.ndarray]:
    """Per level ("object", "part"): rows (centroid mm, normal deg, size mm, has_pose)."""
    rows: dict[str, list] = {"object": [], "part": []}
    for seed in seeds:
        layout, scene = render_layout(np.random.default_rng(seed), size)
        sd = render_depth(scene, np.random.default_rng(10_000 + seed), horizon=layout.horizon)
        k = sd.camera
        rng = np.random.default_rng(seed)
        for _index, part, mask, truth in sd.visible_targets(scene):
            depth = _degrade(sd.depth, mask, rng, condition)
            g = target_geometry(mask, register_depth(depth, k, depth.shape))
            level = "part" if part else "object"
            if not g.has_pose:
                rows[level].append((np.nan, np.nan, np.nan, 0.0))
                continue
            e = geometry_errors(g.centroid, g.rotation, g.extents, truth.centroid, truth.normal, truth.points)
            rows[level].append((e.centroid_mm, e.normal_deg, e.size_mm, 1.0))
    return {level: np.array(r) for level, r in rows.items()}


def _stats(rows: np.ndarray) -> dict[str, float]:
    ok = rows[:, 3] > 0
    return {"pose": float(ok.mean()),
            **{f"{name}_{q}": float(np.percentile(rows[ok, col], q))
               for col, name in enumerate(("centroid", "normal", "size")) for q in (50, 90)}}


# (condition, level): (median centroid mm, p90 centroid mm, median normal deg, p90 normal deg,
#                      median size mm, p90 size mm, share of targets with a pose)
BOUNDS = {
    ("clean", "object"): (0.5, 0.5, 2.0, 3.0, 0.5, 0.5, 1.0),  # the normal: relief tilts the best plane ~1 deg
    ("clean", "part"): (0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 1.0),
    ("holes", "object"): (1.5, 3.0, 2.0, 3.0, 1.0, 5.0, 1.0),
    ("holes", "part"): (1.5, 3.0, 0.5, 1.0, 1.0, 3.0, 1.0),
    ("holes16", "object"): (1.5, 3.0, 2.0, 3.0, 1.0, 5.0, 1.0),
    ("holes16", "part"): (1.5, 3.0, 0.5, 1.0, 1.0, 3.0, 1.0),
    ("noise", "object"): (0.5, 1.0, 2.0, 4.0, 4.0, 8.0, 1.0),
    ("noise", "part"): (0.5, 1.0, 1.5, 6.0, 4.0, 8.0, 1.0),
    ("bleed", "object"): (6.0, 14.0, 2.0, 3.0, 8.0, 18.0, 1.0),
    # Thin handles wholly in the mixed ring: no pose (module doc), the rest exact in the normal.
    ("bleed", "part"): (3.5, 8.0, 0.5, 1.0, 6.0, 20.0, 0.93),
    ("all", "object"): (6.0, 14.0, 2.0, 4.0, 8.0, 18.0, 1.0),
    ("all", "part"): (4.0, 8.0, 1.5, 6.0, 6.0, 20.0, 0.93),
}


@pytest.mark.parametrize("condition", ["clean", "holes", "holes16", "noise", "bleed", "all"])
def test_against_ground_truth(condition):
    measured = measure(condition)
    for level, rows in measured.items():
        assert len(rows) > (60 if level == "part" else 30)
        s = _stats(rows)
        c50, c90, n50, n90, s50, s90, pose = BOUNDS[(condition, level)]
        figures = f"{condition} {level}: " + ", ".join(f"{k} {v:.2f}" for k, v in s.items())
        assert s["pose"] >= pose, figures
        assert s["centroid_50"] <= c50 and s["centroid_90"] <= c90, figures
        assert s["normal_50"] <= n50 and s["normal_90"] <= n90, figures
        assert s["size_50"] <= s50 and s["size_90"] <= s90, figures


def test_camera_resolution_parts_are_tighter():
    """At 480x480 (a camera's resolution) parts span more pixels: noise hurts them less."""
    s = _stats(measure("all", size=480, seeds=range(4))["part"])
    assert s["pose"] == 1.0 and s["centroid_50"] <= 3.0 and s["centroid_90"] <= 6.0, s
    assert s["normal_50"] <= 1.5 and s["normal_90"] <= 6.0 and s["size_50"] <= 7.0, s


# --- the rules, on analytic planes ---------------------------------------------------------

K = Intrinsics(fx=500.0, fy=500.0, cx=319.5, cy=239.5, width=640, height=480)


def _plane_depth(normal: np.ndarray, point: np.ndarray, k: Intrinsics = K) -> np.ndarray:
    """Depth (H, W) of the plane through ``point`` with ``normal`` (optical frame)."""
    u, v = np.meshgrid(np.arange(k.width), np.arange(k.height))
    rays = np.stack([(u - k.cx) / k.fx, (v - k.cy) / k.fy, np.ones(u.shape)], axis=-1)
    return ((normal @ point) / (rays @ normal)).astype(np.float32)


def _square(r0=200, r1=280, c0=280, c1=360) -> np.ndarray:
    mask = np.zeros((K.height, K.width), bool)
    mask[r0:r1, c0:c1] = True
    return mask


def test_a_tilted_square_gets_its_normal_box_and_quaternion():
    normal = np.array([0.3, -0.2, -1.0])
    normal /= np.linalg.norm(normal)
    depth = _plane_depth(normal, np.array([0.0, 0.0, 1.0]))
    g = target_geometry(_square(), register_depth(depth, K, depth.shape))
    assert g.has_pose and not g.edge_on and g.reason == ""
    assert np.degrees(np.arccos(np.clip(g.normal @ normal, -1.0, 1.0))) < 0.05
    r = g.rotation
    np.testing.assert_allclose(r.T @ r, np.eye(3), atol=1e-9)
    assert np.linalg.det(r) == pytest.approx(1.0)
    assert g.normal @ g.centroid < 0 and r[0, 0] > 0  # faces the camera; x points image-right
    q = g.quaternion
    x, y, z, w = q
    rq = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                   [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                   [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])
    np.testing.assert_allclose(rq, r, atol=1e-9)
    assert g.extents[2] < 1e-4  # flat
    assert 0.15 < g.extents[0] < 0.26 and 0.15 < g.extents[1] < 0.26  # ~80 px at ~1 m, stretched by the tilt
    on_axes = g.points.astype(np.float64) @ r  # voxel means lie inside the box
    centre = g.centre @ r
    assert (np.abs(on_axes - centre) <= g.extents / 2 + 1e-6).all()
    assert g.points.dtype == np.float32 and g.points.shape[1] == 3
    assert g.valid_points == 80 * 80


def test_flying_pixels_and_background_in_the_mask_are_dropped():
    depth = _plane_depth(np.array([0.0, 0.0, -1.0]), np.array([0.0, 0.0, 1.0]))
    clean = target_geometry(_square(), register_depth(depth, K, depth.shape))
    rng = np.random.default_rng(0)
    dirty = depth.copy()
    mask = _square()
    flying = mask & (rng.random(mask.shape) < 0.1)
    dirty[flying] = rng.uniform(1.1, 3.0, int(flying.sum()))  # background seen through / flying
    g = target_geometry(mask, register_depth(dirty, K, dirty.shape))
    assert np.linalg.norm(g.centroid - clean.centroid) < 1e-3
    assert np.degrees(np.arccos(np.clip(g.normal @ clean.normal, -1.0, 1.0))) < 0.5
    assert g.valid_points == int((mask & ~flying).sum())
    assert np.abs(g.points[:, 2] - 1.0).max() < 1e-3


def test_edge_on_falls_back_to_the_viewing_ray():
    view = np.array([0.0, 0.0, 1.0])
    normal = np.array([np.sin(np.deg2rad(85)), 0.0, -np.cos(np.deg2rad(85))])  # 85 deg from the ray
    depth = _plane_depth(normal, view)
    g = target_geometry(_square(c0=300, c1=340), register_depth(depth, K, depth.shape))
    assert g.has_pose and g.edge_on
    np.testing.assert_allclose(g.normal, -g.centroid / np.linalg.norm(g.centroid), atol=1e-9)


def test_a_line_gets_the_normal_it_allows_that_faces_the_camera():
    """
    A row of pixels (a handle a pixel wide) lies in its surface but leaves the tilt about itself free.

    Z is the reversed viewing ray made perpendicular to the line, which on a surface
    slanted along the line is its normal (the viewing ray alone is 45 degrees off).
    """
    line = np.zeros((K.height, K.width), bool)
    line[240, 200:440] = True
    for slant in (0.0, 45.0):
        a = np.deg2rad(slant)
        normal = np.array([np.sin(a), 0.0, -np.cos(a)])
        depth = _plane_depth(normal, np.array([0.0, 0.0, 1.0]))
        g = target_geometry(line, register_depth(depth, K, depth.shape))
        assert g.has_pose and g.edge_on and g.extents[0] > 0.2
        assert np.degrees(np.arccos(np.clip(g.normal @ normal, -1.0, 1.0))) < 1.0, slant
        assert abs(g.rotation[:, 0] @ normal) < 1e-6  # x runs along the line


def test_no_pose_without_enough_valid_depth():
    depth = np.full((K.height, K.width), np.nan, np.float32)
    g = target_geometry(_square(), register_depth(depth, K, depth.shape))
    assert not g.has_pose and "valid depth pixels" in g.reason and len(g.points) == 0
    assert np.isnan(g.centroid).all() and np.isnan(g.extents).all()
    depth[200:202, 280:284] = 1.0  # 8 valid pixels < min_points
    g = target_geometry(_square(), register_depth(depth, K, depth.shape))
    assert not g.has_pose and len(g.points) == 8
    assert not target_geometry(np.zeros(depth.shape, bool), register_depth(depth, K, depth.shape)).has_pose
    zero = np.zeros((K.height, K.width), np.float32)  # 16UC1's "no depth", not converted to NaN
    assert not target_geometry(_square(), register_depth(zero, K, zero.shape)).has_pose


def test_mismatched_depth_is_refused():
    depth = np.ones((K.height, K.width), np.float32)
    with pytest.raises(DepthMismatch, match="depth is in frame 'camera_depth_optical_frame' but the colour "
                                            "image is in 'camera_color_optical_frame'"):
        register_depth(depth, K, (480, 640), "camera_depth_optical_frame", "camera_color_optical_frame")
    assert register_depth(depth, K, (480, 640), "a", "b", allow_frame_mismatch=True).frame_id == "a"
    assert register_depth(depth, K, (480, 640), "", "camera_color_optical_frame").frame_id
    with pytest.raises(DepthMismatch, match="depth image is 640x480 but the colour image is 1280x720"):
        register_depth(depth, K, (720, 1280))
    small = Intrinsics(fx=500.0, fy=500.0, cx=159.5, cy=119.5, width=320, height=240)
    with pytest.raises(DepthMismatch, match="camera_info is 320x240 but depth is 640x480"):
        register_depth(depth, small, (480, 640))
    with pytest.raises(DepthMismatch, match="single-channel"):
        register_depth(np.ones((480, 640, 3), np.float32), K, (480, 640))
    bound = register_depth(depth, K, (480, 640))
    with pytest.raises(DepthMismatch, match="mask 320x240 and depth 640x480 differ in size"):
        target_geometry(np.ones((240, 320), bool), bound)
    assert isinstance(DepthMismatch("x"), ValueError)


def test_voxel_downsampling():
    rng = np.random.default_rng(1)
    points = rng.uniform(0, 0.1, (5000, 3))
    assert np.array_equal(voxel_downsample(points, 0.0), points.astype(np.float32))
    down = voxel_downsample(points, 0.02)
    assert down.dtype == np.float32 and 100 <= len(down) <= 216  # at most 6^3 occupied voxels
    cells = np.floor(points / 0.02).astype(int)
    first = cells[0]
    np.testing.assert_allclose(down, voxel_downsample(points[::-1], 0.02), atol=1e-6)  # order-free
    in_first = (cells == first).all(axis=1)
    mean = points[in_first].mean(axis=0)
    assert np.min(np.linalg.norm(down - mean, axis=1)) < 1e-6
    assert len(voxel_downsample(np.empty((0, 3)), 0.005)) == 0
    depth = _plane_depth(np.array([0.0, 0.0, -1.0]), np.array([0.0, 0.0, 1.0]))
    every = target_geometry(_square(), register_depth(depth, K, depth.shape), GeometryParams(voxel_m=0.0))
    coarse = target_geometry(_square(), register_depth(depth, K, depth.shape))
    assert len(every.points) == 6400 and len(coarse.points) < len(every.points) / 4
