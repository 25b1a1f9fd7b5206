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
sensor_msgs image <-> numpy conversion.

The cases cv_bridge's own tests cover (every encoding, padded step, both byte
orders, data length mismatch, empty image, unsupported encoding) plus depth units
and exact compressed decoding.
"""

from __future__ import annotations

from types import SimpleNamespace

import cv2
from hypothesis import given, settings
from hypothesis import strategies as st
from m2sa_ros.messages.image_conversion import (
    compressed_to_rgb,
    depth_to_metres,
    image_to_rgb,
    ImageConversionError,
    mask_to_msg,
    msg_to_mask,
    rgb_to_msg,
    SUPPORTED_COLOUR_ENCODINGS,
)
import numpy as np
import pytest

RNG = np.random.default_rng(7)
RGB = RNG.integers(0, 256, size=(5, 7, 3), dtype=np.uint8)


def _msg(array: np.ndarray, encoding: str, pad: int = 0, bigendian: bool = False) -> SimpleNamespace:
    """Return an Image-shaped message; ``pad`` bytes of garbage at the end of every row."""
    h, w = array.shape[:2]
    dtype = array.dtype.newbyteorder(">" if bigendian else "<")
    rows = array.astype(dtype).reshape(h, -1).view(np.uint8)
    if pad:
        rows = np.concatenate([rows, np.full((h, pad), 0xAB, np.uint8)], axis=1)
    return SimpleNamespace(height=h, width=w, encoding=encoding, is_bigendian=int(bigendian),
                           step=rows.shape[1], data=rows.tobytes())


def _reference_rgb(raw: np.ndarray, encoding: str) -> np.ndarray:
    """
    Return what ``cv_bridge.toCvCopy(msg, "rgb8").image`` holds, written out per encoding.

    Independent of the module under test: plain channel reordering for the RGB family,
    the cv::cvtColor code cv_bridge's conversion table names for Bayer and YUV 4:2:2,
    and for 16-bit sources cv_bridge's final ``convertTo(CV_8U, 255.0 / 65535.0)``
    (rounded to nearest), applied after the colour conversion.
    """
    def scale(x: np.ndarray) -> np.ndarray:
        if x.dtype == np.uint16:
            return np.round(x.astype(np.float64) * 255.0 / 65535.0).astype(np.uint8)
        return x

    family = encoding.rstrip("0123456789")
    if family == "rgb":
        return scale(raw)
    if family == "bgr":
        return scale(raw[:, :, ::-1])
    if family == "rgba":
        return scale(raw[:, :, :3])
    if family == "bgra":
        return scale(raw[:, :, 2::-1])
    if family == "mono":
        return scale(np.dstack([raw, raw, raw]))
    bayer = {"bayer_rggb": cv2.COLOR_BayerBG2RGB, "bayer_bggr": cv2.COLOR_BayerRG2RGB,
             "bayer_gbrg": cv2.COLOR_BayerGR2RGB, "bayer_grbg": cv2.COLOR_BayerGB2RGB}
    if family in bayer:
        return scale(cv2.cvtColor(raw, bayer[family]))
    yuv = {"yuv422": cv2.COLOR_YUV2RGB_UYVY, "uyvy": cv2.COLOR_YUV2RGB_UYVY,
           "yuv422_yuy2": cv2.COLOR_YUV2RGB_YUY2, "yuyv": cv2.COLOR_YUV2RGB_YUY2}
    return cv2.cvtColor(raw, yuv[encoding])


# encoding -> (dtype, channels of the raw layout)
ACCEPTED = {
    **{f"{f}{b}": (np.uint8 if b == 8 else np.uint16, c)
       for b in (8, 16) for f, c in (("rgb", 3), ("bgr", 3), ("rgba", 4), ("bgra", 4), ("mono", 1),
                                     ("bayer_rggb", 1), ("bayer_bggr", 1), ("bayer_gbrg", 1), ("bayer_grbg", 1))},
    "yuv422": (np.uint8, 2), "uyvy": (np.uint8, 2), "yuv422_yuy2": (np.uint8, 2), "yuyv": (np.uint8, 2),
}


def _raw(encoding: str, h: int, w: int, rng: np.random.Generator) -> np.ndarray:
    dtype, channels = ACCEPTED[encoding]
    shape = (h, w) if channels == 1 else (h, w, channels)
    return rng.integers(0, np.iinfo(dtype).max + 1, size=shape, dtype=dtype)


def test_the_accepted_set_is_what_cv_bridge_converts_to_rgb8():
    assert set(SUPPORTED_COLOUR_ENCODINGS) == set(ACCEPTED)


@pytest.mark.parametrize("encoding", sorted(ACCEPTED))
@pytest.mark.parametrize("pad", [0, 6])
@pytest.mark.parametrize("bigendian", [False, True])
def test_every_encoding_matches_the_cv_bridge_reference(encoding, pad, bigendian):
    raw = _raw(encoding, 6, 8, np.random.default_rng(abs(hash((encoding, pad))) % 2**32))
    out = image_to_rgb(_msg(raw, encoding, pad=pad, bigendian=bigendian))
    assert out.dtype == np.uint8 and out.shape == (6, 8, 3) and out.flags.c_contiguous
    np.testing.assert_array_equal(out, _reference_rgb(raw, encoding))


def test_sixteen_bit_is_scaled_like_cv_bridge_not_by_its_high_byte():
    values = np.array([[0, 128, 129, 385, 65535, 32896]], np.uint16)
    out = image_to_rgb(_msg(values, "mono16"))[:, :, 0]
    np.testing.assert_array_equal(out, [[0, 0, 1, 1, 255, 128]])


def test_bayer_16_is_demosaiced_before_scaling():
    """cv_bridge demosaics at 16 bits and scales afterwards; the other order differs."""
    raw = _raw("bayer_rggb16", 8, 8, np.random.default_rng(3))
    out = image_to_rgb(_msg(raw, "bayer_rggb16"))
    scaled_first = cv2.cvtColor(np.round(raw / 257.0).astype(np.uint8), cv2.COLOR_BayerBG2RGB)
    np.testing.assert_array_equal(out, _reference_rgb(raw, "bayer_rggb16"))
    assert not np.array_equal(out, scaled_first)


@pytest.mark.parametrize("encoding", ["16UC1", "8UC3", "8UC4", "8UC1", "32FC1", "16SC1", "64FC3"])
def test_untyped_encodings_are_refused_like_cv_bridge(encoding):
    msg = SimpleNamespace(height=2, width=2, encoding=encoding, is_bigendian=0, step=48, data=b"\0" * 96)
    with pytest.raises(ImageConversionError, match=rf"cam/image: encoding '{encoding}' has no colour information.*"
                                                   r"cv_bridge refuses"):
        image_to_rgb(msg, what="cam/image")


def test_yuv422_needs_an_even_width():
    msg = _msg(np.zeros((2, 3, 2), np.uint8), "yuyv")
    with pytest.raises(ImageConversionError, match="width must be even, got 3"):
        image_to_rgb(msg)


def test_step_not_a_multiple_of_the_16bit_element_is_rejected():
    msg = _msg(np.zeros((3, 4), np.uint16), "mono16", pad=1)
    with pytest.raises(ImageConversionError, match="not a multiple"):
        image_to_rgb(msg)


@pytest.mark.parametrize("delta", [-1, 1])
def test_data_length_mismatch_names_both_sizes(delta):
    msg = _msg(RGB, "rgb8")
    msg.data = msg.data[:delta] if delta < 0 else msg.data + b"\0"
    with pytest.raises(ImageConversionError, match=rf"data has {len(msg.data)} bytes but step 21 x height 5"):
        image_to_rgb(msg, what="camera/image")


def test_step_smaller_than_a_row_is_rejected():
    msg = _msg(RGB, "rgb8")
    msg.step = 20
    with pytest.raises(ImageConversionError, match="step 20 is smaller"):
        image_to_rgb(msg)


@pytest.mark.parametrize("h,w", [(0, 0), (0, 5), (5, 0)])
def test_empty_image_is_rejected(h, w):
    msg = SimpleNamespace(height=h, width=w, encoding="rgb8", is_bigendian=0, step=w * 3, data=b"")
    with pytest.raises(ImageConversionError, match="empty image"):
        image_to_rgb(msg)


def test_unsupported_encoding_lists_the_supported_ones():
    msg = _msg(RGB[:, :, :2].copy(), "nv21")
    with pytest.raises(ImageConversionError, match=r"my/topic: unsupported encoding 'nv21'.*rgb8.*mono8/16.*yuyv"):
        image_to_rgb(msg, what="my/topic")


def test_real_sensor_msgs_image_round_trip():
    """The rosidl message (data is array('B')) converts like a plain object."""
    pytest.importorskip("sensor_msgs.msg")
    from std_msgs.msg import Header

    header = Header(frame_id="cam")
    msg = rgb_to_msg(RGB, header)
    assert (msg.encoding, msg.step, msg.header.frame_id) == ("rgb8", 21, "cam")
    np.testing.assert_array_equal(image_to_rgb(msg), RGB)


def test_masks_are_mono8_0_or_255_and_read_back():
    pytest.importorskip("sensor_msgs.msg")
    mask = RNG.random((6, 9)) > 0.5
    msg = mask_to_msg(mask)
    assert msg.encoding == "mono8" and msg.step == 9
    assert set(np.unique(np.frombuffer(bytes(msg.data), np.uint8))) <= {0, 255}
    np.testing.assert_array_equal(msg_to_mask(msg), mask)


def test_depth_16uc1_millimetres_and_zero_is_invalid():
    mm = np.array([[0, 1000], [1500, 65535]], np.uint16)
    metres = depth_to_metres(_msg(mm, "16UC1", pad=2, bigendian=True))
    assert np.isnan(metres[0, 0])
    np.testing.assert_allclose(metres[[0, 1, 1], [1, 0, 1]], [1.0, 1.5, 65.535], rtol=1e-6)


def test_depth_32fc1_metres_and_nonfinite_or_negative_is_invalid():
    m = np.array([[np.nan, 0.75], [np.inf, -1.0]], np.float32)
    metres = depth_to_metres(_msg(m, "32FC1"))
    assert metres[0, 1] == pytest.approx(0.75)
    assert np.isnan(metres[0, 0]) and np.isnan(metres[1, 0]) and np.isnan(metres[1, 1])


def test_depth_rejects_colour_encodings():
    with pytest.raises(ImageConversionError, match="unsupported depth encoding 'rgb8'"):
        depth_to_metres(_msg(RGB, "rgb8"))


def test_compressed_png_decodes_exactly():
    ok, png = cv2.imencode(".png", cv2.cvtColor(RGB, cv2.COLOR_RGB2BGR))
    assert ok
    msg = SimpleNamespace(format="rgb8; png compressed bgr8", data=png.tobytes())
    np.testing.assert_array_equal(compressed_to_rgb(msg), RGB)


def test_compressed_mono_png_and_garbage():
    ok, png = cv2.imencode(".png", RGB[:, :, 0])
    out = compressed_to_rgb(SimpleNamespace(format="mono8; png compressed", data=png.tobytes()))
    np.testing.assert_array_equal(out, np.dstack([RGB[:, :, 0]] * 3))
    with pytest.raises(ImageConversionError, match="could not decode 4 bytes"):
        compressed_to_rgb(SimpleNamespace(format="jpeg", data=b"\x00\x01\x02\x03"))
    with pytest.raises(ImageConversionError, match="empty data"):
        compressed_to_rgb(SimpleNamespace(format="png", data=b""))


@settings(max_examples=60, deadline=None)
@given(h=st.integers(1, 9), w=st.integers(1, 9), pad=st.integers(0, 7),
       encoding=st.sampled_from(sorted(ACCEPTED)), bigendian=st.booleans(), seed=st.integers(0, 2**31 - 1))
def test_any_size_padding_and_byte_order_matches_the_reference(h, w, pad, encoding, bigendian, seed):
    """Whatever the size, row padding and byte order, conversion equals cv_bridge's."""
    if encoding.startswith("bayer"):
        h, w = h + 1, w + 1  # OpenCV demosaics images of at least 2x2
    if ACCEPTED[encoding][1] == 2:
        w += w % 2  # YUV 4:2:2 packs pixel pairs
    if ACCEPTED[encoding][0] == np.uint16:
        pad -= pad % 2
    raw = _raw(encoding, h, w, np.random.default_rng(seed))
    out = image_to_rgb(_msg(raw, encoding, pad=pad, bigendian=bigendian))
    np.testing.assert_array_equal(out, _reference_rgb(raw, encoding))
