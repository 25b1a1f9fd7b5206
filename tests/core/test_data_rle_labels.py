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

"""RLE encode/decode checks and the answer-label parser the readers rely on."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from m2sa_core.data.rle import check_rle, decode_rle, encode_mask, rle_area, rle_bbox, RLEError
from m2sa_core.labels import make_label, parse_label_before, split_category
from m2sa_core.types import Granularity, mask_bbox
import numpy as np
import pytest


@settings(max_examples=60, deadline=None)
@given(arrays(np.bool_, st.tuples(st.integers(1, 24), st.integers(1, 24))))
def test_encode_decode_round_trip(mask):
    rle = encode_mask(mask)
    assert isinstance(rle["counts"], str) and rle["size"] == list(mask.shape)
    assert np.array_equal(decode_rle(rle, *mask.shape), mask)
    check_rle(rle, *mask.shape)
    assert rle_area(rle) == mask.sum()
    if mask.any():
        assert rle_bbox(rle) == [float(v) for v in mask_bbox(mask)]


@pytest.mark.parametrize(
    "rle, match",
    [
        ({"size": [4, 4], "counts": "abc"}, "ends in the middle of a run"),
        ({"size": [4, 4], "counts": "0~"}, "invalid character '~'"),
        ({"size": [4, 4], "counts": "0@"}, "negative run length"),
        ({"size": [4, 4], "counts": "P" * 12 + "0"}, "more than 12 characters"),
        ({"size": [4, 4], "counts": "04"}, "cover 4 pixels, expected 4\\*4=16"),
        ({"size": [4, 4], "counts": [3, 3]}, "sum to 6"),
        ({"size": [4, 4], "counts": [3, -1, 14]}, "non-negative ints"),
        ({"size": [4], "counts": "0"}, "\\[height, width\\]"),
        ({"size": [4, 4], "counts": "é"}, "ASCII"),
        ({"size": [4, 4]}, "ASCII string or a list"),
        ([1, 2], "must be a dict"),
    ],
)
def test_undecodable_rle_is_a_clear_error(rle, match):
    with pytest.raises(RLEError, match=match):
        decode_rle(rle)
    with pytest.raises(RLEError, match=match):  # what the readers check every annotation with
        check_rle(rle)


def test_size_is_checked_against_the_image():
    rle = encode_mask(np.ones((3, 5), bool))
    with pytest.raises(RLEError, match="3x5 does not match the image size 5x3"):
        decode_rle(rle, 5, 3)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("You can press the television_set_1's button ", ("television_set_1's button", "television_set", 1, "button")),
        ("Try the mug_12", ("mug_12", "mug", 12, "")),
        ("the mouse_(computer_equipment)_1's left_button", (None, "mouse_(computer_equipment)", 1, "left_button")),
        ("a foo_bar_2_3 ", ("foo_bar_2_3", "foo_bar_2", 3, "")),
    ],
)
def test_label_before_seg(text, expected):
    parsed = parse_label_before(text)
    label, obj, inst, part = expected
    assert (parsed.object_name, parsed.instance, parsed.part_name) == (obj, inst, part)
    if label:
        assert parsed.label == label
    assert parsed.granularity == (Granularity.PART if part else Granularity.OBJECT)


def test_no_label_and_category_helpers():
    assert parse_label_before("It is ") is None
    assert parse_label_before("the mug_1, and then ") is None  # the name must be right before {seg}
    assert split_category("pan_(for_cooking):handle") == ("pan_(for_cooking)", "handle")
    assert split_category("mug") == ("mug", "")
    assert make_label("mug", 2) == "mug_2" and make_label("knife", 1, "blade") == "knife_1's blade"
    assert make_label("knife", 0, "blade") == "knife's blade"
