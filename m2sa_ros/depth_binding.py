"""The depth step: a frame's registered depth and intrinsics, bound once, measuring its targets.

Depth and camera_info arrive on their own topics (centroids.StampedBuffer keeps the
last few); a command's frame is bound to the pair nearest to its stamp before the model
runs, because a 30 Hz depth stream keeps a third of a second in the buffer and a 7B
model takes longer than that. :func:`bind_depth` is the one place that decides whether
that depth may be used with the colour image - the checks themselves are
target_geometry.register_depth's (frame, image size, camera_info size) - and says once
per camera and problem why not: a wrong point is worse than none.

What it binds, :class:`TargetMeasure`, measures every target of the result from its
*visible* mask with the same depth: the v2 ``centroid`` (centroids.mask_centroid: the
median depth of the eroded mask, unchanged so v2 clients read the same numbers) and the
v3 geometry (target_geometry: the oriented box, the normal and the points). Without
depth nothing is bound and nothing is computed, so a camera without depth pays nothing.
Pure numpy and message fields: rclpy is never imported.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from m2sa_ros.centroids import Intrinsics, StampedBuffer, mask_centroid
from m2sa_ros.image_conversion import ImageConversionError, depth_to_metres
from m2sa_ros.target_geometry import (DepthMismatch, GeometryParams, RegisteredDepth, TargetGeometry,
                                      register_depth, target_geometry)


@dataclass(frozen=True)
class TargetMeasure:
    """A frame's registered depth and how its targets are measured with it.

    ``with_points`` is the ``target_points`` parameter: without it the cloud is not
    downsampled (the voxel grid is most of the geometry's cost) and not sent.
    """

    depth: RegisteredDepth
    centroid_erosion_px: int = 3
    geometry_params: GeometryParams = GeometryParams()
    with_points: bool = True

    def centroid(self, mask: np.ndarray) -> tuple[float, float, float] | None:
        """The v2 centroid of a visible mask (see centroids.mask_centroid)."""
        return mask_centroid(mask, self.depth.depth_m, self.depth.intrinsics, erosion_px=self.centroid_erosion_px)

    def geometry(self, mask: np.ndarray) -> TargetGeometry:
        """The v3 geometry of a visible mask (see target_geometry's rules)."""
        return target_geometry(mask, self.depth, self.geometry_params)


def bind_depth(frame: Any, depth: StampedBuffer, camera_info: StampedBuffer, *, tolerance_s: float,
               allow_frame_mismatch: bool, centroid_erosion_px: int, target_points: bool,
               target_points_voxel: float, depth_topic: str, where: str,
               warn_once: Callable[[str, str], None]) -> tuple[TargetMeasure | None, str]:
    """Bind the depth frame and intrinsics nearest to ``frame`` (a latest_frame.Frame).

    Returns (measure, "bound") or (None, why): "missing" when no depth / camera_info is
    within ``tolerance_s`` yet (worth another look after the model ran), "refused" when
    the ones there cannot be used: said once through ``warn_once(key, text)``, keyed by
    ``where`` (the camera's name) and the problem, so each camera's problem is said once.
    """
    tolerance = int(tolerance_s * 1e9)
    depth_msg = depth.nearest(frame.stamp_ns, tolerance)
    info = camera_info.nearest(frame.stamp_ns, tolerance)
    if depth_msg is None or info is None:
        return None, "missing"
    depth_frame, colour_frame = depth_msg.header.frame_id, frame.header.frame_id
    try:
        depth_m = depth_to_metres(depth_msg, what=depth_topic)
        intrinsics = Intrinsics.from_k(info.k, info.width or depth_m.shape[1], info.height or depth_m.shape[0])
        registered = register_depth(depth_m, intrinsics, (frame.height, frame.width), depth_frame, colour_frame,
                                    allow_frame_mismatch)
    except (ImageConversionError, ValueError) as exc:  # DepthMismatch is a ValueError
        hint = ""
        if isinstance(exc, DepthMismatch) and depth_frame and colour_frame and depth_frame != colour_frame:
            hint = ", or set allow_depth_frame_mismatch:=true if it is registered anyway"
        warn_once(f"depth:{where}:{exc}", f"no centroids: depth on {depth_topic} refused: {exc}{hint}")
        return None, "refused"
    params = GeometryParams(voxel_m=float(target_points_voxel) if target_points else 0.0)
    return TargetMeasure(registered, int(centroid_erosion_px), params, bool(target_points)), "bound"
