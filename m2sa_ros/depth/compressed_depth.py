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
compressedDepth: the depth images image_transport's compressed_depth plugin sends, decoded without it.

Robots record depth as ``<depth topic>/compressedDepth`` (sensor_msgs/CompressedImage) to
keep bags small, and compressed_depth_image_transport is not on PyPI. This module reads
(and, for the bag recorder and the tests, writes) its format as its codec.cpp defines it:

* ``format`` is ``"<encoding>; compressedDepth <codec>"``: the raw image's encoding
  (``16UC1``/``mono16`` millimetres or ``32FC1`` metres) and the codec, ``png`` or
  ``rvl``. Older publishers wrote ``"<encoding>; compressedDepth"`` or the bare encoding,
  both meaning png. Any other codec is refused.
* ``data`` starts with a 12-byte ConfigHeader (compression_common.h): an int32
  ``format`` (0 = INV_DEPTH, the only one defined) and ``float depthParam[2]``,
  little-endian; the compressed image follows.
* 16-bit depth is compressed as it is (millimetres; the publisher zeroes pixels beyond
  ``depth_max``).
* 32-bit depth is quantised to 16-bit inverse depth first: with ``Z0 =
  depth_quantization`` and ``A = Z0 (Z0 + 1)``, ``B = 1 - A / depth_max`` (both float32,
  carried in depthParam), a depth ``d < depth_max`` becomes ``q = trunc(A / d + B)``
  and is read back as ``A / (q - B)``; 0 stands for no depth. The step grows with the
  square of the range: about 0.1 mm at 1 m and 1 cm at 10 m with the publisher's
  defaults (depth_max 10 m, depth_quantization 100).
* ``png`` is a 16-bit grey PNG (OpenCV's), ``rvl`` is Wilson's RVL code (rvl_codec.cpp):
  uint32 width and height, then run lengths of zeros and non-zeros and zig-zag deltas
  of the non-zero values, each a variable-length run of 3-bit nibbles packed eight to
  a little-endian 32-bit word, first nibble in the top bits.

Anything that does not decode to the size and type it announces raises
:class:`CompressedDepthError` (an ImageConversionError) with one line saying what: the
node refuses that frame's depth and goes on. Pure numpy and OpenCV: rclpy is never
imported, the message is read by its ``format`` and ``data`` fields only.
"""

from __future__ import annotations

import struct
from typing import Any

import cv2
from m2sa_ros.messages.image_conversion import ImageConversionError
import numpy as np

CODECS = ("png", "rvl")
INV_DEPTH = 0  # compressionFormat: the one value compression_common.h defines
CONFIG_HEADER = struct.Struct("<iff")  # ConfigHeader: compressionFormat format; float depthParam[2]
# The publisher's defaults (compressed_depth_publisher.cpp's parameters).
DEPTH_MAX = 10.0
DEPTH_QUANTIZATION = 100.0
PNG_LEVEL = 3
_ENCODINGS = {"16UC1": 16, "mono16": 16, "32FC1": 32}
_MAX_RVL_PIXELS = 1 << 26  # 8192 x 8192
_MAX_VLE_NIBBLES = 11  # a 32-bit value; more is a corrupt stream (rvl_codec.cpp would overflow)


class CompressedDepthError(ImageConversionError):
    """A compressedDepth message that cannot be decoded; the text says what is wrong."""


def is_compressed_depth(msg: Any) -> bool:
    """Return True for a sensor_msgs/CompressedImage (``format`` and ``data``, no ``encoding``)."""
    return hasattr(msg, "format") and not hasattr(msg, "encoding")


def compressed_format(encoding: str, codec: str = "png") -> str:
    """Return the ``format`` string the publisher writes for ``encoding`` and ``codec``."""
    return f"{encoding}; compressedDepth {codec}"


def parse_format(fmt: str, what: str = "compressedDepth") -> tuple[str, str]:
    """Return (encoding, codec) of a compressedDepth ``format`` string, as codec.cpp reads it."""
    encoding, sep, rest = str(fmt).partition(";")
    encoding = encoding.strip()
    if not sep:
        codec = "png"  # the oldest publishers: the encoding alone
    else:
        words = rest.split()
        if not words or words[0] != "compressedDepth":
            raise CompressedDepthError(f"{what}: format '{fmt}' is not compressedDepth "
                                       "('<encoding>; compressedDepth <png|rvl>')")
        codec = words[1] if len(words) > 1 else "png"  # "<encoding>; compressedDepth": png
        if codec not in CODECS:
            raise CompressedDepthError(f"{what}: unsupported compressedDepth codec '{codec}' in format '{fmt}' "
                                       f"(supported: {', '.join(CODECS)})")
    if encoding not in _ENCODINGS:
        raise CompressedDepthError(f"{what}: compressedDepth encoding '{encoding}' is not depth "
                                   "(supported: 16UC1 or mono16 millimetres, 32FC1 metres)")
    return encoding, codec


# --------------------------------------------------------------------------- decoding
def decode_compressed_depth(msg: Any, what: str = "depth/compressedDepth") -> np.ndarray:
    """
    Return a sensor_msgs/CompressedImage of compressedDepth -> float32 metres (H, W), NaN = no depth.

    The same metres :func:`m2sa_ros.messages.image_conversion.depth_to_metres` gives for the raw
    image (0, NaN, inf and negative depth are NaN).
    """
    encoding, codec = parse_format(msg.format, what)
    data = bytes(msg.data)
    if len(data) <= CONFIG_HEADER.size:
        raise CompressedDepthError(f"{what}: {len(data)} bytes, no room for the {CONFIG_HEADER.size}-byte "
                                   "ConfigHeader and an image")
    kind, quant_a, quant_b = CONFIG_HEADER.unpack_from(data)
    if kind != INV_DEPTH:
        raise CompressedDepthError(f"{what}: unknown compression format {kind} in the ConfigHeader "
                                   f"(only {INV_DEPTH} = INV_DEPTH is defined)")
    payload = data[CONFIG_HEADER.size:]
    values = _decode_png(payload, what) if codec == "png" else decode_rvl(payload, what)
    if _ENCODINGS[encoding] == 16:
        metres = values.astype(np.float32) / np.float32(1000.0)
        metres[values == 0] = np.nan
        return metres
    return inverse_depth_to_metres(values, quant_a, quant_b, what)


def inverse_depth_to_metres(q: np.ndarray, quant_a: float, quant_b: float, what: str = "compressedDepth") -> np.ndarray:
    """Quantised inverse depth (uint16, 0 = none) -> float32 metres: ``A / (q - B)`` in float32, as codec.cpp."""
    a, b = np.float32(quant_a), np.float32(quant_b)
    if not (np.isfinite(a) and np.isfinite(b)) or a == 0:
        raise CompressedDepthError(f"{what}: inverse-depth parameters ({quant_a}, {quant_b}) in the ConfigHeader "
                                   "cannot give depth")
    with np.errstate(divide="ignore", invalid="ignore"):
        metres = a / (q.astype(np.float32) - b)
    metres[(q == 0) | ~np.isfinite(metres) | (metres <= 0)] = np.nan
    return metres.astype(np.float32, copy=False)


def _decode_png(payload: bytes, what: str) -> np.ndarray:
    decoded = cv2.imdecode(np.frombuffer(payload, np.uint8), cv2.IMREAD_UNCHANGED)
    if decoded is None:
        raise CompressedDepthError(f"{what}: could not decode {len(payload)} bytes as a PNG")
    if decoded.dtype != np.uint16 or decoded.ndim != 2:
        channels = 1 if decoded.ndim == 2 else decoded.shape[2]
        raise CompressedDepthError(f"{what}: the PNG is {decoded.dtype} with {channels} channel(s), "
                                   "compressedDepth sends 16-bit single-channel")
    return decoded


def decode_rvl(payload: bytes, what: str = "compressedDepth rvl") -> np.ndarray:
    """
    Return an RVL payload (uint32 width, uint32 height, the code) -> uint16 (height, width).

    rvl_codec.cpp's DecompressRVL, with the checks it leaves out: the stream must hold
    exactly width x height pixels and no value wider than 32 bits.
    """
    if len(payload) < 8:
        raise CompressedDepthError(f"{what}: {len(payload)} bytes, no room for the RVL width and height")
    cols, rows = struct.unpack_from("<II", payload)
    code = payload[8:]
    pixels = int(cols) * int(rows)
    # codec.cpp's own bound (pixels <= 5 x the payload) would refuse an image of mostly
    # holes, which RVL codes in a few bytes; the walk below checks every run instead, and
    # nothing is allocated before it has, so a size is refused only beyond any camera's.
    if pixels == 0 or pixels > _MAX_RVL_PIXELS:
        raise CompressedDepthError(f"{what}: RVL image claims {cols}x{rows} pixels")
    values = _vle_values(code, what)
    listed = values.tolist()  # the walk is sequential: plain ints are several times faster than numpy's
    run_starts, run_lengths, value_starts = [], [], []
    pos, i, n_values = 0, 0, len(listed)
    while pos < pixels:
        if i + 2 > n_values:
            raise CompressedDepthError(f"{what}: RVL code ends after {pos} of {cols}x{rows} pixels")
        zeros, nonzeros = listed[i], listed[i + 1]
        i += 2
        pos += zeros
        if pos + nonzeros > pixels or i + nonzeros > n_values:
            raise CompressedDepthError(f"{what}: RVL code runs past its {cols}x{rows} pixels")
        if nonzeros:
            run_starts.append(pos)
            run_lengths.append(nonzeros)
            value_starts.append(i)
            i += nonzeros
            pos += nonzeros
    out = np.zeros(pixels, np.uint16)
    if run_lengths:
        lengths = np.asarray(run_lengths, np.int64)
        offsets = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        positive = values[np.repeat(np.asarray(value_starts, np.int64), lengths) + offsets]
        delta = (positive >> 1) ^ -(positive & 1)
        current = np.cumsum(delta) & 0xFFFF  # unsigned short arithmetic, as DecompressRVL
        out[np.repeat(np.asarray(run_starts, np.int64), lengths) + offsets] = current.astype(np.uint16)
    return out.reshape(rows, cols)


def _vle_values(code: bytes, what: str) -> np.ndarray:
    """Every variable-length value of an RVL code (int64), padding nibbles included."""
    usable = len(code) - len(code) % 4
    words = np.frombuffer(code[:usable], dtype="<u4").astype(np.uint64)
    shifts = np.arange(28, -1, -4, dtype=np.uint64)
    nibbles = ((words[:, None] >> shifts[None, :]) & np.uint64(0xF)).reshape(-1).astype(np.int64)
    if nibbles.size == 0:
        return nibbles
    ends = np.flatnonzero((nibbles & 0x8) == 0)
    if ends.size == 0:
        raise CompressedDepthError(f"{what}: RVL code holds no complete value")
    nibbles = nibbles[:ends[-1] + 1]  # an unfinished value at the very end is padding's
    starts = np.concatenate(([0], ends[:-1] + 1))
    lengths = ends - starts + 1
    if lengths.max() > _MAX_VLE_NIBBLES:
        raise CompressedDepthError(f"{what}: RVL code holds a value longer than 32 bits (corrupt)")
    position = np.arange(nibbles.size) - np.repeat(starts, lengths)
    return np.add.reduceat((nibbles & 0x7) << (3 * position), starts)  # exact int64 sums


# --------------------------------------------------------------------------- encoding
def encode_compressed_depth(image: np.ndarray, encoding: str, codec: str = "png", *, depth_max: float = DEPTH_MAX,
                            depth_quantization: float = DEPTH_QUANTIZATION,
                            png_level: int = PNG_LEVEL) -> tuple[str, bytes]:
    """
    (format, data) of a CompressedImage, as compressed_depth_image_transport's publisher writes them.

    ``image`` is the raw depth image: uint16 millimetres for 16UC1 / mono16, float32
    metres for 32FC1 (NaN = none). Where codec.cpp's behaviour is undefined (a 32FC1 depth
    of zero, negative, or nearer than the quantisation reaches, 15 cm at the defaults,
    whose inverse overflows 16 bits) this writes 0, no depth.
    """
    if encoding not in _ENCODINGS:
        raise ValueError(f"compressedDepth encodes 16UC1, mono16 or 32FC1, not {encoding!r}")
    if codec not in CODECS:
        raise ValueError(f"compressedDepth codec must be one of {', '.join(CODECS)}, not {codec!r}")
    image = np.asarray(image)
    if image.ndim != 2 or image.size == 0:
        raise ValueError(f"compressedDepth encodes a non-empty single-channel image, got shape {image.shape}")
    if _ENCODINGS[encoding] == 16:
        if image.dtype != np.uint16:
            raise ValueError(f"{encoding} depth must be uint16 millimetres, got {image.dtype}")
        values = image.copy()
        values[values > np.uint16(min(int(depth_max * 1000.0), 65535))] = 0  # the publisher's max-depth filter
        header = CONFIG_HEADER.pack(INV_DEPTH, 0.0, 0.0)  # depthParam unused (uninitialised upstream)
    else:
        values, quant_a, quant_b = metres_to_inverse_depth(image, depth_max, depth_quantization)
        header = CONFIG_HEADER.pack(INV_DEPTH, quant_a, quant_b)
    if codec == "png":
        ok, png = cv2.imencode(".png", values, [cv2.IMWRITE_PNG_COMPRESSION, int(png_level)])
        if not ok:
            raise ValueError("cv2.imencode (png) failed on the depth image")
        payload = png.tobytes()
    else:
        payload = encode_rvl(values)
    return compressed_format(encoding, codec), header + payload


def metres_to_inverse_depth(depth_m: np.ndarray, depth_max: float = DEPTH_MAX,
                            depth_quantization: float = DEPTH_QUANTIZATION) -> tuple[np.ndarray, float, float]:
    """(q uint16, A, B): codec.cpp's 32FC1 quantisation, in float32 (``q = trunc(A / d + B)`` for d < depth_max)."""
    z0, d_max = np.float32(depth_quantization), np.float32(depth_max)
    quant_a = np.float32(z0 * (z0 + np.float32(1.0)))
    quant_b = np.float32(np.float32(1.0) - quant_a / d_max)
    depth = np.asarray(depth_m, dtype=np.float32)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        inverse = quant_a / depth + quant_b
    usable = (depth < d_max) & (depth > 0) & np.isfinite(inverse) & (inverse >= 0) & (inverse < 65536)
    q = np.zeros(depth.shape, np.uint16)
    q[usable] = np.trunc(inverse[usable]).astype(np.uint16)
    return q, float(quant_a), float(quant_b)


def encode_rvl(values: np.ndarray) -> bytes:
    """uint16 (H, W) -> RVL payload (uint32 width, uint32 height, the code), as rvl_codec.cpp's CompressRVL."""
    rows, cols = values.shape
    flat = np.asarray(values, np.uint16).reshape(-1).astype(np.int64)
    nonzero = flat != 0
    # The image as alternating runs, starting with a (possibly empty) run of zeros.
    edges = np.flatnonzero(np.diff(nonzero.astype(np.int8))) + 1
    bounds = np.concatenate(([0], edges, [flat.size]))
    runs = np.diff(bounds)
    if nonzero[0]:
        runs = np.concatenate(([0], runs))
    if runs.size % 2:
        runs = np.concatenate((runs, [0]))  # ends with zeros: the last pair has no non-zeros
    zeros, nonzeros = runs[0::2], runs[1::2]
    deltas = np.diff(np.concatenate(([0], flat[nonzero])))
    positive = (deltas << 1) ^ (deltas >> 31)
    # The values in stream order: per pair its zeros, its non-zeros, then their deltas.
    size = int(np.sum(2 + nonzeros))
    stream = np.empty(size, np.int64)
    first = np.concatenate(([0], np.cumsum(2 + nonzeros)[:-1]))
    stream[first] = zeros
    stream[first + 1] = nonzeros
    is_delta = np.ones(size, bool)
    is_delta[first] = is_delta[first + 1] = False
    stream[is_delta] = positive
    return struct.pack("<II", cols, rows) + _pack_vle(stream)


def _pack_vle(stream: np.ndarray) -> bytes:
    """Values -> nibbles (3 bits each, low first, 0x8 = more to come) -> little-endian words, first nibble on top."""
    bits = np.zeros(stream.size, np.int64)
    remaining = stream.copy()
    while remaining.any():
        bits += remaining > 0
        remaining >>= 3
    lengths = np.maximum(bits, 1)
    owner = np.repeat(np.arange(stream.size), lengths)
    position = np.arange(owner.size) - np.repeat(np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
    nibbles = (stream[owner] >> (3 * position)) & 0x7
    more = position < (lengths[owner] - 1)
    nibbles = nibbles | (more.astype(np.int64) << 3)
    pad = (-nibbles.size) % 8
    nibbles = np.concatenate((nibbles, np.zeros(pad, np.int64))).reshape(-1, 8).astype(np.uint64)
    shifts = np.arange(28, -1, -4, dtype=np.uint64)
    words = np.bitwise_or.reduce(nibbles << shifts[None, :], axis=1).astype("<u4")
    return words.tobytes()
