"""3-D target centroids from a depth image aligned to the colour image.

A grasp planner wants a point, not only a mask: for each target the node takes the
median valid depth inside the (eroded) mask and back-projects the mask's valid pixels
through the camera intrinsics K, giving a point in the colour camera's optical frame
(REP 103: x right, y down, z forward). Erosion keeps mixed pixels at object borders -
where depth jumps to the background - out of the estimate; the median ignores the rest.

Depth and camera_info arrive on their own topics; :class:`StampedBuffer` keeps the last
few and finds the one nearest to the colour image's stamp; depth_binding.bind_depth
checks that the pair fits the colour image before a command's masks are measured with
it (this centroid, and the 3-D box of target_geometry.py). Pure numpy/OpenCV: rclpy is
never imported.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Generic, TypeVar

import cv2
import numpy as np

from m2sa_core.camera import Intrinsics  # noqa: F401 - the node's name for it (CameraInfo intrinsics)


T = TypeVar("T")


class StampedBuffer(Generic[T]):
    """The last ``capacity`` items with their stamps (nanoseconds); thread-safe.

    Sensor callbacks push, the worker thread looks up the item nearest in time to the
    colour image, so a depth frame from a slightly different moment is never used.
    """

    def __init__(self, capacity: int = 10) -> None:
        if capacity < 1:
            raise ValueError(f"StampedBuffer capacity must be >= 1, got {capacity}")
        self._items: deque[tuple[int, T]] = deque(maxlen=capacity)
        self._lock = threading.Lock()

    def push(self, stamp_ns: int, item: T) -> None:
        with self._lock:
            self._items.append((int(stamp_ns), item))

    def nearest(self, stamp_ns: int, tolerance_ns: int) -> T | None:
        """The item whose stamp is closest to ``stamp_ns``, if within ``tolerance_ns``."""
        with self._lock:
            if not self._items:
                return None
            best_stamp, best = min(self._items, key=lambda entry: abs(entry[0] - stamp_ns))
        return best if abs(best_stamp - stamp_ns) <= tolerance_ns else None

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)


def erode_mask(mask: np.ndarray, erosion_px: int) -> np.ndarray:
    """Shrink a mask by ``erosion_px`` pixels; a mask thinner than that is kept whole
    (better a border-contaminated estimate than none for a thin handle)."""
    mask = np.asarray(mask, dtype=bool)
    if erosion_px <= 0:
        return mask
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * erosion_px + 1, 2 * erosion_px + 1))
    eroded = cv2.erode(mask.astype(np.uint8), kernel, borderType=cv2.BORDER_CONSTANT, borderValue=0) > 0
    return eroded if eroded.any() else mask


def mask_centroid(mask: np.ndarray, depth_m: np.ndarray, intrinsics: Intrinsics,
                  erosion_px: int = 3, min_valid_pixels: int = 1) -> tuple[float, float, float] | None:
    """(x, y, z) in metres in the optical frame, or None when the mask has no valid depth.

    z is the median of the valid depths inside the eroded mask; x and y back-project the
    mean pixel of those same valid pixels at that depth. Mask, depth and intrinsics must
    describe the same image size (checked: a mismatch is a ValueError, not a wrong point).
    """
    if mask.shape != depth_m.shape:
        raise ValueError(f"mask {mask.shape[1]}x{mask.shape[0]} and depth "
                         f"{depth_m.shape[1]}x{depth_m.shape[0]} differ in size")
    if intrinsics.width and intrinsics.height and (intrinsics.height, intrinsics.width) != depth_m.shape:
        raise ValueError(f"camera_info is {intrinsics.width}x{intrinsics.height} but depth is "
                         f"{depth_m.shape[1]}x{depth_m.shape[0]}")
    region = erode_mask(mask, erosion_px)
    valid = region & np.isfinite(depth_m)
    count = int(valid.sum())
    if count < max(1, min_valid_pixels):
        return None
    vs, us = np.nonzero(valid)
    z = float(np.median(depth_m[valid]))
    u, v = float(us.mean()), float(vs.mean())
    x = (u - intrinsics.cx) * z / intrinsics.fx
    y = (v - intrinsics.cy) * z / intrinsics.fy
    return (x, y, z)
