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
How far a target's measured 3-D geometry is from the truth: centroid, box centre, normal, size.

One definition shared by the geometry's tests (``m2sa_core.geometry.target`` against the
synthetic world), the bag evaluation (the node's ``Target.pose`` / ``size`` against a
bag's geometry sidecar) and the bench, so that a figure in bench/RESULTS.md and one in a
bag report mean the same thing:

* **centroid / box centre**: the Euclidean distance (mm) between the measured point and
  the true one (the mean of the true visible points, the centre of their box);
* **normal**: the angle (degrees) between the measured box's z axis and the true
  surface normal, both pointing towards the camera;
* **size**: the largest ``|measured extent - true extent|`` (mm) over the box's two
  in-plane axes (x, y), where the true extent along an axis is the min-max of the true
  visible points projected on the *measured* axis. It scores how well the box bounds
  the surface, not which in-plane direction its x axis got (a round lid has none). The
  z extent is left out: the true one is the relief spread (0 for a flat target), a
  measured one the depth noise's spread.

The true points enter only through their projections' extremes, which the convex hull's
vertices attain, so a sidecar can store :func:`support_points` (a few dozen points)
instead of every visible pixel's and get the same size error. Pure numpy and SciPy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class GeometryErrors:
    """One target's errors; ``centre_mm`` is NaN when no box centre was compared."""

    centroid_mm: float
    normal_deg: float
    size_mm: float
    centre_mm: float = float("nan")


def normal_angle_deg(measured: np.ndarray, truth: np.ndarray) -> float:
    """Angle (degrees) between two directions (normalised here; a sign flip counts 180)."""
    a = np.asarray(measured, np.float64)
    b = np.asarray(truth, np.float64)
    cos = float(a @ b) / max(float(np.linalg.norm(a) * np.linalg.norm(b)), 1e-300)
    return float(np.degrees(np.arccos(np.clip(cos, -1.0, 1.0))))


def size_error_mm(rotation: np.ndarray, extents: np.ndarray, truth_points: np.ndarray) -> float:
    """
    Return the in-plane size error (module doc) of a box against the true points.

    The box has axes ``rotation`` (columns x, y, z) and ``extents`` (metres); the truth is
    the true points or their support points.
    """
    on_axes = np.asarray(truth_points, np.float64).reshape(-1, 3) @ np.asarray(rotation, np.float64)
    true_extents = on_axes.max(axis=0) - on_axes.min(axis=0)
    return float(np.abs(np.asarray(extents, np.float64)[:2] - true_extents[:2]).max() * 1e3)


def geometry_errors(centroid: np.ndarray, rotation: np.ndarray, extents: np.ndarray, truth_centroid: np.ndarray,
                    truth_normal: np.ndarray, truth_points: np.ndarray, centre: np.ndarray | None = None,
                    truth_centre: np.ndarray | None = None) -> GeometryErrors:
    """All errors of one measured target (metres in, mm and degrees out; module doc)."""
    centre_mm = float("nan")
    if centre is not None and truth_centre is not None:
        centre_mm = float(np.linalg.norm(np.asarray(centre, np.float64) - np.asarray(truth_centre, np.float64)) * 1e3)
    return GeometryErrors(
        centroid_mm=float(np.linalg.norm(np.asarray(centroid, np.float64) - np.asarray(truth_centroid, np.float64))
                          * 1e3),
        normal_deg=normal_angle_deg(np.asarray(rotation, np.float64)[:, 2], truth_normal),
        size_mm=size_error_mm(rotation, extents, truth_points),
        centre_mm=centre_mm)


def support_points(points: np.ndarray) -> np.ndarray:
    """
    Return the vertices of the convex hull of ``points`` (N, 3): every projection's min and max.

    A flat patch (one plane: a part without relief) has no 3-D hull, so its 2-D hull in
    the plane is taken; points on a line give their two ends, fewer than four are returned
    whole.
    """
    from scipy.spatial import ConvexHull, QhullError

    pts = np.asarray(points, np.float64).reshape(-1, 3)
    if len(pts) < 4:
        return pts.copy()
    try:
        return pts[np.sort(ConvexHull(pts).vertices)]
    except QhullError:
        pass
    centred = pts - pts.mean(axis=0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    try:
        return pts[np.sort(ConvexHull(centred @ vt[:2].T).vertices)]
    except QhullError:
        along = centred @ vt[0]
        return pts[np.unique([int(np.argmin(along)), int(np.argmax(along))])]
