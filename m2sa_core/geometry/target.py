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
A target's 3-D points, oriented box and surface normal from its mask and registered depth.

A grasp planner starts from the target's point cloud; a press planner needs a point and
an approach direction. From a visible mask (H, W bool), a depth image registered to the
colour image (H, W metres; NaN or 0 = no depth) and the colour camera's model
(camera_model.py: P for a rectified image, K and D for a raw one), :func:`target_geometry`
computes, in the colour camera's optical frame (REP 103: x right, y down, z forward),
metres. Only the mask's bounding box is read (cost follows the target's size, not the
image's). The rules:

1. **Core pixels.** The mask is eroded by up to ``erosion_px`` (2) pixels - the largest
   erosion that keeps ``min_points`` pixels and a third of the mask - so the mixed pixels
   at the border (depth between the target and the background) stay out of the fit; a
   thin target (a pipe, a handle) keeps more of its pixels rather than none. Depth that
   is NaN, inf or <= 0 is a hole and is skipped everywhere.
2. **Plane.** The core's points get a robust plane (plane_fit.py): MSAC, then a
   biweighted least-squares refit that no pixel the first plane rejected can tilt. A
   pixel is on the plane when its depth is within a band of it along its ray, sized from
   the target's own depth: ``inlier_sigmas`` (4) times its noise, measured twice - from
   second differences of inverse depth along the core's rows and columns, and from the
   first plane's residuals - and the larger taken, at least ``band_floor_m`` (12 mm) and
   at most the sensor model's band, ``inlier_sigmas`` times ``max(3 mm, 3 mm * z^2 / 1
   m^2)`` (``noise``: 12 mm up to 1 m, 27 mm at 1.5 m, 48 mm at 2 m). So exact or quiet
   depth keeps a 12 mm band at any range, and a neighbouring surface 3-7 cm nearer or
   farther stays out even at 2.5 m, where the sensor model alone would allow 75 mm.
   Pixels on another surface - a mask spilled 3 to 15 cm nearer or farther, flying
   pixels, background seen through a hole - are outliers whatever the target's slant.
3. **Most of the points.** When the plane holds no more than ``min_inlier_fraction`` (half)
   of the core's points, no plane describes the target (two surfaces of a corner, a
   sphere, a mask mostly on something else): no pose, and ``reason`` says so. A pose is
   never guessed from a minority. ``inlier_fraction`` is the share of all the mask's
   valid depth points on the plane (the border ring counts: a planner may want more than
   half, or a different share for thin targets whose ring is most of the mask), after
   rule 4; ``band_m`` is the band at the centroid's depth.
4. **Members.** The target's points are *all* valid mask pixels - the border ring too -
   on the plane (within its band): a border pixel whose depth agrees with the surface
   counts, a mixed or spilled one does not. Where the noise makes the band wider than
   the gap to a neighbouring surface (a D435 at 2 m: the sensor model's 48 mm against a
   neighbour 3-7 cm away), depth alone cannot
   tell the two apart, so a second plane is fitted to the pixels off the plane; when it
   holds most of them, a pixel within ``other_surface_px`` (1) of its inliers that is
   nearer to it than to the target's plane is the neighbour's, not the target's. That
   takes out most of such a neighbour's pixels inside the band (and lowers
   ``inlier_fraction`` towards the target's true share) at the cost of a few of the
   target's own noisy pixels beside it; what remains inside the band still counts as
   the target's (tests/core/test_plane_band.py measures how much). ``points`` (the
   cloud) are the members voxel-downsampled (``voxel_m`` = 5 mm, the mean point of each
   occupied voxel; 0 keeps every member), float32 (N, 3); ``centroid`` is the members'
   mean (the visible surface's centre: the press point). Nothing off the plane enters
   the centroid, the box or the cloud.
5. **Box.** z axis = the plane's normal, facing the camera: the approach direction;
   x = the principal axis of the members projected on the plane (signed so that it
   points image-right, or image-down when it is vertical), y = z x x. Extents are the
   ``extent_percentiles`` range of the members' coordinates on each axis, by default
   0-100 (min-max): the members are already outlier-free, and on the synthetic ground
   truth trimming 0.5 % at each end made the extents 2-3 times worse (bench/RESULTS.md).
   The box centre is the middle of that range (not the centroid).
6. **When the normal is not measured** (``edge_on`` set; ``has_pose`` stays true: the
   centroid and extents remain good), z is chosen instead of fitted:

   * *seen edge-on*: the plane's normal is more than ``edge_on_deg`` (75) degrees from
     the viewing ray (a strip or a board seen on its edge: its face cannot be reached
     from here, and depth at such grazing angles is mostly mixed pixels): z is the
     reversed viewing ray through the centroid (approach along the line of sight);
   * *a line*: the members span a line, not a surface (a handle a pixel or two wide, a
     row of pixels): the tilt of the plane about the line is not measured - its standard
     error, ``sqrt(off / (n across))`` for n members with variance ``across`` across the
     line in the plane and ``off`` off it, is over ``max_tilt_deg`` (5), or they spread
     less than ``min_spread_m`` (1 mm) across it. The surface contains the line but any
     tilt about it fits, so z is the reversed viewing ray made perpendicular to the line
     (of the normals the line allows, the one that faces the camera most), x the line;
   * *no structure*: the tilt along the line is not measured either (a patch of a few
     pixels as noisy as it is large): z is the reversed viewing ray.

   A narrow strip lying flat is none of these: its width, seen by many pixels, fixes the
   tilt (a ratio of spreads, as a PCA would judge it, does not: it ignores how many pixels
   measured them), and the robust fit keeps a spill from making it look edge-on.
7. **No pose** (``has_pose`` false, ``reason`` says why, box fields NaN) when fewer than
   ``min_points`` (10) valid points remain at any step, or rule 3; ``points`` then holds
   whatever valid points there were.

**Amodal targets** (a complete mask, hidden parts included): only the visible part has
depth, so the caller passes the *visible* mask and the points, box and normal describe
the visible surface only (the box does not guess the hidden part).

For a raw image whose camera_info has a rectification R (a stereo camera's), everything
is computed in the camera's own frame and turned by R at the end (camera_model.py).
Pure numpy / OpenCV / SciPy, no ROS, so it is unit-tested against the synthetic world's
ground truth (m2sa_core.data.synthetic.depth) and benchmarked alone
(bench/bench_target_geometry.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import cv2
from m2sa_core.geometry.plane_fit import BandRule, DepthNoise, fit_plane, inverse_depth_noise, Plane, RansacParams
from m2sa_core.geometry.registered_depth import DepthMismatch, RegisteredDepth
from m2sa_core.geometry.voxel_grid import voxel_downsample
import numpy as np
from scipy.spatial.transform import Rotation


@dataclass(frozen=True)
class GeometryParams:
    """The rules' constants (see the module docstring for what each one does)."""

    voxel_m: float = 0.005
    erosion_px: int = 2
    min_points: int = 10
    noise: DepthNoise = DepthNoise()  # the sensor model: the widest the band may be
    inlier_sigmas: float = 4.0
    band_floor_m: float = 0.012  # the narrowest (plane_fit.BandRule says why 12 mm)
    other_surface_px: int = 1  # reach of the second plane's pixels (rule 4); 0: no second plane
    min_inlier_fraction: float = 0.5
    ransac: RansacParams = RansacParams()
    extent_percentiles: tuple[float, float] = (0.0, 100.0)
    edge_on_deg: float = 75.0
    max_tilt_deg: float = 5.0
    min_spread_m: float = 0.001
    max_fit_points: int = 8000  # the refit and the statistics on at most ~this many, strided

    @property
    def band_rule(self) -> BandRule:
        """How wide the plane's inlier band is (plane_fit.py): from the data, within the floor and the sensor model."""
        return BandRule(self.noise, self.inlier_sigmas, self.band_floor_m)


@dataclass(frozen=True)
class TargetGeometry:
    """
    One target's geometry in the optical frame (metres).

    Without a pose the box fields are NaN and ``rotation`` the identity.
    """

    has_pose: bool
    points: np.ndarray  # (N, 3) float32, voxel-downsampled inliers
    centroid: np.ndarray  # (3,) mean of the inliers: the press point
    centre: np.ndarray  # (3,) box centre
    rotation: np.ndarray  # (3, 3) box axes as columns x, y, z; z = the normal, towards the camera
    extents: np.ndarray  # (3,) box size along x, y, z
    edge_on: bool = False  # z is chosen, not a fitted normal (module doc, rule 6)
    valid_points: int = 0  # inliers the box was fitted to
    reason: str = ""  # why there is no pose
    erosion_px: int = field(default=0)
    inlier_fraction: float = 0.0  # share of the mask's valid depth points on the plane (rule 3)
    band_m: float = float("nan")  # the inlier band at the centroid's depth: nearer surfaces are not told apart

    @property
    def normal(self) -> np.ndarray:
        """(3,) unit surface normal pointing towards the camera (the approach direction)."""
        return self.rotation[:, 2]

    @property
    def quaternion(self) -> np.ndarray:
        """(4,) x, y, z, w - geometry_msgs/Quaternion's order."""
        return Rotation.from_matrix(self.rotation).as_quat()


def _no_pose(points: np.ndarray, reason: str, valid: int = 0, inlier_fraction: float = 0.0) -> TargetGeometry:
    nan = np.full(3, np.nan)
    return TargetGeometry(False, points.astype(np.float32).reshape(-1, 3), nan, nan, np.eye(3), nan,
                          valid_points=valid, reason=reason, inlier_fraction=inlier_fraction)


def _erode(mask: np.ndarray, erosion_px: int, min_pixels: int) -> tuple[np.ndarray, int]:
    """
    Return (eroded mask, erosion used) for the largest erosion <= ``erosion_px`` that fits.

    The erosion keeps ``min_pixels`` and a third of the mask.
    """
    total = int(mask.sum())
    m = mask.astype(np.uint8)
    for e in range(erosion_px, 0, -1):
        kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * e + 1, 2 * e + 1))
        eroded = cv2.erode(m, kernel, borderType=cv2.BORDER_CONSTANT, borderValue=0).view(bool)
        if int(eroded.sum()) >= max(min_pixels, total / 3):
            return eroded, e
    return mask, 0


def target_geometry(mask: np.ndarray, depth: RegisteredDepth,
                    params: GeometryParams = GeometryParams()) -> TargetGeometry:
    """
    Measure the geometry of the target whose visible mask is ``mask`` (H, W bool); the module docstring has the rules.

    A mask of another size than the depth is refused.
    """
    mask = np.asarray(mask, dtype=bool)
    depth_m, camera = depth.depth_m, depth.camera
    if mask.shape != depth_m.shape:
        raise DepthMismatch(f"mask {mask.shape[1]}x{mask.shape[0]} and depth "
                            f"{depth_m.shape[1]}x{depth_m.shape[0]} differ in size")
    rows = np.flatnonzero(mask.any(axis=1))
    if rows.size == 0:
        return _no_pose(np.empty((0, 3)), "empty mask")
    r0, r1 = rows[0], rows[-1] + 1
    cols = np.flatnonzero(mask[r0:r1].any(axis=0))
    c0, c1 = cols[0], cols[-1] + 1
    crop_mask = np.ascontiguousarray(mask[r0:r1, c0:c1])
    core, erosion = _erode(crop_mask, params.erosion_px, params.min_points)
    vs, us = np.nonzero(crop_mask)
    z = depth_m[r0:r1, c0:c1][vs, us].astype(np.float64)
    ok = np.isfinite(z) & (z > 0)
    vs, us, z = vs[ok], us[ok], z[ok]
    xy = camera.normalized(us + c0, vs + r0)
    points = np.column_stack([xy * z[:, None], z])  # the camera's own frame (R comes last)
    rotation = camera.rotation
    if z.size < params.min_points:
        return _turned(_no_pose(points, f"{z.size} valid depth pixels (< {params.min_points})", z.size), rotation)
    in_core = core[vs, us]
    if in_core.sum() < params.min_points:
        in_core[:] = True
        core = crop_mask
    fit_at = np.flatnonzero(in_core)
    fit_at = fit_at[:: max(1, fit_at.size // params.max_fit_points)]  # a big target: the plane from a strided sample
    rule = params.band_rule
    fitted = fit_plane(xy[fit_at], z[fit_at], rule, params.ransac,
                       _pixel_noise(depth_m[r0:r1, c0:c1], core, params.max_fit_points))
    if fitted is None:  # min_points under 3
        return _turned(_no_pose(points, f"{fit_at.size} points to fit a plane to (< 3)", z.size), rotation)
    plane = fitted.plane
    share = float(fitted.inliers.mean())
    band = rule.band(z, fitted.scale)
    on_plane = np.abs(plane.residuals(xy, z)) <= band
    if share > params.min_inlier_fraction and params.other_surface_px > 0:
        on_plane &= ~_other_surface(plane, fitted.scale, xy, z, vs, us, crop_mask.shape, on_plane, params)
    inlier_fraction = float(on_plane.mean())
    if share <= params.min_inlier_fraction:
        return _turned(_no_pose(points, f"no plane holds most of the points: {share:.0%} of the {fit_at.size} "
                                        f"core points lie on the best plane (at most {params.min_inlier_fraction:.0%})",
                                int(on_plane.sum()), inlier_fraction), rotation)
    members = points[on_plane]
    if len(members) < params.min_points:
        return _turned(_no_pose(members, f"{len(members)} points on the target's surface (< {params.min_points})",
                                len(members), inlier_fraction), rotation)
    centroid = members.mean(axis=0)
    normal, edge_on = _approach(members, centroid, plane.normal, params)
    axes = _box_axes(members - centroid, normal)
    coords = (members - centroid) @ axes
    if tuple(params.extent_percentiles) == (0.0, 100.0):
        lo, hi = coords.min(axis=0), coords.max(axis=0)
    else:
        step = max(1, len(coords) // params.max_fit_points)
        lo, hi = np.percentile(coords[::step], params.extent_percentiles, axis=0)
    centre = centroid + axes @ ((lo + hi) / 2)
    return _turned(TargetGeometry(True, voxel_downsample(members, params.voxel_m), centroid, centre, axes, hi - lo,
                                  edge_on=edge_on, valid_points=len(members), erosion_px=erosion,
                                  inlier_fraction=inlier_fraction,
                                  band_m=float(rule.band(centroid[2:], fitted.scale)[0])), rotation)


def _other_surface(plane: Plane, scale: float, xy: np.ndarray, z: np.ndarray, vs: np.ndarray, us: np.ndarray,
                   shape: tuple[int, int], on_plane: np.ndarray, params: GeometryParams) -> np.ndarray:
    """
    Return (N,) bool: the pixels on ``plane`` that a second surface beside them claims (module doc, rule 4).

    The second plane is fitted to the pixels off ``plane`` (the same band rule, at the
    target's noise ``scale``); when it holds most of them, a pixel within
    ``other_surface_px`` of its inliers in the image that lies nearer to it than to
    ``plane`` is its. Only beside them: extended over the whole mask, a plane fitted to
    a strip ten pixels wide tilts across the target and would claim its noisy pixels.
    """
    off = np.flatnonzero(~on_plane)
    if off.size < max(params.min_points, 3):
        return np.zeros(len(z), bool)
    off = off[:: max(1, off.size // params.max_fit_points)]
    # 64 draws scored on 512 pixels: a plane that holds most of them has a one in eight chance a
    # draw, so missing it is a one in 5,000 event, and scattered mixed pixels (no plane) cost an
    # eighth of the main fit's draws.
    other = fit_plane(xy[off], z[off], params.band_rule, replace(params.ransac, max_hypotheses=64, sample_points=512),
                      scale)
    if other is None or other.inliers.mean() <= 0.5:
        return np.zeros(len(z), bool)
    seen = np.zeros(shape, np.uint8)
    seen[vs[off[other.inliers]], us[off[other.inliers]]] = 1
    reach = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * params.other_surface_px + 1,) * 2)
    candidates = np.flatnonzero(on_plane & cv2.dilate(seen, reach).view(bool)[vs, us])
    claimed = np.zeros(len(z), bool)
    at_xy, at_z = xy[candidates], z[candidates]
    claimed[candidates] = np.abs(other.plane.residuals(at_xy, at_z)) < np.abs(plane.residuals(at_xy, at_z))
    return claimed


def _pixel_noise(depth: np.ndarray, core: np.ndarray, max_values: int) -> float:
    """
    Return the inverse depth's pixel noise (1/m) over the ``core`` pixels (H, W bool) of a ``depth`` crop (H, W).

    The core, not the whole mask: the border ring's mixed pixels are not the sensor's noise.
    """
    d = np.where(core, depth, np.nan).astype(np.float64)
    d[~(d > 0) | ~np.isfinite(d)] = np.nan
    return inverse_depth_noise(d, max_values)


def _approach(members: np.ndarray, centroid: np.ndarray, normal: np.ndarray,
              params: GeometryParams) -> tuple[np.ndarray, bool]:
    """
    (z axis (3,), edge_on).

    The fitted ``normal`` (facing the camera), or the chosen one of rule 6 when the
    members do not measure it.
    """
    view = centroid / np.linalg.norm(centroid)
    sample = members[:: max(1, len(members) // params.max_fit_points)] - centroid
    off = float(np.var(sample @ normal))
    helper = np.array([1.0, 0.0, 0.0]) if abs(normal[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    e1 = _cross(normal, helper)
    e1 /= np.linalg.norm(e1)
    e2 = _cross(normal, e1)
    flat = sample @ np.stack([e1, e2], axis=1)
    spreads, directions = np.linalg.eigh(flat.T @ flat / len(flat))
    across, along = (max(float(s), 0.0) for s in spreads)
    limit = np.tan(np.deg2rad(params.max_tilt_deg)) ** 2 * len(members)

    def unmeasured(spread: float) -> bool:
        """
        Tell whether the tilt about the other in-plane axis is lost in the spread off the plane.

        Its standard error sqrt(off / (n spread)) is over max_tilt_deg, or the points
        spread less than min_spread_m this way.
        """
        return spread < params.min_spread_m ** 2 or off > limit * spread

    if unmeasured(along):
        return -view, True  # no structure
    if unmeasured(across):
        line = directions[0, 1] * e1 + directions[1, 1] * e2
        towards = -view + (view @ line) * line
        size = np.linalg.norm(towards)
        return (towards / size if size > 1e-6 else -view), True  # a line: the normal it allows that faces us
    if abs(float(normal @ view)) < np.cos(np.deg2rad(params.edge_on_deg)):
        return -view, True  # seen edge-on
    return normal, False


def _cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Return a x b of two 3-vectors (np.cross costs more than the rest of a small target's box)."""
    return np.array([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]])


def _turned(g: TargetGeometry, rotation: np.ndarray | None) -> TargetGeometry:
    """``g`` in the output frame: turned by a raw camera's rectification R (when there is one)."""
    if rotation is None:
        return g
    points = (g.points.astype(np.float64) @ rotation.T).astype(np.float32)
    if not g.has_pose:
        return replace(g, points=points)
    return replace(g, points=points, centroid=rotation @ g.centroid, centre=rotation @ g.centre,
                   rotation=rotation @ g.rotation)


def _box_axes(centred: np.ndarray, normal: np.ndarray) -> np.ndarray:
    """
    (3, 3) columns x, y, z = ``normal``.

    X the principal in-plane axis of ``centred`` (N, 3) points, signed image-right
    (image-down when x is vertical); y = z x x.
    """
    helper = np.array([1.0, 0.0, 0.0]) if abs(normal[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    e1 = _cross(normal, helper)
    e1 /= np.linalg.norm(e1)
    e2 = _cross(normal, e1)
    flat = centred @ np.stack([e1, e2], axis=1)
    _, vec2 = np.linalg.eigh(flat.T @ flat)
    x = vec2[0, 1] * e1 + vec2[1, 1] * e2  # the larger eigenvalue's vector
    x /= np.linalg.norm(x)
    if x[0] < -1e-9 or (abs(x[0]) <= 1e-9 and x[1] < 0):
        x = -x
    y = _cross(normal, x)
    return np.stack([x, y, normal], axis=1)
