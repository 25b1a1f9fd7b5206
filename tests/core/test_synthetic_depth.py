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
The synthetic world's registered depth, 3-D ground truth and sensor artefacts.

The depth and truth are m2sa_core.data.synthetic.depth's, the artefacts depth_noise's:
deterministic per seed, consistent with the masks
(occluders in front, nothing behind the table or the wall), ground truth that is the
rendered depth back-projected, and the RGB and masks untouched.
"""

from __future__ import annotations

import hashlib

from m2sa_core.camera import Intrinsics
from m2sa_core.data.synthetic.depth import RELIEF_MM, render_depth
from m2sa_core.data.synthetic.depth_noise import add_holes, add_noise, bleed_edges
from m2sa_core.data.synthetic.scene import render_layout
import numpy as np
import pytest

SEEDS = range(12)


def _scene(seed: int, size: int = 256):
    layout, scene = render_layout(np.random.default_rng(seed), size)
    return layout, scene, render_depth(scene, np.random.default_rng(10_000 + seed), horizon=layout.horizon)


def _digest(scene) -> str:
    h = hashlib.sha256(scene.image.tobytes())
    for o in scene.objects:
        for m in (o.amodal, o.visible, *o.parts_amodal.values(), *o.parts_visible.values()):
            h.update(np.packbits(m).tobytes())
    return h.hexdigest()


def test_depth_is_deterministic_per_seed_and_leaves_rgb_and_masks_alone():
    layout, scene = render_layout(np.random.default_rng(3))
    before = _digest(scene)
    a = render_depth(scene, np.random.default_rng(7), horizon=layout.horizon)
    b = render_depth(scene, np.random.default_rng(7), horizon=layout.horizon)
    c = render_depth(scene, np.random.default_rng(8), horizon=layout.horizon)
    assert _digest(scene) == before
    assert a.depth.tobytes() == b.depth.tobytes() and a.camera == b.camera
    assert not np.array_equal(a.depth, c.depth)
    # The scene's own rng draws are not touched: the same seed renders the same bytes.
    assert _digest(render_layout(np.random.default_rng(3))[1]) == before


@pytest.mark.parametrize("seed", SEEDS)
def test_depth_agrees_with_the_masks_and_the_ground_truth(seed):
    layout, scene, sd = _scene(seed)
    depth, cam, table = sd.depth, sd.camera, sd.table
    assert depth.dtype == np.float32 and depth.shape == scene.image.shape[:2]
    assert np.isfinite(depth).all() and (depth > 0).all()
    assert sd.occlusion_conflicts == 0
    rays = cam.rays()
    background = table.depth_along(rays)
    anything = np.zeros(depth.shape, bool)
    for i, obj in enumerate(scene.objects):
        anything |= obj.visible
        truth = sd.truth(i)
        assert truth.pixels == int(obj.visible.sum())
        # The rendered depth, back-projected, is the ground truth's surface (float32 precision).
        vs, us = np.nonzero(obj.visible)
        np.testing.assert_allclose(rays[vs, us] * depth[vs, us, None], truth.points, atol=2e-6 * 2)
        assert (depth[obj.visible] <= background[obj.visible] + 1e-6).all()  # in front of table and wall
        # The box: orthonormal, right-handed, z = the normal, facing the camera.
        axes = truth.box_axes
        np.testing.assert_allclose(axes.T @ axes, np.eye(3), atol=1e-9)
        assert np.linalg.det(axes) == pytest.approx(1.0)
        np.testing.assert_allclose(axes[:, 2], truth.normal)
        assert truth.normal @ truth.centroid < 0
        coords = (truth.points - truth.box_centre) @ axes
        np.testing.assert_allclose(coords.max(0) - coords.min(0), truth.extents, atol=1e-9)
        np.testing.assert_allclose(coords.max(0) + coords.min(0), 0.0, atol=1e-9)
        # Upright-ish standees on the table: the face's normal is not the table's, and
        # the object's lowest point is on or above the table.
        assert abs(truth.normal @ table.up) < np.sin(np.deg2rad(81))
        assert (truth.points @ table.up + table.height_m).min() > -1e-9
        # Hidden pixels: the occluder is in front of the face it hides.
        for part, part_truth in sd.objects[i].parts.items():
            if part_truth is None:
                continue
            relief = sd.objects[i].relief_m[part]
            lo, hi = RELIEF_MM.get(part, (0.0, 0.0))
            assert relief == 0.0 or lo / 1000 - 1e-12 <= relief <= hi / 1000 + 1e-12
            offset = (part_truth.points - sd.objects[i].contact) @ sd.objects[i].normal
            np.testing.assert_allclose(offset, relief, atol=1e-9)  # the part's patch sits at its relief
    # Everything else is table (its plane) or wall.
    rest = ~anything
    points = rays[rest] * depth[rest, None].astype(np.float64)
    on_table = np.abs(points @ table.up + table.height_m) < 1e-4 * np.maximum(1, points[:, 2])
    on_wall = np.abs(points @ table.forward - table.wall_m) < 1e-4 * np.maximum(1, points[:, 2])
    assert (on_table | on_wall).all()
    assert on_table.mean() > 0.3


def test_camera_and_table_are_plausible_for_a_tabletop():
    _, scene, sd = _scene(0)
    cam = sd.camera
    assert cam.k[0] == cam.fx and cam.k[4] == cam.fy and cam.k[2] == cam.cx and cam.k[5] == cam.cy and cam.k[8] == 1.0
    hfov = np.degrees(2 * np.arctan(cam.width / 2 / cam.fx))
    assert 55 <= hfov <= 65
    assert 30 <= sd.table.pitch_deg <= 42 and 0.45 <= sd.table.height_m <= 0.65
    depths = [sd.truth(i).centroid[2] for i in range(len(scene.objects))]
    assert all(0.2 < z < 2.5 for z in depths)
    with pytest.raises(ValueError, match="camera is 10x10"):
        render_depth(scene, np.random.default_rng(0), camera=Intrinsics(10, 10, 5, 5, 10, 10))


def test_any_resolution_and_sequence_frames():
    from m2sa_core.data.synthetic.sequences import render_sequence

    seq = render_sequence(np.random.default_rng(4), n_frames=3, motion="mixed", size=256)
    for frame in seq.frames:
        sd = render_depth(frame, np.random.default_rng(1))
        assert sd.occlusion_conflicts == 0 and np.isfinite(sd.depth).all()
    _, big, sd = _scene(5, size=480)
    assert sd.depth.shape == (480, 480) and sd.camera.width == 480


def test_holes_noise_and_bleeding():
    _, scene, sd = _scene(2)
    rng = np.random.default_rng(0)
    holes = add_holes(sd.depth, rng, 0.2)
    assert np.isnan(holes).mean() == pytest.approx(0.2, abs=0.01)
    zeros = add_holes(sd.depth, rng, 0.2, invalid=0.0)
    assert (zeros == 0).mean() == pytest.approx(0.2, abs=0.01)
    noisy = add_noise(holes, rng, 0.003)
    assert np.array_equal(np.isnan(noisy), np.isnan(holes))
    assert np.nanstd(noisy - holes) == pytest.approx(0.003, rel=0.05)
    mask = scene.objects[0].visible
    bled = bleed_edges(sd.depth, mask, rng, width_px=2)
    changed = bled != sd.depth
    assert changed.any() and not (changed & ~mask).any()
    assert (bled[changed] > sd.depth[changed]).all()  # pulled towards the background behind
    assert np.array_equal(bleed_edges(sd.depth, mask, rng, width_px=0), sd.depth)
    with pytest.raises(ValueError):
        add_holes(sd.depth, rng, 1.5)
