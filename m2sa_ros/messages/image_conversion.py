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
sensor_msgs images <-> numpy arrays, with cv_bridge's semantics but without cv_bridge.

cv_bridge is not on PyPI, and the node only needs a handful of conversions: camera
images to RGB uint8 (what the Segmenter eats), depth images to metres (for centroids),
compressed images decoded exactly as sent, and masks / overlays back to messages.
Every malformed message raises :class:`ImageConversionError` naming the field at fault,
so the node can turn it into a clear ``success=false`` result instead of a traceback.

The colour input follows ``cv_bridge.toCvCopy(msg, "rgb8")`` exactly: the same set of
encodings is accepted (everything cv_bridge can turn into RGB: rgb/bgr/rgba/bgra in 8
and 16 bits, mono8/16, the four Bayer patterns in 8 and 16 bits, YUV 4:2:2 as UYVY and
YUYV), the same OpenCV colour conversion is applied, and 16-bit data is reduced to 8
bits *after* the colour conversion by the same scaling (``x * 255 / 65535``, rounded).
What cv_bridge refuses is refused too: untyped encodings such as 16UC1 or 8UC3 carry no
colour information, and accepting them would let a depth topic wired to ``image`` by
mistake "work".

The functions read only the message fields (``height``, ``width``, ``encoding``,
``is_bigendian``, ``step``, ``data``), so they work on any object shaped like
sensor_msgs/Image; only the ``*_to_msg`` builders import sensor_msgs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np


@dataclass(frozen=True)
class _ColourLayout:
    """How one encoding's bytes are laid out and how cv_bridge reaches RGB from them."""

    base_dtype: str  # numpy element type of one channel: "u1" or "u2"
    channels: int  # channels of the raw layout (2 for YUV 4:2:2: one chroma + one luma byte)
    code: int | None  # the cv::cvtColor code cv_bridge applies; None = already RGB


def _layouts() -> dict[str, _ColourLayout]:
    table: dict[str, _ColourLayout] = {}
    for bits, base in ((8, "u1"), (16, "u2")):
        table[f"rgb{bits}"] = _ColourLayout(base, 3, None)
        table[f"bgr{bits}"] = _ColourLayout(base, 3, cv2.COLOR_BGR2RGB)
        table[f"rgba{bits}"] = _ColourLayout(base, 4, cv2.COLOR_RGBA2RGB)
        table[f"bgra{bits}"] = _ColourLayout(base, 4, cv2.COLOR_BGRA2RGB)
        table[f"mono{bits}"] = _ColourLayout(base, 1, cv2.COLOR_GRAY2RGB)
        # OpenCV names a Bayer pattern by the 2x2 block starting at the second row and
        # column, so ROS "rggb" is OpenCV "BG" (cv_bridge's own table pairs them so).
        table[f"bayer_rggb{bits}"] = _ColourLayout(base, 1, cv2.COLOR_BayerBG2RGB)
        table[f"bayer_bggr{bits}"] = _ColourLayout(base, 1, cv2.COLOR_BayerRG2RGB)
        table[f"bayer_gbrg{bits}"] = _ColourLayout(base, 1, cv2.COLOR_BayerGR2RGB)
        table[f"bayer_grbg{bits}"] = _ColourLayout(base, 1, cv2.COLOR_BayerGB2RGB)
    # YUV 4:2:2. "yuv422" / "yuv422_yuy2" are the names cv_bridge converts; "uyvy" /
    # "yuyv" are sensor_msgs' current names of the same two byte layouts.
    for name in ("yuv422", "uyvy"):
        table[name] = _ColourLayout("u1", 2, cv2.COLOR_YUV2RGB_UYVY)
    for name in ("yuv422_yuy2", "yuyv"):
        table[name] = _ColourLayout("u1", 2, cv2.COLOR_YUV2RGB_YUY2)
    return table


_COLOUR_ENCODINGS = _layouts()
_YUV422 = ("yuv422", "uyvy", "yuv422_yuy2", "yuyv")
# Encodings without colour information (OpenCV types): cv_bridge refuses them on the way
# to rgb8; the error says so, because the usual cause is a wrong topic, not a bad camera.
_UNTYPED_PREFIXES = ("8U", "8S", "16U", "16S", "32S", "32F", "64F")

# Depth per REP 118: 16-bit unsigned millimetres or 32-bit float metres.
_DEPTH_ENCODINGS: dict[str, str] = {"16UC1": "u2", "mono16": "u2", "32FC1": "f4"}

SUPPORTED_COLOUR_ENCODINGS = tuple(_COLOUR_ENCODINGS)
SUPPORTED_DEPTH_ENCODINGS = tuple(_DEPTH_ENCODINGS)


class ImageConversionError(ValueError):
    """A message that cannot be read as an image; the text says which field is wrong."""


def conversion_error(exc: BaseException, what: str) -> str:
    """Return the text of a conversion failure: ours name the field; anything else names its type."""
    if isinstance(exc, ImageConversionError):
        return str(exc)
    return f"{what}: could not convert the image: {type(exc).__name__}: {exc}"


def stamp_ns(header: Any) -> int:
    """Return a std_msgs/Header's stamp in nanoseconds."""
    return int(header.stamp.sec) * 1_000_000_000 + int(header.stamp.nanosec)


def _raw_array(msg: Any, base_dtype: str, channels: int, what: str) -> np.ndarray:
    """
    View the message data as (height, width[, channels]) honouring step and byte order.

    A padded ``step`` (row stride larger than width * pixel size) is common on GPUs and
    some drivers; the padding bytes are dropped here. ``channels`` is per pixel, except
    for YUV 4:2:2 where the caller passes 2 (bytes per pixel).
    """
    height, width, step = int(msg.height), int(msg.width), int(msg.step)
    if height <= 0 or width <= 0:
        raise ImageConversionError(f"{what}: empty image ({width}x{height})")
    itemsize = np.dtype(base_dtype).itemsize
    row_bytes = width * channels * itemsize
    if step < row_bytes:
        raise ImageConversionError(
            f"{what}: step {step} is smaller than width {width} x {channels} channel(s) x "
            f"{itemsize} byte(s) = {row_bytes} for encoding '{msg.encoding}'")
    if step % itemsize:
        raise ImageConversionError(
            f"{what}: step {step} is not a multiple of the {itemsize}-byte pixel element "
            f"of encoding '{msg.encoding}'")
    data = msg.data  # rosidl gives array('B'); tests and tools may pass bytes
    buffer = data if isinstance(data, (bytes, bytearray)) else bytes(data)
    expected = step * height
    if len(buffer) != expected:
        raise ImageConversionError(
            f"{what}: data has {len(buffer)} bytes but step {step} x height {height} = "
            f"{expected}")
    order = ">" if msg.is_bigendian else "<"
    dtype = np.dtype(order + base_dtype) if itemsize > 1 else np.dtype(base_dtype)
    rows = np.frombuffer(buffer, dtype=np.uint8).reshape(height, step)[:, :row_bytes]
    array = np.ascontiguousarray(rows).view(dtype).reshape(height, width, channels)
    # Native byte order from here on: OpenCV and torch do not read big-endian arrays.
    return array.astype(dtype.newbyteorder("="), copy=False)


def _refusal(encoding: str, what: str) -> ImageConversionError:
    accepted = "rgb8/16, bgr8/16, rgba8/16, bgra8/16, mono8/16, bayer_*8/16, yuv422 (uyvy), yuv422_yuy2 (yuyv)"
    if encoding.startswith(_UNTYPED_PREFIXES):
        return ImageConversionError(
            f"{what}: encoding '{encoding}' has no colour information; cv_bridge refuses to "
            f"convert it to rgb8 and so does this node (a depth or untyped OpenCV image on the "
            f"colour input? publish rgb8/bgr8 there); accepted: {accepted}")
    return ImageConversionError(f"{what}: unsupported encoding '{encoding}'; accepted: {accepted}")


def _to_8bit(array: np.ndarray) -> np.ndarray:
    """cv_bridge's 16 -> 8 bit step: ``convertTo(CV_8U, 255 / 65535)``, i.e. round(x / 257)."""
    return np.rint(array.astype(np.float32) * np.float32(255.0 / 65535.0)).astype(np.uint8)


def image_to_rgb(msg: Any, what: str = "image") -> np.ndarray:
    """
    sensor_msgs/Image -> contiguous RGB uint8 array (H, W, 3), as cv_bridge gives it.

    The colour conversion runs at the source depth, then 16-bit results are scaled to 8
    bits (cv_bridge's order: for Bayer patterns it matters). Alpha is dropped.
    """
    encoding = str(msg.encoding)
    layout = _COLOUR_ENCODINGS.get(encoding)
    if layout is None:
        raise _refusal(encoding, what)
    if encoding in _YUV422 and int(msg.width) % 2:
        raise ImageConversionError(f"{what}: encoding '{encoding}' packs two pixels per 4 bytes, "
                                   f"so the width must be even, got {msg.width}")
    array = _raw_array(msg, layout.base_dtype, layout.channels, what)
    if layout.channels == 1:
        array = array[:, :, 0]
    rgb = array if layout.code is None else cv2.cvtColor(np.ascontiguousarray(array), layout.code)
    if rgb.dtype != np.uint8:
        rgb = _to_8bit(rgb)
    return np.ascontiguousarray(rgb, dtype=np.uint8)


def depth_to_metres(msg: Any, what: str = "depth") -> np.ndarray:
    """Depth image -> float32 metres (H, W); invalid pixels (0, NaN, inf) become NaN."""
    encoding = str(msg.encoding)
    if encoding not in _DEPTH_ENCODINGS:
        raise ImageConversionError(
            f"{what}: unsupported depth encoding '{encoding}' (supported: 16UC1 in "
            f"millimetres, 32FC1 in metres)")
    base = _DEPTH_ENCODINGS[encoding]
    array = _raw_array(msg, base, 1, what)[:, :, 0]
    if base == "u2":
        metres = array.astype(np.float32) / 1000.0
        metres[array == 0] = np.nan
    else:
        metres = array.astype(np.float32, copy=True)
        metres[~np.isfinite(metres) | (metres <= 0)] = np.nan
    return metres


def compressed_to_rgb(msg: Any, what: str = "image/compressed") -> np.ndarray:
    """
    sensor_msgs/CompressedImage -> RGB uint8, decoded exactly as sent (no re-encoding).

    image_transport's compressed plugin encodes colour images in BGR order ("rgb8; png
    compressed bgr8"), which is what OpenCV decodes, so the result is converted from
    BGR. 16-bit PNGs are reduced to 8 bits like mono16.
    """
    data = np.frombuffer(bytes(msg.data), dtype=np.uint8)
    if data.size == 0:
        raise ImageConversionError(f"{what}: empty data (format '{msg.format}')")
    decoded = cv2.imdecode(data, cv2.IMREAD_UNCHANGED)
    if decoded is None:
        raise ImageConversionError(
            f"{what}: could not decode {data.size} bytes as an image (format '{msg.format}')")
    if decoded.dtype == np.uint16:
        decoded = (decoded >> 8).astype(np.uint8)
    elif decoded.dtype != np.uint8:
        raise ImageConversionError(f"{what}: decoded pixel type {decoded.dtype} is not 8 or 16 bit")
    if decoded.ndim == 2:
        return cv2.cvtColor(decoded, cv2.COLOR_GRAY2RGB)
    if decoded.shape[2] == 4:
        return cv2.cvtColor(decoded, cv2.COLOR_BGRA2RGB)
    return np.ascontiguousarray(cv2.cvtColor(decoded, cv2.COLOR_BGR2RGB))


def rgb_to_msg(rgb: np.ndarray, header: Any = None):
    """RGB uint8 (H, W, 3) -> sensor_msgs/Image rgb8 (for the overlay)."""
    from sensor_msgs.msg import Image

    if rgb.dtype != np.uint8 or rgb.ndim != 3 or rgb.shape[2] != 3:
        raise ImageConversionError(f"rgb_to_msg: expected uint8 HxWx3, got {rgb.dtype} {rgb.shape}")
    msg = Image(height=rgb.shape[0], width=rgb.shape[1], encoding="rgb8", is_bigendian=0,
                step=rgb.shape[1] * 3)
    if header is not None:
        msg.header = header
    msg.data = np.ascontiguousarray(rgb).tobytes()
    return msg


def depth_to_msg(depth_m: np.ndarray, header: Any = None, encoding: str = "32FC1"):
    """
    Convert float metres (H, W; NaN/inf/<=0 = no depth) into a sensor_msgs/Image, as :func:`depth_to_metres` reads it.

    32FC1 metres (NaN kept) or 16UC1 millimetres (0 = no depth).
    """
    from m2sa_core.geometry.depth_encoding import to_16uc1
    from sensor_msgs.msg import Image

    depth_m = np.asarray(depth_m)
    if depth_m.ndim != 2:
        raise ImageConversionError(f"depth_to_msg: expected a 2-D depth image, got shape {depth_m.shape}")
    if encoding == "16UC1":
        data = to_16uc1(depth_m).astype("<u2")
    elif encoding == "32FC1":
        data = np.ascontiguousarray(depth_m, dtype="<f4")
    else:
        raise ImageConversionError(f"depth_to_msg: encoding must be 32FC1 or 16UC1, got '{encoding}'")
    msg = Image(height=depth_m.shape[0], width=depth_m.shape[1], encoding=encoding, is_bigendian=0,
                step=depth_m.shape[1] * data.itemsize)
    if header is not None:
        msg.header = header
    msg.data = data.tobytes()
    return msg


def mask_to_msg(mask: np.ndarray, header: Any = None):
    """Boolean mask (H, W) -> sensor_msgs/Image mono8 with 0 / 255 (never compressed)."""
    from sensor_msgs.msg import Image

    if mask.ndim != 2:
        raise ImageConversionError(f"mask_to_msg: expected a 2-D mask, got shape {mask.shape}")
    msg = Image(height=mask.shape[0], width=mask.shape[1], encoding="mono8", is_bigendian=0,
                step=mask.shape[1])
    if header is not None:
        msg.header = header
    msg.data = (np.asarray(mask, dtype=bool).astype(np.uint8) * 255).tobytes()
    return msg


def msg_to_mask(msg: Any, what: str = "mask") -> np.ndarray:
    """mono8 mask message -> bool (H, W): the inverse of :func:`mask_to_msg`, for clients."""
    if str(msg.encoding) not in ("mono8", "8UC1"):
        raise ImageConversionError(f"{what}: expected mono8, got '{msg.encoding}'")
    return _raw_array(msg, "u1", 1, what)[:, :, 0] > 0


def labels_to_msg(labels: np.ndarray, header: Any = None):
    """Return a uint16 (H, W) instance-label image as sensor_msgs/Image mono16 (little endian, ``header`` copied)."""
    from sensor_msgs.msg import Image

    labels = np.asarray(labels)
    if labels.ndim != 2 or labels.dtype != np.uint16:
        raise ImageConversionError(f"labels_to_msg: expected a 2-D uint16 array, got {labels.dtype} {labels.shape}")
    msg = Image(height=labels.shape[0], width=labels.shape[1], encoding="mono16", is_bigendian=0,
                step=labels.shape[1] * 2)
    if header is not None:
        msg.header = header
    msg.data = np.ascontiguousarray(labels, dtype="<u2").tobytes()
    return msg


def msg_to_labels(msg: Any, what: str = "labels") -> np.ndarray:
    """Return a mono16 (or 16UC1) label image message as uint16 (H, W): the inverse of :func:`labels_to_msg`."""
    if str(msg.encoding) not in ("mono16", "16UC1"):
        raise ImageConversionError(f"{what}: expected mono16, got '{msg.encoding}'")
    return _raw_array(msg, "u2", 1, what)[:, :, 0]
