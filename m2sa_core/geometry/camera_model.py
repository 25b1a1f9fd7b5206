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
How a pixel of the colour image becomes a ray: the camera model as ROS defines it.

ROS describes a camera by sensor_msgs/CameraInfo, and image_geometry's
``PinholeCameraModel`` is how ROS code reads it (depth_image_proc turns depth into points
through it). Its rules, which this module follows so a target's points land where
depth_image_proc's cloud of the same pixels would:

* **Rectified images** (``image_rect``, the output of image_proc, and what
  depth_image_proc assumes: the default here) are back-projected through the
  projection matrix P: ``x = (u - cx') / fx'``, ``y = (v - cy') / fy'`` with
  ``fx' = P[0]``, ``cx' = P[2]``, ``fy' = P[5]``, ``cy' = P[6]``. P's translation terms
  Tx, Ty (non-zero only for the second camera of a stereo pair) are not used, as
  image_geometry's Python ``projectPixelTo3dRay`` and depth_image_proc do not use them:
  the points stay in this image's own optical frame, the frame its header names.
* **Raw images** (``image_raw``, still distorted) are undistorted through K and D with
  OpenCV, as image_geometry's ``rectifyPoint`` does: ``cv2.undistortPoints`` for
  ``plumb_bob`` and ``rational_polynomial``, ``cv2.fisheye.undistortPoints`` for
  ``equidistant`` (image_geometry's C++ model; its Python one reads every D as
  plumb_bob's). R, the rectification rotation (identity for a monocular camera), then
  turns the ray into the rectified frame, so a camera gives the same points from its raw
  and its rectified stream. The undistortion iterates to convergence (OpenCV's default
  stops after 5 steps, which leaves pixels of error near the corners of a wide lens).
  Any other distortion model is refused in one line: a point through the wrong model is
  worse than none. Coefficients that are all zero (or none) are a pinhole, whatever
  the model's name.
* **Binning and ROI** shift and scale K and P as image_geometry does
  (``(c - offset) / binning``, ``f / binning``); the image the model describes is the
  ROI (all zeros = the full ``width`` x ``height``) divided by the binning.
* **A P of all zeros** (some drivers publish one): image_geometry uses it as it is, and
  every ray is NaN. Here K stands in for it when D holds no distortion, where the
  rectified image is the raw one; with distortion such an image cannot be rectified,
  so it is refused, naming the parameter that declares it raw.
* **A R of all zeros** (not set) is the identity, as CameraInfo documents for a
  monocular camera.

Pure numpy and OpenCV; nothing here imports ROS, so the model is built from CameraInfo's
fields (:meth:`PinholeCameraModel.from_camera_info`) or from anything that has them
(:meth:`PinholeCameraModel.from_msg`, the node's sensor_msgs/CameraInfo).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import cv2
from m2sa_core.camera import Intrinsics
import numpy as np

PLUMB_BOB = "plumb_bob"
RATIONAL_POLYNOMIAL = "rational_polynomial"
EQUIDISTANT = "equidistant"
DISTORTION_MODELS = (PLUMB_BOB, RATIONAL_POLYNOMIAL, EQUIDISTANT)
# Coefficient counts OpenCV accepts for each model (ROS writes 5, 8 and 4).
_COEFFICIENTS = {PLUMB_BOB: (4, 5, 8, 12, 14), RATIONAL_POLYNOMIAL: (4, 5, 8, 12, 14), EQUIDISTANT: (4,)}
# Undistortion to convergence: 1e-10 in normalised coordinates is far below a pixel.
_CRITERIA = (cv2.TERM_CRITERIA_COUNT | cv2.TERM_CRITERIA_EPS, 100, 1e-10)


def _matrix(values: Any, rows: int, cols: int, name: str) -> np.ndarray:
    flat = np.asarray(values if values is not None else [], dtype=np.float64).reshape(-1)
    if flat.size == 0:
        return np.zeros((rows, cols))
    if flat.size != rows * cols:
        raise ValueError(f"camera_info {name} must have {rows * cols} elements, got {flat.size}")
    return flat.reshape(rows, cols).copy()


@dataclass(frozen=True, eq=False)
class PinholeCameraModel:
    """
    One camera_info's back-projection (module doc).

    The image is ``width`` x ``height`` pixels, ``k`` (3, 3) and ``p`` (3, 4) have binning
    and ROI applied, ``r`` (3, 3), ``d`` (n,) and ``distortion_model`` are CameraInfo's,
    ``rectified`` says which matrix the pixels go through (P when true, K and D when
    false).
    """

    width: int
    height: int
    k: np.ndarray
    p: np.ndarray
    r: np.ndarray
    d: np.ndarray
    distortion_model: str = PLUMB_BOB
    rectified: bool = True

    @classmethod
    def from_camera_info(cls, *, k: Sequence[float], width: int, height: int, p: Sequence[float] | None = None,
                         d: Sequence[float] = (), r: Sequence[float] | None = None, distortion_model: str = "",
                         binning_x: int = 0, binning_y: int = 0,
                         roi: tuple[int, int, int, int] = (0, 0, 0, 0), rectified: bool = True) -> "PinholeCameraModel":
        """
        Return the model of a CameraInfo's fields (``roi`` = x_offset, y_offset, width, height).

        Refused with a ValueError naming the field: a K without a positive focal length
        where K is read (the camera is not calibrated), a matrix of the wrong size, a
        rectified image whose P is all zeros while D is not, or a raw image whose
        distortion model is not plumb_bob, rational_polynomial or equidistant (or has the
        wrong number of coefficients for it).

        A rectified image with a valid P reads only P, so its K may be all zeros, as some
        drivers of rectified or simulated cameras publish it; image_geometry accepts that too.
        """
        k_full = _matrix(k, 3, 3, "K")
        p_full = _matrix(p, 3, 4, "P")
        if (not rectified or not p_full.any()) and (k_full[0, 0] <= 0 or k_full[1, 1] <= 0):
            raise ValueError(f"camera_info K has a non-positive focal length (fx={k_full[0, 0]}, "
                             f"fy={k_full[1, 1]}): the camera is not calibrated")
        r_mat = _matrix(r, 3, 3, "R")
        if not r_mat.any():
            r_mat = np.eye(3)
        d_vec = np.asarray(d if d is not None else [], dtype=np.float64).reshape(-1)
        model = (distortion_model or "").strip()
        distorted = bool(d_vec.any())
        if rectified and not p_full.any():
            if distorted:
                raise ValueError("camera_info P is all zeros while D is not: the image cannot be rectified "
                                 "without P; if it is the raw image, set image_rectified:=false")
            p_full = np.hstack([k_full, np.zeros((3, 1))])
        if rectified and (p_full[0, 0] <= 0 or p_full[1, 1] <= 0):
            raise ValueError(f"camera_info P has a non-positive focal length (fx'={p_full[0, 0]}, "
                             f"fy'={p_full[1, 1]})")
        if not rectified and distorted:
            if model not in DISTORTION_MODELS:
                raise ValueError(f"camera_info distortion_model '{model}' is not supported for a raw image: "
                                 f"use {', '.join(DISTORTION_MODELS)}, or publish the rectified image")
            if d_vec.size not in _COEFFICIENTS[model]:
                raise ValueError(f"camera_info D has {d_vec.size} coefficients, but {model} takes "
                                 f"{' or '.join(str(n) for n in _COEFFICIENTS[model])}")
        bx, by = max(1, int(binning_x)), max(1, int(binning_y))
        x_off, y_off, roi_w, roi_h = (int(v) for v in roi)
        if (x_off, y_off, roi_w, roi_h) == (0, 0, 0, 0):
            roi_w, roi_h = int(width), int(height)
        k_adj, p_adj = k_full.copy(), p_full.copy()
        for m in (k_adj, p_adj):
            m[0, 0] /= bx
            m[1, 1] /= by
            m[0, 2] = (m[0, 2] - x_off) / bx
            m[1, 2] = (m[1, 2] - y_off) / by
        return cls(width=roi_w // bx, height=roi_h // by, k=k_adj, p=p_adj, r=r_mat, d=d_vec,
                   distortion_model=model, rectified=bool(rectified))

    @classmethod
    def from_msg(cls, info: Any, *, rectified: bool = True,
                 size: tuple[int, int] | None = None) -> "PinholeCameraModel":
        """
        Return the model of a sensor_msgs/CameraInfo (read by field name, ROS is not imported).

        ``size`` (width, height) stands in for a message whose width and height are 0.
        """
        width, height = int(info.width), int(info.height)
        if size is not None and (width == 0 or height == 0):
            width, height = int(size[0]), int(size[1])
        roi = getattr(info, "roi", None)
        roi_fields = ((int(roi.x_offset), int(roi.y_offset), int(roi.width), int(roi.height))
                      if roi is not None else (0, 0, 0, 0))
        return cls.from_camera_info(k=info.k, p=info.p, d=info.d, r=info.r, distortion_model=info.distortion_model,
                                    width=width, height=height, binning_x=int(getattr(info, "binning_x", 0)),
                                    binning_y=int(getattr(info, "binning_y", 0)), roi=roi_fields, rectified=rectified)

    @classmethod
    def from_intrinsics(cls, intrinsics: Intrinsics) -> "PinholeCameraModel":
        """Return a rectified, distortion-free model whose P is ``intrinsics``' K (the synthetic world's camera)."""
        k = np.array(intrinsics.k, dtype=np.float64).reshape(3, 3)
        return cls(width=int(intrinsics.width), height=int(intrinsics.height), k=k,
                   p=np.hstack([k, np.zeros((3, 1))]), r=np.eye(3), d=np.zeros(0), distortion_model="")

    @property
    def intrinsics(self) -> Intrinsics:
        """Return the pinhole the pixels go through: P's (rectified) or K's (raw, before undistortion)."""
        m = self.p if self.rectified else self.k
        return Intrinsics(fx=float(m[0, 0]), fy=float(m[1, 1]), cx=float(m[0, 2]), cy=float(m[1, 2]),
                          width=self.width, height=self.height)

    @property
    def distorted(self) -> bool:
        """Raw pixels that need undistortion (a raw image with a non-zero D)."""
        return not self.rectified and bool(self.d.any())

    @property
    def rotation(self) -> np.ndarray | None:
        """(3, 3) R applied after back-projecting a raw pixel, or None (rectified, or R = I)."""
        if self.rectified or np.array_equal(self.r, np.eye(3)):
            return None
        return self.r

    def normalized(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
        """
        (N, 2) float64 ideal coordinates (x, y) of pixels ``u``, ``v`` (N,).

        The ray is (x, y, 1) in the camera's own frame (before :attr:`rotation`).
        """
        u = np.asarray(u, dtype=np.float64).reshape(-1)
        v = np.asarray(v, dtype=np.float64).reshape(-1)
        if not self.distorted:
            i = self.intrinsics
            return np.stack([(u - i.cx) / i.fx, (v - i.cy) / i.fy], axis=1)
        if u.size == 0:
            return np.empty((0, 2))
        pixels = np.stack([u, v], axis=1).reshape(-1, 1, 2)
        if self.distortion_model == EQUIDISTANT:
            ideal = cv2.fisheye.undistortPoints(pixels, self.k, self.d, criteria=_CRITERIA)
        else:
            ideal = cv2.undistortPoints(pixels, self.k, self.d, criteria=_CRITERIA)
        return ideal.reshape(-1, 2).astype(np.float64, copy=False)

    def back_project(self, u: np.ndarray, v: np.ndarray, z: np.ndarray) -> np.ndarray:
        """
        Return the (N, 3) float64 points of pixels ``u``, ``v`` (N,) whose depth is ``z`` (N,).

        The depth is along the optical axis, as a depth image holds it; the points are in
        the output frame (module doc).
        """
        xy = self.normalized(u, v)
        z = np.asarray(z, dtype=np.float64).reshape(-1)
        points = np.column_stack([xy * z[:, None], z])
        rotation = self.rotation
        return points if rotation is None else points @ rotation.T

    def rays(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
        """
        (N, 3) unit rays through pixels ``u``, ``v`` (N,) in the output frame.

        What image_geometry's ``projectPixelTo3dRay`` gives for a rectified pixel (for
        a raw one: of ``rectifyPoint``'s result).
        """
        points = self.back_project(u, v, np.ones(np.size(u)))
        return points / np.linalg.norm(points, axis=1, keepdims=True)


def as_camera_model(camera: "PinholeCameraModel | Intrinsics") -> PinholeCameraModel:
    """``camera`` as a model: an :class:`Intrinsics` is a rectified pinhole without distortion."""
    return camera if isinstance(camera, PinholeCameraModel) else PinholeCameraModel.from_intrinsics(camera)
