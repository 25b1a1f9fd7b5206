"""A target's 3-D points, oriented box and surface normal from its mask and registered depth.

A grasp planner starts from the target's point cloud; a press planner needs a point and
an approach direction. From a visible mask (H, W bool), a depth image registered to the
colour camera (H, W metres; NaN or 0 = no depth) and the colour camera's intrinsics,
:func:`target_geometry` computes, in the colour camera's optical frame (REP 103: x right,
y down, z forward), metres. Only the mask's bounding box is read (cost follows the
target's size, not the image's). The rules:

1. **Core pixels.** The mask is eroded by up to ``erosion_px`` (2) pixels - the largest
   erosion that keeps ``min_points`` pixels and a third of the mask - so the mixed pixels
   at the border (depth between the target and the background) stay out of the fit; a
   thin target (a pipe, a handle) keeps more of its pixels rather than none. Depth that
   is NaN, inf or <= 0 is a hole and is skipped everywhere.
2. **Depth band.** Along the viewing direction: the median depth of the core and its
   robust sigma (1.4826 x MAD, never below ``outlier_floor_m`` = 1 cm, so a flat target
   facing the camera keeps its relief: a raised button, a recessed screen); core pixels
   more than ``outlier_k`` (3.5) sigmas away (flying pixels, background seen through a
   hole in the mask) are kept out of the plane fit.
3. **Plane.** The core's in-band points, back-projected through K, get a plane by PCA
   (the covariance's eigenvector of the smallest eigenvalue is the normal); points
   farther from it than ``outlier_k`` robust sigmas of the residuals (sigma at least
   ``plane_floor_m`` = 5 mm, so 1.75 cm of relief stays) are dropped and the plane refitted once.
4. **Members.** The target's points are *all* valid mask pixels - the border ring too -
   within the residual band of the plane: a border pixel whose depth agrees with the
   surface counts, a mixed one does not. (Not the depth band: on a slanted target the
   depth spread is the geometry, not noise.) ``points`` (the cloud) are the members
   voxel-downsampled (``voxel_m`` = 5 mm, the mean point of each occupied voxel; 0 keeps
   every member), float32 (N, 3); ``centroid`` is the members' mean (the visible
   surface's centre: the press point).
5. **Box.** z axis = the normal flipped to face the camera (``n . c < 0``): the approach
   direction; x = the principal axis of the members projected on the plane (signed so
   that it points image-right, or image-down when it is vertical), y = z x x. Extents are
   the ``extent_percentiles`` range of the members' coordinates on each axis, by default
   0-100 (min-max): the members are already outlier-free, and on the synthetic ground
   truth trimming 0.5 % at each end made the extents 2-3 times worse (bench/RESULTS.md).
   The box centre is the middle of that range (not the centroid).
6. **Edge-on.** When the surface is seen nearly edge-on (the normal more than
   ``edge_on_deg`` (75) degrees from the viewing ray) or the points do not span a plane
   (the second eigenvalue under ``planarity`` (2) times the smallest, or the points
   spread less than ``min_spread_m`` (1 mm) across: a line, or noise as large as the
   patch), the fitted normal cannot be trusted: z becomes the reversed
   viewing ray through the centroid (approach along the line of sight), x / y the PCA
   axes of the members projected perpendicular to it, and ``edge_on`` is set. The pose is
   still given (``has_pose`` true): the centroid and extents remain good.
7. **No pose** (``has_pose`` false, ``reason`` says why, box fields NaN) when fewer than
   ``min_points`` (10) valid points remain at any step; ``points`` then holds whatever
   valid points there were.

**Amodal targets** (a complete mask, hidden parts included): only the visible part has
depth, so the caller passes the *visible* mask and the points, box and normal describe
the visible surface only (the box does not guess the hidden part).

Depth in another frame, of another size than the colour image, or camera_info of
another size is refused with :class:`DepthMismatch` by :func:`register_depth`, as the
node refuses centroids today: a wrong point is worse than none. Pure numpy / OpenCV /
SciPy, no ROS, so it is unit-tested against the synthetic world's ground truth
(m2sa_core.data.synthetic.depth) and benchmarked alone (bench/bench_target_geometry.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import cv2
import numpy as np
from scipy.spatial.transform import Rotation

from m2sa_ros.centroids import Intrinsics


class DepthMismatch(ValueError):
    """Depth that does not belong to the colour image (another frame, size or camera_info)."""


@dataclass(frozen=True)
class RegisteredDepth:
    """A depth image (float32 metres, H x W; NaN or 0 = none) known to be registered to
    the colour image of the same size, with the colour camera's intrinsics."""

    depth_m: np.ndarray
    intrinsics: Intrinsics
    frame_id: str = ""


def register_depth(depth_m: np.ndarray, intrinsics: Intrinsics, colour_shape: tuple[int, int],
                   depth_frame: str = "", colour_frame: str = "",
                   allow_frame_mismatch: bool = False) -> RegisteredDepth:
    """Check that ``depth_m`` (H, W) can be used with the colour image and bind it.

    Refused (:class:`DepthMismatch`, the text says what to publish instead): depth in
    another frame than the colour image (unless ``allow_frame_mismatch``: registered
    anyway), depth of another size than ``colour_shape`` (H, W), camera_info of another
    size than the depth. Empty frame ids are not compared (as the node does).
    """
    depth_m = np.asarray(depth_m)
    if depth_m.ndim != 2:
        raise DepthMismatch(f"depth must be a single-channel H x W image, got shape {depth_m.shape}")
    if depth_frame and colour_frame and depth_frame != colour_frame and not allow_frame_mismatch:
        raise DepthMismatch(f"depth is in frame '{depth_frame}' but the colour image is in '{colour_frame}'; "
                            "publish depth registered to the colour camera (e.g. aligned_depth_to_color)")
    if depth_m.shape != tuple(colour_shape[:2]):
        raise DepthMismatch(f"depth image is {depth_m.shape[1]}x{depth_m.shape[0]} but the colour image is "
                            f"{colour_shape[1]}x{colour_shape[0]}; publish depth registered to the colour camera "
                            "(e.g. aligned_depth_to_color)")
    if (intrinsics.height, intrinsics.width) != depth_m.shape:
        raise DepthMismatch(f"camera_info is {intrinsics.width}x{intrinsics.height} but depth is "
                            f"{depth_m.shape[1]}x{depth_m.shape[0]}")
    return RegisteredDepth(depth_m.astype(np.float32, copy=False), intrinsics, depth_frame or colour_frame)


@dataclass(frozen=True)
class GeometryParams:
    """The rules' constants (see the module docstring for what each one does)."""

    voxel_m: float = 0.005
    erosion_px: int = 2
    min_points: int = 10
    outlier_k: float = 3.5
    outlier_floor_m: float = 0.01
    plane_floor_m: float = 0.005
    extent_percentiles: tuple[float, float] = (0.0, 100.0)
    edge_on_deg: float = 75.0
    planarity: float = 2.0
    min_spread_m: float = 0.001
    max_fit_points: int = 8000  # the plane fit and its statistics on at most ~this many, strided


@dataclass(frozen=True)
class TargetGeometry:
    """One target's geometry in the optical frame (metres). Without a pose the box fields
    are NaN and ``rotation`` the identity."""

    has_pose: bool
    points: np.ndarray  # (N, 3) float32, voxel-downsampled inliers
    centroid: np.ndarray  # (3,) mean of the inliers: the press point
    centre: np.ndarray  # (3,) box centre
    rotation: np.ndarray  # (3, 3) box axes as columns x, y, z; z = the normal, towards the camera
    extents: np.ndarray  # (3,) box size along x, y, z
    edge_on: bool = False  # z is the viewing ray, not a fitted normal (module doc, rule 5)
    valid_points: int = 0  # inliers the box was fitted to
    reason: str = ""  # why there is no pose
    erosion_px: int = field(default=0)

    @property
    def normal(self) -> np.ndarray:
        """(3,) unit surface normal pointing towards the camera (the approach direction)."""
        return self.rotation[:, 2]

    @property
    def quaternion(self) -> np.ndarray:
        """(4,) x, y, z, w - geometry_msgs/Quaternion's order."""
        return Rotation.from_matrix(self.rotation).as_quat()


def _no_pose(points: np.ndarray, reason: str, valid: int = 0) -> TargetGeometry:
    nan = np.full(3, np.nan)
    return TargetGeometry(False, points.astype(np.float32).reshape(-1, 3), nan, nan, np.eye(3), nan,
                          valid_points=valid, reason=reason)


def _erode(mask: np.ndarray, erosion_px: int, min_pixels: int) -> tuple[np.ndarray, int]:
    """(eroded mask, erosion used): the largest erosion <= ``erosion_px`` keeping
    ``min_pixels`` and a third of the mask."""
    total = int(mask.sum())
    m = mask.astype(np.uint8)
    for e in range(erosion_px, 0, -1):
        kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * e + 1, 2 * e + 1))
        eroded = cv2.erode(m, kernel, borderType=cv2.BORDER_CONSTANT, borderValue=0).view(bool)
        if int(eroded.sum()) >= max(min_pixels, total / 3):
            return eroded, e
    return mask, 0


def _principal(points: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean (3,), eigenvalues ascending (3,), eigenvectors as columns (3, 3))."""
    mean = points.mean(axis=0)
    q = points - mean
    values, vectors = np.linalg.eigh(q.T @ q / max(len(points), 1))
    return mean, values, vectors


def voxel_downsample(points: np.ndarray, voxel_m: float) -> np.ndarray:
    """(M, 3) float32: the mean point of every occupied ``voxel_m`` cube of ``points`` (N, 3),
    ordered by voxel; ``voxel_m`` <= 0 returns the points as float32."""
    points = np.asarray(points, dtype=np.float64).reshape(-1, 3)
    if voxel_m <= 0 or len(points) == 0:
        return points.astype(np.float32)
    cells = np.floor(points / voxel_m).astype(np.int64)
    cells -= cells.min(axis=0)
    span = cells.max(axis=0) + 1
    keys = (cells[:, 0] * span[1] + cells[:, 1]) * span[2] + cells[:, 2]
    _, inverse, counts = np.unique(keys, return_inverse=True, return_counts=True)
    out = np.empty((counts.size, 3))
    for axis in range(3):
        out[:, axis] = np.bincount(inverse, weights=points[:, axis], minlength=counts.size) / counts
    return out.astype(np.float32)


def target_geometry(mask: np.ndarray, depth: RegisteredDepth,
                    params: GeometryParams = GeometryParams()) -> TargetGeometry:
    """The geometry of the target whose visible mask is ``mask`` (H, W bool); see the
    module docstring for the rules. A mask of another size than the depth is refused."""
    mask = np.asarray(mask, dtype=bool)
    depth_m, k = depth.depth_m, depth.intrinsics
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
    points = _back_project(us + c0, vs + r0, z, k)
    if z.size < params.min_points:
        return _no_pose(points, f"{z.size} valid depth pixels (< {params.min_points})", z.size)
    in_core = core[vs, us]
    if in_core.sum() < params.min_points:
        in_core[:] = True
    # Rule 2: depth outliers along the viewing direction, judged on the core.
    band = _RobustBand(z[in_core], params.outlier_k, params.outlier_floor_m, params.max_fit_points)
    near = band.holds(z)
    fit = points[in_core & near]
    fit = fit[:: max(1, len(fit) // params.max_fit_points)]  # a big target: the plane from a strided sample
    if len(fit) < params.min_points:
        return _no_pose(points, f"{len(fit)} points after depth outliers (< {params.min_points})", len(fit))
    # Rule 3: plane by PCA, residual outliers dropped, refitted.
    mean, _, vectors = _principal(fit)
    on_plane = _RobustBand((fit - mean) @ vectors[:, 0], params.outlier_k, params.plane_floor_m,
                           params.max_fit_points, centre=0.0).holds((fit - mean) @ vectors[:, 0])
    if on_plane.sum() < params.min_points:
        return _no_pose(points, f"{int(on_plane.sum())} points after the plane fit (< {params.min_points})",
                        int(on_plane.sum()))
    fit = fit[on_plane]
    mean, values, vectors = _principal(fit)
    normal = vectors[:, 0]
    residual = _RobustBand((fit - mean) @ normal, params.outlier_k, params.plane_floor_m, params.max_fit_points,
                           centre=0.0)
    # The target's points: every valid mask pixel (the border too) on the plane. Not the
    # depth band: on a slanted target it is narrower than the target's own depth range.
    members = points[residual.holds((points - mean) @ normal)]
    if len(members) < params.min_points:
        return _no_pose(members, f"{len(members)} points on the target's surface (< {params.min_points})",
                        len(members))
    centroid = members.mean(axis=0)
    view = centroid / np.linalg.norm(centroid)
    if normal @ view > 0:
        normal = -normal
    edge_on = (abs(float(normal @ view)) < np.cos(np.deg2rad(params.edge_on_deg))
               or values[1] < params.planarity * values[0] or np.sqrt(max(values[1], 0.0)) < params.min_spread_m)
    if edge_on:
        normal = -view
    rotation = _box_axes(members - centroid, normal)
    coords = (members - centroid) @ rotation
    if tuple(params.extent_percentiles) == (0.0, 100.0):
        lo, hi = coords.min(axis=0), coords.max(axis=0)
    else:
        step = max(1, len(coords) // params.max_fit_points)
        lo, hi = np.percentile(coords[::step], params.extent_percentiles, axis=0)
    centre = centroid + rotation @ ((lo + hi) / 2)
    return TargetGeometry(True, voxel_downsample(members, params.voxel_m), centroid, centre, rotation, hi - lo,
                          edge_on=edge_on, valid_points=len(members), erosion_px=erosion)


class _RobustBand:
    """Values within ``k`` robust sigmas (1.4826 MAD, at least ``floor``) of the median
    (or of ``centre``) of a sample (strided to at most ``max_n`` values)."""

    def __init__(self, values: np.ndarray, k: float, floor: float, max_n: int, centre: float | None = None) -> None:
        sample = values[:: max(1, values.size // max_n)]
        self.centre = float(np.median(sample)) if centre is None else centre
        self.sigma = max(1.4826 * float(np.median(np.abs(sample - self.centre))), floor)
        self.k = k

    def holds(self, values: np.ndarray) -> np.ndarray:
        return np.abs(values - self.centre) <= self.k * self.sigma


def _back_project(u: np.ndarray, v: np.ndarray, z: np.ndarray, k: Intrinsics) -> np.ndarray:
    """(N, 3) float64 points of pixels (u, v) at depth z (N,) through K."""
    return np.stack([(u - k.cx) * z / k.fx, (v - k.cy) * z / k.fy, z], axis=1)


def _box_axes(centred: np.ndarray, normal: np.ndarray) -> np.ndarray:
    """(3, 3) columns x, y, z = ``normal``: x the principal in-plane axis of ``centred``
    (N, 3) points, signed image-right (image-down when x is vertical); y = z x x."""
    helper = np.array([1.0, 0.0, 0.0]) if abs(normal[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    e1 = np.cross(normal, helper)
    e1 /= np.linalg.norm(e1)
    e2 = np.cross(normal, e1)
    flat = centred @ np.stack([e1, e2], axis=1)
    _, vec2 = np.linalg.eigh(flat.T @ flat)
    x = vec2[0, 1] * e1 + vec2[1, 1] * e2  # the larger eigenvalue's vector
    x /= np.linalg.norm(x)
    if x[0] < -1e-9 or (abs(x[0]) <= 1e-9 and x[1] < 0):
        x = -x
    y = np.cross(normal, x)
    return np.stack([x, y, normal], axis=1)
