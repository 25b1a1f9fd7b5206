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
A target's masks on the wire (interfaces v5): cropped to their box, a 1-bit PNG each.

Full-frame mono8 masks were most of a result: 1280x720 bytes per mask, whatever the
target's size, twice for an amodal target, and again in every Track feedback. A mask is
sent as MoveIt Pro's ``Mask2D`` sends one, cropped to its box with the box's offset
(``Target.bbox`` for the visible mask, ``Target.amodal_bbox`` for the complete shape),
and the crop is compressed losslessly as a PNG in a sensor_msgs/CompressedImage whose
``format`` is what image_transport's compressed plugin writes for a mono8 PNG
(:data:`PNG_FORMAT`): image_transport's compressed subscriber, cv_bridge's
``toCvCopy(CompressedImage)``, ``cv::imdecode`` and any PNG reader decode it, in C++ as in
Python, to mono8 0 / 255 as the full-frame masks were. COCO RLE was the other candidate
and is about as small, but only pycocotools reads it. The PNG is 1-bit grayscale (OpenCV's
``IMWRITE_PNG_BILEVEL``): a third the size of an 8-bit one, and decoders expand it to 8 bits.
bench/bench_result_bytes.py measures what this saves (bench/RESULTS.md).

A client reads a target's masks back as full-frame booleans with :func:`target_mask` and
:func:`amodal_target_mask` (or :func:`requested_mask`, the shape the command asked for),
whichever way the node sent them: cropped, or full frame as well with the node's
``full_frame_masks`` on. Like image_conversion, the readers take anything shaped like the
messages; only :func:`fill_target_masks` imports sensor_msgs. Every malformed mask raises
:class:`MaskEncodingError` naming the field.
"""

from __future__ import annotations

from typing import Any

import cv2
from m2sa_core.types import mask_bbox
from m2sa_ros.messages.image_conversion import ImageConversionError, mask_to_msg, msg_to_mask
import numpy as np

# image_transport's compressed plugin writes "<encoding>; png compressed " for a mono8 PNG
# (no target format for a mono image); its subscriber and cv_bridge read the encoding before ';'.
PNG_FORMAT = "mono8; png compressed"
# 1-bit PNG at zlib's default level: a 480x570 px mask in a few hundred bytes, well under a
# millisecond to encode (level 9 saves another tenth for two to three times the time).
_PNG_PARAMS = [cv2.IMWRITE_PNG_BILEVEL, 1, cv2.IMWRITE_PNG_COMPRESSION, 6]
MASK_AMODAL = 1  # m2sa_ros/Target.MASK_AMODAL, without importing the generated messages


class MaskEncodingError(ValueError):
    """A mask in a message that cannot be decoded (bad PNG, box outside the image, sizes that disagree)."""


def encode_crop(mask: np.ndarray, box: tuple[int, int, int, int] | None = None
                ) -> tuple[tuple[int, int, int, int], bytes]:
    """
    Return a boolean (H, W) mask's box (x, y, width, height) and the PNG of the mask inside it.

    ``box`` is the mask's tight box when the caller has it already (result_conversion
    does), else it is found here. An empty mask has the box (0, 0, 0, 0) and no bytes: a
    PNG cannot be 0 x 0.
    """
    mask = np.asarray(mask, dtype=bool)
    if mask.ndim != 2:
        raise MaskEncodingError(f"encode_crop: expected a 2-D mask, got shape {mask.shape}")
    x, y, w, h = mask_bbox(mask) if box is None else (int(v) for v in box)
    if w == 0 or h == 0:
        return (0, 0, 0, 0), b""
    crop = mask[y:y + h, x:x + w].astype(np.uint8) * 255
    ok, png = cv2.imencode(".png", crop, _PNG_PARAMS)
    if not ok:  # pragma: no cover - OpenCV encodes any 2-D uint8 array
        raise MaskEncodingError(f"encode_crop: OpenCV could not encode a {w}x{h} mask as PNG")
    return (x, y, w, h), png.tobytes()


def decode_crop(data: bytes, box: tuple[int, int, int, int], height: int, width: int,
                what: str = "mask_crop") -> np.ndarray:
    """Return the full-frame boolean (height, width) mask of a crop's PNG ``data`` at ``box`` (x, y, w, h)."""
    x, y, w, h = (int(v) for v in box)
    full = np.zeros((int(height), int(width)), dtype=bool)
    if w == 0 or h == 0:
        if len(data):
            raise MaskEncodingError(f"{what}: {len(data)} bytes for an empty box")
        return full
    if x < 0 or y < 0 or x + w > width or y + h > height:
        raise MaskEncodingError(f"{what}: box {w}x{h} at ({x}, {y}) is outside the {width}x{height} image")
    if not len(data):
        raise MaskEncodingError(f"{what}: no data for a {w}x{h} box")
    crop = cv2.imdecode(np.frombuffer(bytes(data), dtype=np.uint8), cv2.IMREAD_UNCHANGED)
    if crop is None:
        raise MaskEncodingError(f"{what}: {len(data)} bytes are not a PNG OpenCV can decode")
    if crop.ndim != 2 or crop.shape != (h, w):
        raise MaskEncodingError(f"{what}: the PNG is {crop.shape[1]}x{crop.shape[0]}"
                                f"{'' if crop.ndim == 2 else f'x{crop.shape[2]}'}, its box {w}x{h}")
    full[y:y + h, x:x + w] = crop > 0
    return full


def _box(roi: Any) -> tuple[int, int, int, int]:
    return int(roi.x_offset), int(roi.y_offset), int(roi.width), int(roi.height)


def _crop_msg(data: bytes, header: Any) -> Any:
    from sensor_msgs.msg import CompressedImage

    msg = CompressedImage(format=PNG_FORMAT)
    if header is not None:
        msg.header = header
    msg.data = data
    return msg


def fill_target_masks(msg: Any, mask: np.ndarray, amodal_mask: np.ndarray | None, header: Any,
                      full_frame: bool = False) -> None:
    """
    Set a Target message's masks from boolean full-frame masks.

    ``mask_crop`` always, cropped to ``msg.bbox``, which must hold the visible mask's tight
    box already (result_conversion sets it: the box is a field of its own);
    ``amodal_bbox`` and ``amodal_mask_crop`` when there is a complete shape (None: none,
    the crop's ``format`` stays empty). ``full_frame`` (the node's ``full_frame_masks``)
    also fills v4's full-frame ``mask`` / ``amodal_mask``.
    """
    _, data = encode_crop(mask, _box(msg.bbox))
    msg.mask_crop = _crop_msg(data, header)
    if full_frame:
        msg.mask = mask_to_msg(mask, header)
    if amodal_mask is None:
        return
    box, data = encode_crop(amodal_mask)
    msg.amodal_bbox.x_offset, msg.amodal_bbox.y_offset, msg.amodal_bbox.width, msg.amodal_bbox.height = box
    msg.amodal_mask_crop = _crop_msg(data, header)
    if full_frame:
        msg.amodal_mask = mask_to_msg(amodal_mask, header)


def _from_crop(crop: Any, roi: Any, height: int, width: int, what: str) -> np.ndarray:
    fmt = str(crop.format)
    if fmt.split(";", 1)[0].strip() != "mono8" or "png" not in fmt:
        raise MaskEncodingError(f"{what}: format '{fmt}', expected '{PNG_FORMAT}'")
    return decode_crop(bytes(crop.data), _box(roi), height, width, what)


def _from_full_frame(image: Any, height: int, width: int, what: str) -> np.ndarray:
    try:
        mask = msg_to_mask(image, what=what)
    except ImageConversionError as exc:
        raise MaskEncodingError(str(exc)) from exc
    if mask.shape != (height, width):
        raise MaskEncodingError(f"{what}: {mask.shape[1]}x{mask.shape[0]}, the image is {width}x{height}")
    return mask


def target_mask(target: Any, height: int, width: int, what: str = "mask") -> np.ndarray:
    """
    Return a Target's visible mask as a full-frame boolean (height, width) array.

    ``height`` and ``width`` are the result's. Read from the full-frame ``mask`` when the
    node sent one, else from ``mask_crop`` at ``bbox``.
    """
    if int(target.mask.height) > 0:
        return _from_full_frame(target.mask, height, width, what)
    return _from_crop(target.mask_crop, target.bbox, height, width, f"{what}_crop")


def has_amodal_mask(target: Any) -> bool:
    """Tell whether a Target carries a complete shape (either way it can be sent)."""
    return int(target.amodal_mask.height) > 0 or bool(str(target.amodal_mask_crop.format))


def amodal_target_mask(target: Any, height: int, width: int, what: str = "amodal_mask") -> np.ndarray | None:
    """Return a Target's complete shape as a full-frame boolean array, or None when it has none."""
    if int(target.amodal_mask.height) > 0:
        return _from_full_frame(target.amodal_mask, height, width, what)
    if not str(target.amodal_mask_crop.format):
        return None
    return _from_crop(target.amodal_mask_crop, target.amodal_bbox, height, width, f"{what}_crop")


def requested_mask(target: Any, height: int, width: int) -> np.ndarray:
    """Return the shape the command asked for: the complete one for MASK_AMODAL (when sent), else the visible one."""
    if int(target.mask_type) == MASK_AMODAL:
        amodal = amodal_target_mask(target, height, width)
        if amodal is not None:
            return amodal
    return target_mask(target, height, width)


def result_masks(result: Any) -> list[np.ndarray]:
    """Return every target's visible mask of a SegmentationResult, full frame, in target order."""
    height, width = int(result.height), int(result.width)
    return [target_mask(t, height, width, what=f"target {i} mask") for i, t in enumerate(result.targets)]
