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
CompressedDepth images as compressed_depth_image_transport writes them, through m2sa_ros.depth.compressed_depth.

The plugin's codec.cpp, compression_common.h and rvl_codec.cpp (ros-perception/image_transport_plugins)
define them; m2sa_ros.depth.compressed_depth decodes and encodes them.

The expected values are worked out here from the plugin's definition, not from our codec:
the 32FC1 quantisation ``q = trunc(A / d + B)`` with ``A = Z0 (Z0 + 1)``, ``B = 1 - A / depth_max``
in float32 and its inverse ``A / (q - B)``; the 12-byte ConfigHeader; RVL's nibble code,
written out by hand for small images. No rclpy: the codec reads message fields only.
"""

from __future__ import annotations

import struct
from types import SimpleNamespace

import cv2
from hypothesis import given, settings
from hypothesis import strategies as st
from m2sa_ros.depth.compressed_depth import (
    CompressedDepthError,
    decode_compressed_depth,
    decode_rvl,
    encode_compressed_depth,
    encode_rvl,
    is_compressed_depth,
    parse_format,
)
from m2sa_ros.messages.image_conversion import depth_to_metres, ImageConversionError
import numpy as np
import pytest

# The publisher's defaults: depth_max 10 m, depth_quantization 100 -> A = 100 * 101, B = 1 - A / 10.
A, B = 10100.0, -1009.0


def _msg(fmt: str, data: bytes) -> SimpleNamespace:
    return SimpleNamespace(format=fmt, data=data)


def _decode(fmt: str, data: bytes) -> np.ndarray:
    return decode_compressed_depth(_msg(fmt, data))


def _png16(values: np.ndarray) -> bytes:
    ok, png = cv2.imencode(".png", values.astype(np.uint16))
    assert ok
    return png.tobytes()


# --------------------------------------------------------------------------- 32FC1: inverse depth
def test_32fc1_header_and_quantised_values_are_the_plugins():
    depth = np.array([[1.0, 2.5, 0.7, 9.99, 0.2, 10.0, np.nan, 12.0]], np.float32)
    fmt, data = encode_compressed_depth(depth, "32FC1", "png")
    assert fmt == "32FC1; compressedDepth png"
    assert data[:12] == struct.pack("<iff", 0, A, B)  # format INV_DEPTH, depthParam = (A, B)
    q = cv2.imdecode(np.frombuffer(data[12:], np.uint8), cv2.IMREAD_UNCHANGED)
    assert q.dtype == np.uint16
    # trunc(10100 / d - 1009): 9091, 3031, trunc(13419.57), trunc(2.011), 49491; d >= depth_max and NaN: 0.
    assert q.tolist() == [[9091, 3031, 13419, 2, 49491, 0, 0, 0]]
    decoded = _decode(fmt, data)
    expected = [A / (9091 - B), A / (3031 - B), A / (13419 - B), A / (2 - B), A / (49491 - B)]
    np.testing.assert_allclose(decoded[0, :5], np.float32(expected), rtol=0, atol=0)
    assert decoded[0, 0] == 1.0 and decoded[0, 1] == 2.5 and decoded[0, 4] == np.float32(0.2)
    assert np.isnan(decoded[0, 5:]).all()


def test_32fc1_with_other_quantisation_parameters_reads_them_from_the_header():
    depth = np.array([[0.5, 1.0, 3.9, 4.0]], np.float32)
    fmt, data = encode_compressed_depth(depth, "32FC1", "png", depth_max=4.0, depth_quantization=50.0)
    a, b = 50.0 * 51.0, 1.0 - 50.0 * 51.0 / 4.0  # 2550, -636.5
    assert struct.unpack("<iff", data[:12]) == (0, a, b)
    q = [int(a / d + b) for d in (0.5, 1.0, 3.9)]  # exact in float32 for these
    assert q == [4463, 1913, 17]
    decoded = _decode(fmt, data)
    np.testing.assert_array_equal(decoded[0, :3], np.float32([a / (v - b) for v in q]))
    assert np.isnan(decoded[0, 3])


@settings(max_examples=200, deadline=None)
@given(st.floats(min_value=0.25, max_value=9.75, width=32))
def test_32fc1_round_trip_is_within_one_quantisation_step(d):
    fmt, data = encode_compressed_depth(np.full((1, 1), d, np.float32), "32FC1", "png")
    back = float(_decode(fmt, data)[0, 0])
    # q = trunc(A/d + B) <= A/d + B, so A/(q - B) >= d, and at most one step (d^2 / (A - d)) more.
    assert d * (1 - 1e-6) <= back <= d + d * d / (A - d) + 1e-6 * d


def test_32fc1_nearer_than_the_quantisation_reaches_is_no_depth():
    # A / d + B overflows 16 bits below A / (65535 - B) = 0.152 m: undefined upstream; here no depth.
    fmt, data = encode_compressed_depth(np.array([[0.15, 0.0, -1.0, 0.153]], np.float32), "32FC1")
    decoded = _decode(fmt, data)
    assert np.isnan(decoded[0, :3]).all() and decoded[0, 3] == pytest.approx(0.153, abs=1e-4)


# --------------------------------------------------------------------------- 16UC1: PNG as it is
def test_16uc1_png_is_lossless_and_reads_as_the_raw_image_does():
    mm = np.random.default_rng(3).integers(0, 9000, (24, 32)).astype(np.uint16)
    mm[::5, ::3] = 0
    fmt, data = encode_compressed_depth(mm, "16UC1", "png")
    assert fmt == "16UC1; compressedDepth png" and struct.unpack("<i", data[:4]) == (0,)
    assert np.array_equal(cv2.imdecode(np.frombuffer(data[12:], np.uint8), cv2.IMREAD_UNCHANGED), mm)
    raw = SimpleNamespace(height=24, width=32, encoding="16UC1", is_bigendian=0, step=64, data=mm.tobytes())
    np.testing.assert_array_equal(_decode(fmt, data), depth_to_metres(raw))


def test_16uc1_beyond_depth_max_is_zeroed_as_the_publisher_does():
    fmt, data = encode_compressed_depth(np.array([[10000, 10001, 65535, 1]], np.uint16), "16UC1", depth_max=10.0)
    assert cv2.imdecode(np.frombuffer(data[12:], np.uint8), cv2.IMREAD_UNCHANGED).tolist() == [[10000, 0, 0, 1]]


def test_a_png_written_by_hand_decodes():
    """A payload built from the definition alone: header of zeros, OpenCV's 16-bit PNG."""
    mm = np.array([[1500, 0], [250, 7000]], np.uint16)
    data = struct.pack("<iff", 0, 0.0, 0.0) + _png16(mm)
    np.testing.assert_array_equal(_decode("16UC1; compressedDepth png", data),
                                  np.float32([[1.5, np.nan], [0.25, 7.0]]))


@pytest.mark.parametrize("fmt", ["16UC1; compressedDepth", "16UC1", "mono16; compressedDepth png"])
def test_older_format_strings_mean_png(fmt):
    data = struct.pack("<iff", 0, 0.0, 0.0) + _png16(np.array([[1000]]))
    assert _decode(fmt, data)[0, 0] == 1.0
    assert parse_format(fmt)[1] == "png"


# --------------------------------------------------------------------------- RVL
def test_rvl_code_of_small_images_written_out_by_hand():
    # [0, 0, 5, 7, 0]: zeros 2, non-zeros 2, zig-zag deltas 5 -> 10 (nibbles 0xA, 0x1) and 2 -> 4,
    # then zeros 1, non-zeros 0: nibbles 2 2 A 1 4 1 0, one word with the first nibble on top,
    # 0x22A14100, little-endian; after uint32 width 5 and height 1.
    assert encode_rvl(np.array([[0, 0, 5, 7, 0]], np.uint16)) == bytes.fromhex("05000000" "01000000" "0041a122")
    # [9, 3]: zeros 0, non-zeros 2, deltas 9 -> 18 (0xA, 0x2) and -6 -> 11 (0xB, 0x1): 0x02A2B100.
    assert encode_rvl(np.array([[9, 3]], np.uint16)) == bytes.fromhex("02000000" "01000000" "00b1a202")
    # [0, 0, 0]: zeros 3, non-zeros 0: 0x30000000.
    assert encode_rvl(np.array([[0, 0, 0]], np.uint16)) == bytes.fromhex("03000000" "01000000" "00000030")
    for payload, expected in ((bytes.fromhex("050000000100000000" "41a122"), [[0, 0, 5, 7, 0]]),
                              (bytes.fromhex("0200000001000000" "00b1a202"), [[9, 3]])):
        assert decode_rvl(payload).tolist() == expected


@pytest.mark.parametrize("holes", [0.0, 0.02, 0.5, 1.0])
def test_rvl_round_trips_any_16bit_image(holes):
    rng = np.random.default_rng(int(holes * 100))
    values = rng.integers(1, 65536, (48, 64)).astype(np.uint16)
    values[rng.random(values.shape) < holes] = 0
    values[0, :3] = (65535, 1, 65535)  # the largest deltas both ways
    assert np.array_equal(decode_rvl(encode_rvl(values)), values)


@pytest.mark.parametrize("encoding, image", [
    ("16UC1", np.array([[1200, 0, 3400], [0, 0, 5600]], np.uint16)),
    ("32FC1", np.array([[1.2, np.nan, 3.4], [0.0, 9.0, 5.6]], np.float32)),
])
def test_rvl_messages_decode_like_png_ones(encoding, image):
    png = _decode(*encode_compressed_depth(image, encoding, "png"))
    fmt, data = encode_compressed_depth(image, encoding, "rvl")
    assert fmt == f"{encoding}; compressedDepth rvl"
    assert struct.unpack("<II", data[12:20]) == (3, 2)  # width, height after the ConfigHeader
    np.testing.assert_array_equal(_decode(fmt, data), png)


# --------------------------------------------------------------------------- refusals
def _header() -> bytes:
    return struct.pack("<iff", 0, A, B)


@pytest.mark.parametrize("fmt, data, says", [
    ("32FC1; compressedDepth png", _header() + b"\x89PNG\r\n\x1a\n garbage", "could not decode"),
    ("32FC1; compressedDepth png", _header()[:10], "no room for the 12-byte ConfigHeader"),
    ("32FC1; compressedDepth png", struct.pack("<iff", 7, A, B) + b"x" * 20, "unknown compression format 7"),
    ("32FC1; compressedDepth zstd", _header() + b"x" * 20, "unsupported compressedDepth codec 'zstd'"),
    ("32FC1; compressed png", _header() + b"x" * 20, "is not compressedDepth"),
    ("8UC1; compressedDepth png", _header() + b"x" * 20, "encoding '8UC1' is not depth"),
    ("32FC1; compressedDepth png", struct.pack("<iff", 0, 0.0, B) + _png16(np.ones((2, 2))), "cannot give depth"),
    ("16UC1; compressedDepth png", _header() + cv2.imencode(".png", np.zeros((2, 2), np.uint8))[1].tobytes(),
     "sends 16-bit single-channel"),
    ("16UC1; compressedDepth rvl", _header() + struct.pack("<II", 100000, 100000) + b"\0" * 8,
     "claims 100000x100000"),
    ("16UC1; compressedDepth rvl", _header() + struct.pack("<II", 1000, 1000) + b"\0" * 8, "ends after 0 of"),
    ("16UC1; compressedDepth rvl", _header() + bytes.fromhex("0a000000" "01000000" "0041a122"), "ends after"),
    ("16UC1; compressedDepth rvl", _header() + bytes.fromhex("02000000" "01000000" "0041a122"), "runs past"),
    ("16UC1; compressedDepth rvl", _header() + struct.pack("<II", 2, 1) + b"\xff" * 8 + b"\0" * 4,
     "longer than 32 bits"),
])
def test_corrupt_or_unknown_payloads_are_refused_in_one_line(fmt, data, says):
    with pytest.raises(CompressedDepthError) as caught:
        _decode(fmt, data)
    assert says in str(caught.value) and "\n" not in str(caught.value)
    assert isinstance(caught.value, ImageConversionError)  # the node's one conversion failure


def test_truncated_payloads_of_every_length_are_refused_never_crash():
    for encoding in ("16UC1", "32FC1"):
        for codec in ("png", "rvl"):
            image = np.array([[1200, 0], [3400, 5600]], np.uint16) if encoding == "16UC1" else \
                np.array([[1.2, 0.0], [3.4, 5.6]], np.float32)
            fmt, data = encode_compressed_depth(image, encoding, codec)
            for cut in range(len(data)):
                try:
                    decoded = _decode(fmt, data[:cut])
                except CompressedDepthError:
                    continue
                # A cut inside the last word's padding may still hold every pixel.
                assert decoded.shape == (2, 2), (encoding, codec, cut)


def test_is_compressed_depth_tells_the_two_message_kinds_apart():
    assert is_compressed_depth(SimpleNamespace(format="16UC1; compressedDepth png", data=b""))
    assert not is_compressed_depth(SimpleNamespace(encoding="16UC1", data=b"", height=1, width=1))


def test_the_encoder_refuses_what_the_publisher_refuses():
    for image, encoding in ((np.zeros((2, 2), np.float32), "16UC1"), (np.zeros((2, 2, 3), np.uint16), "16UC1"),
                            (np.zeros((2, 2), np.uint8), "8UC1")):
        with pytest.raises(ValueError):
            encode_compressed_depth(image, encoding)
