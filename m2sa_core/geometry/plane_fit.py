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
nearer; a laptop's onto the television a few centimetres behind it. A least-squares or
PCA plane through every pixel tilts towards them (on a narrow strip it even takes the
strip's width for the normal), so the plane is found robustly:

1. **A band sized from the data.** A pixel is on the plane when its depth is within
   ``band`` of the plane's depth along its ray. How wide depends on how noisy *this*
   target's depth is, which a sensor model cannot know (a D455 is half as noisy as a
   D435 at the same range; temporally filtered, time-of-flight and simulated depth are
   quieter still), so it is measured (:class:`BandRule`): ``band(z) = k * s * z^2``,
   where ``s`` is the inverse depth's noise, the larger of two robust scales,

   * the pixels' own noise, :func:`inverse_depth_noise`: the MAD of second differences
     of inverse depth along the mask's rows and columns. On a plane inverse depth is
     linear in the pixel's coordinates (below), so its second differences are noise
     alone; no plane is needed, and a strip of another surface touches only the few
     differences across its edge;
   * the plane's residuals, :func:`residual_noise`: the MAD of the first least-squares
     plane's inverse-depth residuals. It catches what second differences miss: noise
     that neighbouring pixels share (filtered depth) and relief off the plane;

   bounded below by ``floor_m`` (relief a target carries, quantisation) and above by the
   sensor model's band ``k * sigma(z)`` (:class:`DepthNoise`), the band used before,
   so the data can only narrow it. Along the ray, not across the plane: a pixel on
   another surface a few centimetres nearer is that far off in depth whatever the
   target's slant, where its distance to a slanted plane shrinks with the slant's cosine.
2. **MSAC.** Planes through three pixels drawn at random (a seeded generator, so one
   input gives one answer) are scored on a strided sample by the truncated quadratic
   cost ``sum(min((r / band)^2, 1))`` (MSAC: RANSAC that also prefers the plane the
   inliers fit best), with the band from the pixels' noise alone; draws stop when the
   best plane's inlier share makes another better one unlikely (``confidence``) or after
   ``max_hypotheses``.
3. **A refit that cannot lean.** The best plane's inliers get a weighted least-squares
   plane, each pixel weighted by Tukey's biweight of its residual, ``(1 - (r / band)^2)^2``:
   a pixel near the band's edge, as a neighbour's pixels are when the band just reaches
   them, counts for almost nothing. That first least-squares plane fixes the residual
   scale and so the final band. Its inliers under that band are the only pixels any
   later refit sees (biweighted again, on the new plane's inliers among them, until they
   stop changing): a pixel the first plane rejected has no weight in any refit, so no
   refit can tilt towards it. The final plane's band decides the inliers. Before, every
   inlier had full weight, and a neighbour 4-7 cm behind a target at 2 m, inside the
   sensor model's 5.5 cm band, tilted the refit towards it, which let in more of it.

A plane ``n . X = d`` in the camera's frame, with ``X = z (x, y, 1)`` for the ideal
(undistorted) coordinates x, y of a pixel of depth z, is exactly ``1/z = a x + b y + c``
with ``(a, b, c) = n / d``: linear in the pixel's coordinates. So the three-pixel planes
are 3x3 linear solves, the refit is a linear regression of inverse depth (weighted by
``z^2 / band``, the depth noise it stands for), and a regression predicts depth from
where the pixel is, so it cannot swap the plane's normal with one of its in-plane axes
as an eigenvector can. Pixels in one line of the image (a one-pixel strip) leave the
plane's tilt about that line free; the pseudo-inverse then picks the least tilt, and the
caller (target.py) does not trust the normal there. Pure numpy.

Where two surfaces are nearer in depth than the band (a D435's noise at 2 m and beyond,
a neighbour 3-7 cm away), depth alone cannot tell them apart: the other surface's pixels
within the band count as the target's (target.py then tries a second plane).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MAD_TO_SIGMA = 1.4826  # a normal distribution's sigma per median absolute deviation
SECOND_DIFFERENCE_GAIN = np.sqrt(6.0)  # w[i-1] - 2 w[i] + w[i+1] of independent noise: sqrt(1 + 4 + 1) sigma


@dataclass(frozen=True)
class DepthNoise:
    """
    The depth sensor's noise model along the optical axis: ``max(floor_m, sigma_1m * z^2)`` metres.

    Stereo and structured-light noise grows with the square of the range (the disparity's
    error is constant in pixels), ToF's no faster. It bounds the inlier band from above
    (:class:`BandRule`): the band follows the data, never wider than this model allows.
    """

    sigma_1m: float = 0.003
    floor_m: float = 0.003

    def sigma(self, z: np.ndarray) -> np.ndarray:
        """(N,) the noise (metres) at depths ``z`` (N,)."""
        return np.maximum(self.floor_m, self.sigma_1m * np.square(z))


@dataclass(frozen=True)
class BandRule:
    """
    How wide the inlier band is: ``k * s * z^2`` for inverse-depth noise ``s``, within ``[floor_m, k * sigma(z)]``.

    ``k`` is ``sigmas``, ``sigma`` the sensor model ``noise``. The floor, 12 mm, is what
    a target's own surface may stray from its plane without being noise: a raised button
    or a handle (up to 10 mm in the synthetic world), a curved lid, 16-bit depth's
    millimetre steps. It equals the sensor model's band up to 1 m (4 x 3 mm), so at a
    table's range the band is what it was; and it stays well under the 3 cm at which a
    neighbouring surface begins (tests/core/test_plane_band.py: a surface 3-7 cm
    behind or in front, 0.5-2.5 m, is left out whole on exact and quiet depth).
    """

    noise: DepthNoise = DepthNoise()
    sigmas: float = 4.0
    floor_m: float = 0.012

    def ceiling(self, z: np.ndarray) -> np.ndarray:
        """Return the (N,) sensor model's band at depths ``z`` (N,): the widest the band may be."""
        return self.sigmas * self.noise.sigma(z)

    def band(self, z: np.ndarray, scale: float) -> np.ndarray:
        """Return the (N,) inlier band, metres of depth, at depths ``z`` (N,) for inverse-depth noise ``scale``."""
        return np.minimum(self.ceiling(z), np.maximum(self.floor_m, self.sigmas * scale * np.square(z)))


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
class PlaneFit:
    """
    A robust plane, the pixels it was fitted to, and the noise its band was sized from.

    ``inliers`` (N,) bool of the N pixels fitted; ``scale`` the inverse depth's noise
    (1/m, a sigma): :meth:`BandRule.band` of it is the band the inliers are within.
    """

    plane: Plane
    inliers: np.ndarray
    scale: float


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


def inverse_depth_noise(depth: np.ndarray, max_values: int = 8000) -> float:
    """
    Return the noise (1/m, a sigma) of inverse depth from its second differences; NaN when too few.

    ``depth`` (H, W) metres, NaN where a pixel is not the target's or has no depth. The
    differences ``w[i-1] - 2 w[i] + w[i+1]`` of inverse depth ``w`` along rows and along
    columns, where all three pixels are there, vanish on a plane, so their MAD is the
    noise's (``sqrt(6)`` times it for independent pixels). At most about ``max_values``
    of them (whole rows and columns, strided): the cost stays a target's, not an image's.
    """
    with np.errstate(divide="ignore", invalid="ignore"):  # 0 and NaN (no depth) give no finite difference
        inverse = 1.0 / np.asarray(depth, dtype=np.float64)
    height, width = inverse.shape
    step = max(1, int(np.ceil(height * width / max_values)))
    parts = []
    if width >= 3:
        rows = inverse[::step]
        parts.append((rows[:, :-2] + rows[:, 2:] - 2.0 * rows[:, 1:-1]).ravel())
    if height >= 3:
        cols = inverse[:, ::step]
        parts.append((cols[:-2] + cols[2:] - 2.0 * cols[1:-1]).ravel())
    values = np.concatenate(parts) if parts else np.empty(0)
    values = values[np.isfinite(values)]
    if values.size < 10:
        return float("nan")
    return float(MAD_TO_SIGMA * np.median(np.abs(values - np.median(values))) / SECOND_DIFFERENCE_GAIN)


def residual_noise(plane: Plane, xy: np.ndarray, z: np.ndarray, within: np.ndarray, max_points: int = 2048) -> float:
    """
    Return the noise (1/m, a sigma) of inverse depth about ``plane``: the MAD of its residuals.

    Over the pixels within ``within`` (N,) metres of it (the sensor model's band: a
    surface farther off is not this target's noise), strided to at most about
    ``max_points`` (a MAD of 2,000 is within a few per cent); NaN when fewer than three.
    """
    step = max(1, len(z) // max_points)
    xy, z, within = xy[::step], z[::step], within[::step]
    near = np.abs(plane.residuals(xy, z)) <= within
    if near.sum() < 3:
        return float("nan")
    q = xy[near] @ plane.coefficients[:2] + plane.coefficients[2]
    return float(MAD_TO_SIGMA * np.median(np.abs(1.0 / z[near] - q)))


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


def _biweight(residuals: np.ndarray, band: np.ndarray) -> np.ndarray:
    """(N,) the square root of Tukey's biweight of each residual, ``1 - (r / band)^2``, 0 outside the band."""
    return np.maximum(0.0, 1.0 - np.square(residuals / band))


def fit_plane(xy: np.ndarray, z: np.ndarray, rule: BandRule = BandRule(), params: RansacParams = RansacParams(),
              pixel_noise: float = float("nan")) -> PlaneFit | None:
    """
    Return the robust plane of pixels with ideal coordinates ``xy`` (N, 2) and depths ``z`` (N,) > 0.

    ``pixel_noise``: the inverse depth's noise from second differences
    (:func:`inverse_depth_noise`, 1/m), NaN when unknown; the band follows ``rule``
    (module doc, steps 1-3). None for fewer than three pixels.
    """
    if len(z) < 3:
        return None
    pixel_scale = pixel_noise if np.isfinite(pixel_noise) else 0.0
    first_band = rule.band(z, pixel_scale)
    plane = msac(xy, z, first_band, params)
    r = plane.residuals(xy, z)
    held = np.abs(r) <= first_band
    if held.sum() >= 3:  # the first least-squares plane: the sample's, biweighted
        weights = np.square(z) / first_band * _biweight(r, first_band)
        plane = Plane(_refit(_design(xy[held]), 1.0 / z[held], weights[held]))
    fitted = residual_noise(plane, xy, z, rule.ceiling(z))
    scale = max(pixel_scale, fitted if np.isfinite(fitted) else 0.0)
    plane, inliers = refine(plane, xy, z, rule.band(z, scale), params.refits)
    return PlaneFit(plane, inliers, scale)


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


def refine(first: Plane, xy: np.ndarray, z: np.ndarray, band: np.ndarray, rounds: int) -> tuple[Plane, np.ndarray]:
    """
    (plane, inliers (N,) bool).

    ``first`` refitted by biweighted least squares on its inliers among the N pixels,
    then on the new plane's among those, until they stop changing or after ``rounds``
    (module doc, step 3): a pixel ``first`` rejected has no weight in any refit, so no
    refit can lean towards it.
    """
    design, inverse_z = _design(xy), 1.0 / z
    strength = np.square(z) / band  # band is k sigma: the weights of the noise, up to a constant
    plane, r = first, first.residuals(xy, z)
    allowed = np.abs(r) <= band
    fitted_on = allowed
    for _ in range(rounds):
        if fitted_on.sum() < 3:
            break
        weights = strength[fitted_on] * _biweight(r[fitted_on], band[fitted_on])
        plane = Plane(_refit(design[fitted_on], inverse_z[fitted_on], weights))
        r = plane.residuals(xy, z)
        again = allowed & (np.abs(r) <= band)
        if np.array_equal(again, fitted_on):
            break
        fitted_on = again
    return plane, np.abs(r) <= band
