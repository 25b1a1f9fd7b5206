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
The depth step: a frame's registered depth and intrinsics, bound once, measuring its targets.

Depth and camera_info arrive on their own topics (stamped_buffer.StampedBuffer keeps the
last few); a command's frame is bound to the pair nearest to its stamp before the model
runs, because a 30 Hz depth stream keeps a third of a second in the buffer and a 7B
model takes longer than that. :func:`bind_depth` is the one place that decides whether
that depth may be used with the colour image - the checks themselves are
m2sa_core.geometry.registered_depth's (frame, image size, camera_info size), and the
camera_info's own frame - and says why not, naming the cause (depth_health.py decides
when): a wrong point is worse than none, and a missing one should not go unexplained.

What it binds, :class:`TargetMeasure`, measures every target of the result from its
*visible* mask with the same depth: the v2 ``centroid`` (m2sa_core.geometry.centroid: the
median depth of the eroded mask, unchanged so v2 clients read the same numbers) and the
v3 geometry (m2sa_core.geometry.target: the oriented box, the normal and the points). Without
depth nothing is bound and nothing is computed, so a camera without depth pays nothing.
Pure numpy and message fields: rclpy is never imported.
"""

from __future__ import annotations

from dataclasses import dataclass
import re
from typing import Any, Callable

from m2sa_core.geometry.camera_model import PinholeCameraModel
from m2sa_core.geometry.centroid import mask_centroid
from m2sa_core.geometry.registered_depth import DepthMismatch, register_depth, RegisteredDepth
from m2sa_core.geometry.target import GeometryParams, target_geometry, TargetGeometry
from m2sa_ros.depth.compressed_depth import decode_compressed_depth, is_compressed_depth
from m2sa_ros.depth.depth_health import BOUND, DepthHealth, DepthOutcome, MISSING, REFUSED
from m2sa_ros.depth.depth_settings import DepthSettings
from m2sa_ros.depth.stamped_buffer import StampedBuffer
from m2sa_ros.messages.image_conversion import depth_to_metres, ImageConversionError
import numpy as np


@dataclass(frozen=True)
class TargetMeasure:
    """
    A frame's registered depth and how its targets are measured with it.

    ``with_points`` is the ``target_points`` parameter: without it the cloud is not
    downsampled (the voxel grid is most of the geometry's cost) and not sent.
    """

    depth: RegisteredDepth
    centroid_erosion_px: int = 3
    geometry_params: GeometryParams = GeometryParams()
    with_points: bool = True

    def centroid(self, mask: np.ndarray) -> tuple[float, float, float] | None:
        """Return the v2 centroid of a visible mask (see m2sa_core.geometry.centroid)."""
        return mask_centroid(mask, self.depth.depth_m, self.depth.camera, erosion_px=self.centroid_erosion_px)

    def geometry(self, mask: np.ndarray) -> TargetGeometry:
        """Return the v3 geometry of a visible mask (see m2sa_core.geometry.target's rules)."""
        return target_geometry(mask, self.depth, self.geometry_params)


@dataclass(frozen=True)
class DepthSource:
    """
    One camera's depth inputs, as the depth step reads them (pipeline.CommandPipeline builds it from a Camera).

    Its depth and camera_info buffers and the topics they come on (for the warnings),
    ``where`` the camera's name (a warning's key) and ``health`` its DepthHealth (None:
    a refusal is said once per camera and problem, missing depth never).
    """

    depth: StampedBuffer
    camera_info: StampedBuffer
    depth_topic: str
    camera_info_topic: str = "camera_info"
    where: str = ""
    health: DepthHealth | None = None


def bind_depth(frame: Any, source: DepthSource, settings: DepthSettings,
               warn_once: Callable[[str, str], None]) -> tuple[TargetMeasure | None, str]:
    """
    Bind ``source``'s depth frame and intrinsics nearest to ``frame`` (a latest_frame.Frame).

    Returns (measure, "bound") or (None, why): "missing" when no depth / camera_info is
    within ``depth_tolerance`` yet (worth another look after the model ran), "refused" when
    the ones there cannot be used. The camera's ``health`` counts the outcome and decides
    what to say through ``warn_once(key, text)``, naming the cause (depth_health.py's
    rules); without it a refusal is said once per camera (``where``) and problem. The depth
    may be a sensor_msgs/Image or a compressedDepth CompressedImage (``use_compressed_depth``).
    ``settings``: the depth parameters (depth_settings.DepthSettings), their 3-D fit's
    constants built once.
    """
    measure, outcome = _bind(frame, source, settings)
    if source.health is not None:
        said = source.health.record(frame.key, outcome, settings)
        if said is not None:
            warn_once(f"depth:{source.where}:{said[0]}", said[1])
    elif outcome.state == REFUSED:
        warn_once(f"depth:{source.where}:{outcome.reason}", f"no centroids: {outcome.reason}")
    return measure, outcome.state


def _bind(frame: Any, source: DepthSource, settings: DepthSettings) -> tuple[TargetMeasure | None, DepthOutcome]:
    """Return the measure, or None and why not (the outcome's cause and one-line reason)."""
    depth_topic, camera_info_topic = source.depth_topic, source.camera_info_topic
    tolerance_ns = int(settings.depth_tolerance * 1e9)
    found_depth, found_info = source.depth.closest(frame.stamp_ns), source.camera_info.closest(frame.stamp_ns)
    missing = (_missing(found_depth, tolerance_ns, depth_topic, "depth")
               or _missing(found_info, tolerance_ns, camera_info_topic, "camera_info"))
    if missing is not None:
        return None, missing
    assert found_depth is not None and found_info is not None
    depth_msg, info = found_depth[1], found_info[1]
    depth_frame, colour_frame = depth_msg.header.frame_id, frame.header.frame_id
    info_frame = info.header.frame_id
    if info_frame and colour_frame and info_frame != colour_frame and not settings.allow_depth_frame_mismatch:
        return None, DepthOutcome(REFUSED, "camera_info_frame", (
            f"camera_info on {camera_info_topic} refused: it is in frame '{info_frame}' but the colour image is in "
            f"'{colour_frame}'; publish the colour camera's camera_info (registered depth shares it), or set "
            "allow_depth_frame_mismatch:=true if it is the colour camera's anyway"))
    depth_m = None
    try:
        if is_compressed_depth(depth_msg):
            depth_m = decode_compressed_depth(depth_msg, what=depth_topic)
        else:
            depth_m = depth_to_metres(depth_msg, what=depth_topic)
        camera = PinholeCameraModel.from_msg(info, rectified=settings.image_rectified, size=depth_m.shape[::-1])
        registered = register_depth(depth_m, camera, (frame.height, frame.width), depth_frame, colour_frame,
                                    settings.allow_depth_frame_mismatch)
    except (ImageConversionError, ValueError) as exc:  # DepthMismatch is a ValueError
        frame_mismatch = bool(depth_frame and colour_frame and depth_frame != colour_frame)
        hint = ""
        if isinstance(exc, DepthMismatch) and frame_mismatch and not settings.allow_depth_frame_mismatch:
            cause, hint = "depth_frame", ", or set allow_depth_frame_mismatch:=true if it is registered anyway"
        elif isinstance(exc, ImageConversionError):
            cause = "decode:" + re.sub(r"\d+", "N", str(exc))  # one cause per kind of fault, whatever its sizes
        elif isinstance(exc, DepthMismatch) and depth_m is not None and depth_m.shape[:2] != (frame.height,
                                                                                              frame.width):
            cause = "depth_size"
        elif isinstance(exc, DepthMismatch):
            cause = "camera_info_size"
        else:
            cause = "invalid"
        return None, DepthOutcome(REFUSED, cause, f"depth on {depth_topic} refused: {exc}{hint}")
    return (TargetMeasure(registered, int(settings.centroid_erosion_px), settings.geometry,
                          bool(settings.target_points)), DepthOutcome(BOUND))


def _missing(found: tuple[int, Any] | None, tolerance_ns: int, topic: str, what: str) -> DepthOutcome | None:
    """Why the nearest ``what`` (depth or camera_info) cannot be used for the frame, or None."""
    if found is None:
        return DepthOutcome(MISSING, f"no_{what}", f"no {what} received on {topic}; targets get no centroid or "
                            "pose (a camera without depth can ignore this)")
    offset = found[0]
    if abs(offset) <= tolerance_ns:
        return None
    off_ms, tol_ms = abs(offset) / 1e6, tolerance_ns / 1e6
    side = "before" if offset < 0 else "after"
    return DepthOutcome(MISSING, f"{what}_late", (
        f"the {what} on {topic} nearest the colour image is stamped {off_ms:.0f} ms {side} it, "
        f"{off_ms - tol_ms:.0f} ms outside depth_tolerance ({tol_ms:.0f} ms); check the stamps, or raise "
        "depth_tolerance"))
