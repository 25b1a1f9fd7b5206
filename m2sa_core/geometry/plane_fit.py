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
The plane a target's depth lies on, found so that stray pixels cannot turn it.

A model's mask runs over a thin or slanted target's edge onto whatever is beside it: a
knife's mask onto the remote next to it, a few per cent of its pixels a few centimetres
nearer. A least-squares or PCA plane through every pixel tilts towards them (on a narrow
strip it even takes the strip's width for the normal), so the plane is found robustly:

1. **The depth-scaled band.** A pixel is on the plane when its depth is within
   ``band(z) = k * sigma(z)`` of the plane's depth along its ray, with
   ``sigma(z) = max(floor, sigma_1m * z^2)`` (:class:`DepthNoise`): stereo and
   structured-light depth noise grows with the square of the range (the disparity's
   error is constant in pixels), ToF's no faster, and the floor keeps a flat target's
   relief (a raised button) and a sensor's quantisation in. The band is measured along
   the ray, not across the plane: a pixel on another surface a few centimetres nearer is
   that far off in depth whatever the target's slant, where its distance to a slanted
   plane shrinks with the cosine of the slant.
2. **MSAC.** Planes through three pixels drawn at random (a seeded generator, so one
   input gives one answer) are scored on a strided sample by the truncated quadratic
   cost ``sum(min((r / band)^2, 1))`` (MSAC: RANSAC that also prefers the plane the
   inliers fit best); draws stop when the best plane's inlier share makes another
   better one unlikely (``confidence``) or after ``max_hypotheses``.
3. **Refit.** The best plane's inliers get a weighted least-squares plane, its inliers
   the next one, until they stop changing (a few rounds): the sample's plane is only as
   good as its three pixels, the refit is as good as all of them.

A plane ``n . X = d`` in the camera's frame, with ``X = z (x, y, 1)`` for the ideal
(undistorted) coordinates x, y of a pixel of depth z, is exactly ``1/z = a x + b y + c``
with ``(a, b, c) = n / d``: linear in the pixel's coordinates. So the three-pixel planes
are 3x3 linear solves, the refit is a linear regression of inverse depth (weighted by
``z^2 / sigma(z)``, the depth noise it stands for), and a regression predicts depth from
where the pixel is, so it cannot swap the plane's normal with one of its in-plane axes
as an eigenvector can. Pixels in one line of the image (a one-pixel strip) leave the
plane's tilt about that line free; the pseudo-inverse then picks the least tilt, and the
caller (target.py) does not trust the normal there. Pure numpy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class DepthNoise:
    """The depth sensor's noise along the optical axis: ``max(floor_m, sigma_1m * z^2)`` metres."""

    sigma_1m: float = 0.003
    floor_m: float = 0.003

    def sigma(self, z: np.ndarray) -> np.ndarray:
        """(N,) the noise (metres) at depths ``z`` (N,)."""
        return np.maximum(self.floor_m, self.sigma_1m * np.square(z))


@dataclass(frozen=True)
class Plane:
    """
    ``1/z = coefficients @ (x, y, 1)``: the plane ``n .

    X = d`` with ``coefficients = n / d`` (n pointing away from the camera, d > 0), in the
    frame the ideal coordinates are in.
    """

    coefficients: np.ndarray  # (3,) a, b, c

    @property
    def normal(self) -> np.ndarray:
        """(3,) unit normal pointing towards the camera (the approach direction)."""
        return -self.coefficients / np.linalg.norm(self.coefficients)

    def residuals(self, xy: np.ndarray, z: np.ndarray) -> np.ndarray:
        """
        Return (N,) measured minus the plane's depth along each pixel's ray, in metres.

        Inf where the ray misses the plane in front of the camera.
        """
        q = xy @ self.coefficients[:2] + self.coefficients[2]
        out = np.full(z.shape, np.inf)
        ahead = q > 0
        out[ahead] = z[ahead] - 1.0 / q[ahead]
        return out


@dataclass(frozen=True)
class RansacParams:
    """
    MSAC's draws: at most ``max_hypotheses`` planes in batches of ``batch``, stopped once ``confidence`` is reached.

    Each scored on at most ``sample_points`` pixels (strided); ``refits`` rounds of least
    squares; ``seed`` for the generator (one input, one answer).
    """

    max_hypotheses: int = 256
    batch: int = 32
    confidence: float = 0.999
    sample_points: int = 1024
    refits: int = 5
    seed: int = 0


def _design(xy: np.ndarray) -> np.ndarray:
    return np.column_stack([xy, np.ones(len(xy))])


def _hypotheses(design: np.ndarray, inverse_z: np.ndarray, rng: np.random.Generator, count: int) -> np.ndarray:
    """
    (<= count, 3) planes through three pixels each.

    When every triple lies on one image line (a strip a pixel wide), the
    pseudo-inverse's least-tilted planes through it.
    """
    picks = rng.integers(0, len(design), size=(count, 3))
    a, b = design[picks], inverse_z[picks]  # (count, 3, 3), (count, 3)
    ok = np.abs(np.linalg.det(a)) > 1e-12
    if not ok.any():
        return np.einsum("hij,hj->hi", np.linalg.pinv(a, rcond=1e-6), b)
    return np.linalg.solve(a[ok], b[ok][:, :, None])[:, :, 0]


def _refit(design: np.ndarray, inverse_z: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """
    Fit the (3,) weighted least-squares plane: inverse depth on the pixel's coordinates.

    By the 3x3 normal equations (their pseudo-inverse where the pixels lie on one image line).
    """
    weighted = design * np.square(weights)[:, None]
    normal_matrix, rhs = weighted.T @ design, weighted.T @ inverse_z
    if np.linalg.cond(normal_matrix) < 1e12:
        return np.linalg.solve(normal_matrix, rhs)
    return np.linalg.pinv(normal_matrix, rcond=1e-12) @ rhs


def fit_plane(xy: np.ndarray, z: np.ndarray, band: np.ndarray,
              params: RansacParams = RansacParams()) -> tuple[Plane, np.ndarray] | None:
    """
    Return the robust plane of pixels with ideal coordinates ``xy`` (N, 2) and depths ``z`` (N,) > 0.

    A pixel is on the plane when within ``band`` (N,) metres of it in depth (module doc).

    Returns (plane, inliers (N,) bool), or None for fewer than three pixels.
    """
    if len(z) < 3:
        return None
    return refine(msac(xy, z, band, params), xy, z, band, params.refits)


def msac(xy: np.ndarray, z: np.ndarray, band: np.ndarray, params: RansacParams = RansacParams()) -> Plane:
    """Return the best of the three-pixel planes (module doc, step 2) of N >= 3 pixels."""
    n = len(z)
    step = max(1, n // params.sample_points)
    s_design, s_z, s_band = _design(xy[::step]), z[::step], band[::step]
    s_inverse = 1.0 / s_z
    rng = np.random.default_rng(params.seed)
    best, best_cost, drawn, needed = None, np.inf, 0, params.max_hypotheses
    while drawn < min(needed, params.max_hypotheses):
        planes = _hypotheses(s_design, s_inverse, rng, params.batch)
        drawn += params.batch
        q = s_design @ planes.T  # (S, B) each pixel's inverse depth on each plane
        with np.errstate(divide="ignore"):
            r = np.where(q > 0, s_z[:, None] - 1.0 / np.where(q > 0, q, 1.0), np.inf)
        scaled = np.minimum(np.square(r / s_band[:, None]), 1.0)
        cost = scaled.sum(axis=0)
        j = int(np.argmin(cost))
        if cost[j] < best_cost:
            best, best_cost = planes[j], float(cost[j])
            share = float((scaled[:, j] < 1.0).mean())
            if share >= 1.0:
                break
            if share > 0:
                needed = int(np.ceil(np.log(1 - params.confidence) / np.log(1 - share ** 3)))
    assert best is not None
    return Plane(np.asarray(best, dtype=np.float64))


def refine(plane: Plane, xy: np.ndarray, z: np.ndarray, band: np.ndarray, rounds: int) -> tuple[Plane, np.ndarray]:
    """
    (plane, inliers (N,) bool).

    ``plane`` refitted by weighted least squares on its inliers among the N pixels,
    then on the new plane's, until they stop changing or after ``rounds`` (module
    doc, step 3).
    """
    design, inverse_z = _design(xy), 1.0 / z
    weights = np.square(z) / band  # band is k sigma: the same weights up to a constant
    inliers = np.abs(plane.residuals(xy, z)) <= band
    for _ in range(rounds):
        if inliers.sum() < 3:
            break
        plane = Plane(_refit(design[inliers], inverse_z[inliers], weights[inliers]))
        again = np.abs(plane.residuals(xy, z)) <= band
        if np.array_equal(again, inliers):
            break
        inliers = again
    return plane, inliers
