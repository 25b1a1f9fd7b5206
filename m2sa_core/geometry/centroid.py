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
The v2 centroid of a target: one 3-D point from its mask and registered depth.

A grasp planner wants a point, not only a mask: the median valid depth inside the
(eroded) mask, at the mean pixel of those valid pixels, back-projected through the camera
model (m2sa_core/geometry/camera_model.py: P for a rectified image, K and D for a raw
one), in the colour camera's optical frame (REP 103: x right, y down, z forward).
Erosion keeps mixed pixels at object borders - where depth jumps to the background - out
of the estimate; the median ignores the rest. Unchanged in its rule since interfaces v2,
so v2 clients read the same numbers; the oriented box and normal are target.py's.
"""

from __future__ import annotations

import cv2
from m2sa_core.camera import Intrinsics
from m2sa_core.geometry.camera_model import as_camera_model, PinholeCameraModel
import numpy as np


def erode_mask(mask: np.ndarray, erosion_px: int) -> np.ndarray:
    """
    Shrink a mask by ``erosion_px`` pixels.

    A mask thinner than that is kept whole (better a border-contaminated estimate
    than none for a thin handle).
    """
    mask = np.asarray(mask, dtype=bool)
    if erosion_px <= 0:
        return mask
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * erosion_px + 1, 2 * erosion_px + 1))
    eroded = cv2.erode(mask.astype(np.uint8), kernel, borderType=cv2.BORDER_CONSTANT, borderValue=0) > 0
    return eroded if eroded.any() else mask


def mask_centroid(mask: np.ndarray, depth_m: np.ndarray, camera: PinholeCameraModel | Intrinsics,
                  erosion_px: int = 3, min_valid_pixels: int = 1) -> tuple[float, float, float] | None:
    """
    (x, y, z) in metres in the optical frame, or None when the mask has no valid depth.

    z is the median of the valid depths inside the eroded mask; x and y back-project the
    mean pixel of those same valid pixels at that depth. Mask, depth and camera must
    describe the same image size (checked: a mismatch is a ValueError, not a wrong point).
    """
    model = as_camera_model(camera)
    if mask.shape != depth_m.shape:
        raise ValueError(f"mask {mask.shape[1]}x{mask.shape[0]} and depth "
                         f"{depth_m.shape[1]}x{depth_m.shape[0]} differ in size")
    if model.width and model.height and (model.height, model.width) != depth_m.shape:
        raise ValueError(f"camera_info is {model.width}x{model.height} but depth is "
                         f"{depth_m.shape[1]}x{depth_m.shape[0]}")
    region = erode_mask(mask, erosion_px)
    valid = region & np.isfinite(depth_m)
    count = int(valid.sum())
    if count < max(1, min_valid_pixels):
        return None
    vs, us = np.nonzero(valid)
    z = float(np.median(depth_m[valid]))
    x, y, z = model.back_project(np.array([us.mean()]), np.array([vs.mean()]), np.array([z]))[0]
    return (float(x), float(y), float(z))
