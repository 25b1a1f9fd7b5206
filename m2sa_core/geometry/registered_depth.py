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
Depth bound to the colour image it belongs to, or refused.

A target's mask is in the colour image's pixels, so its depth must be registered to that
image: the same frame, the same size, and a camera model of that size (e.g. RealSense
``aligned_depth_to_color``). :func:`register_depth` checks the three and binds depth and
camera model once per frame; depth that fails is refused with :class:`DepthMismatch`,
whose text says what to publish instead, because a wrong point is worse than none.
"""

from __future__ import annotations

from dataclasses import dataclass

from m2sa_core.camera import Intrinsics
from m2sa_core.geometry.camera_model import as_camera_model, PinholeCameraModel
import numpy as np


class DepthMismatch(ValueError):
    """Depth that does not belong to the colour image (another frame, size or camera_info)."""


@dataclass(frozen=True)
class RegisteredDepth:
    """
    A depth image known to be registered to the colour image of the same size.

    Float32 metres, H x W, NaN or 0 for none; with the colour camera's model.
    """

    depth_m: np.ndarray
    camera: PinholeCameraModel
    frame_id: str = ""

    @property
    def intrinsics(self) -> Intrinsics:
        """Return the pinhole the pixels go through (the camera model's P or K)."""
        return self.camera.intrinsics


def register_depth(depth_m: np.ndarray, camera: PinholeCameraModel | Intrinsics, colour_shape: tuple[int, int],
                   depth_frame: str = "", colour_frame: str = "",
                   allow_frame_mismatch: bool = False) -> RegisteredDepth:
    """
    Check that ``depth_m`` (H, W) can be used with the colour image and bind it.

    Refused (:class:`DepthMismatch`, the text says what to publish instead): depth in
    another frame than the colour image (unless ``allow_frame_mismatch``: registered
    anyway), depth of another size than ``colour_shape`` (H, W), camera_info of another
    size than the depth. Empty frame ids are not compared (as the node does).
    ``camera`` is the colour camera's model (an :class:`Intrinsics` is a rectified pinhole).
    """
    depth_m = np.asarray(depth_m)
    model = as_camera_model(camera)
    if depth_m.ndim != 2:
        raise DepthMismatch(f"depth must be a single-channel H x W image, got shape {depth_m.shape}")
    if depth_frame and colour_frame and depth_frame != colour_frame and not allow_frame_mismatch:
        raise DepthMismatch(f"depth is in frame '{depth_frame}' but the colour image is in '{colour_frame}'; "
                            "publish depth registered to the colour camera (e.g. aligned_depth_to_color)")
    if depth_m.shape != tuple(colour_shape[:2]):
        raise DepthMismatch(f"depth image is {depth_m.shape[1]}x{depth_m.shape[0]} but the colour image is "
                            f"{colour_shape[1]}x{colour_shape[0]}; publish depth registered to the colour camera "
                            "(e.g. aligned_depth_to_color)")
    if (model.height, model.width) != depth_m.shape:
        raise DepthMismatch(f"camera_info is {model.width}x{model.height} but depth is "
                            f"{depth_m.shape[1]}x{depth_m.shape[0]}")
    return RegisteredDepth(depth_m.astype(np.float32, copy=False), model, depth_frame or colour_frame)
