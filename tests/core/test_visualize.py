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

"""Overlay drawing: masks tinted per target, labels drawn, bad input named."""

from __future__ import annotations

from m2sa_core.types import Granularity, Target
from m2sa_core.visualize import label_size, overlay_targets, target_colour, tint_masks
import numpy as np
import pytest


def _target(mask: np.ndarray, label: str, amodal: np.ndarray | None = None) -> Target:
    return Target(label=label, object_name=label.split("_")[0], instance=1, part_name="",
                  granularity=Granularity.OBJECT, mask=mask, score=0.8, amodal_mask=amodal)


def _masks():
    a = np.zeros((48, 64), bool)
    a[5:20, 5:25] = True
    b = np.zeros((48, 64), bool)
    b[25:45, 35:60] = True
    return a, b


def test_each_target_gets_its_own_colour_and_the_rest_is_untouched():
    image = np.full((48, 64, 3), 100, np.uint8)
    a, b = _masks()
    out = tint_masks(image, [a, b], alpha=1.0, outline=0)
    assert tuple(out[10, 10]) == target_colour(0)
    assert tuple(out[30, 40]) == target_colour(1)
    assert target_colour(0) != target_colour(1)
    assert (out[~(a | b)] == 100).all()
    assert (image == 100).all()  # input not modified


def test_half_alpha_blends():
    image = np.zeros((48, 64, 3), np.uint8)
    a, _ = _masks()
    out = tint_masks(image, [a], alpha=0.5, outline=0)
    np.testing.assert_allclose(out[10, 10], np.array(target_colour(0)) / 2, atol=1)


def test_labels_are_drawn_near_their_target():
    image = np.full((120, 160, 3), 128, np.uint8)
    mask = np.zeros((120, 160), bool)
    mask[60:100, 60:120] = True
    with_label = overlay_targets(image, [_target(mask, "mug_1")])
    without = overlay_targets(image, [_target(mask, "mug_1")], labels=False)
    changed = np.any(with_label != without, axis=2)
    ys, xs = np.nonzero(changed)
    assert ys.size > 20  # text was written
    # just above the target's top-left: it names the mask without covering it
    _, height = label_size(image, "mug_1 0.80")
    assert 60 - height <= ys.min() and ys.max() < 60 and 55 <= xs.min() <= 65


def test_labels_of_targets_at_the_same_place_are_stacked_not_drawn_over_each_other():
    # An object and its part (the mug and its handle) start at the same corner, and the
    # part is narrower than its name: both labels go above the masks, one over the other.
    image = np.full((120, 160, 3), 128, np.uint8)
    whole = np.zeros((120, 160), bool)
    whole[60:100, 60:120] = True
    part = np.zeros((120, 160), bool)
    part[60:70, 60:66] = True
    targets = [_target(whole, "mug_1"), _target(part, "mug_1's handle")]
    changed = np.any(overlay_targets(image, targets) != overlay_targets(image, targets, labels=False), axis=2)
    ys, _ = np.nonzero(changed)
    _, height = label_size(image, "mug_1 0.80")
    assert ys.max() < 60  # neither label covers the masks
    assert ys.max() - ys.min() + 1 > 1.5 * height  # two rows of labels, not one drawn over the other
    # A name wider than the image shrinks to fit instead of running off the edge.
    long = "mouse_(computer_equipment)_1's right_button IoU 0.48"
    assert label_size(image, long)[0] > 160
    changed = np.any(overlay_targets(image, [_target(part, long)]) !=
                     overlay_targets(image, [_target(part, long)], labels=False), axis=2)
    _, xs = np.nonzero(changed)
    assert 100 < xs.max() - xs.min() + 1 < 160  # all of it in view (cut off, it would fill the width)
    # Where there is no room above, a label goes inside the top of its mask, still in the image.
    top = np.zeros((120, 160), bool)
    top[0:30, 10:40] = True
    changed = np.any(overlay_targets(image, [_target(top, "mug_1")]) !=
                     overlay_targets(image, [_target(top, "mug_1")], labels=False), axis=2)
    ys, _ = np.nonzero(changed)
    assert ys.size > 20 and ys.min() >= 0 and ys.max() <= height


def test_amodal_overlay_uses_the_amodal_mask():
    image = np.zeros((48, 64, 3), np.uint8)
    a, b = _masks()
    out = overlay_targets(image, [_target(a, "box_1", amodal=a | b)], labels=False, amodal=True)
    assert out[30, 40].any()  # only inside the amodal extension
    visible = overlay_targets(image, [_target(a, "box_1", amodal=a | b)], labels=False)
    assert not visible[30, 40].any()


def test_no_targets_returns_a_copy():
    image = np.random.default_rng(0).integers(0, 255, (48, 64, 3), dtype=np.uint8)
    out = overlay_targets(image, [])
    np.testing.assert_array_equal(out, image)
    assert out is not image


def test_bad_input_is_named():
    a, _ = _masks()
    with pytest.raises(ValueError, match="uint8 HxWx3"):
        overlay_targets(np.zeros((48, 64), np.uint8), [_target(a, "mug_1")])
    with pytest.raises(ValueError, match="mask 0 is 32x16, image is 64x48"):
        tint_masks(np.zeros((48, 64, 3), np.uint8), [np.ones((16, 32), bool)])
    with pytest.raises(ValueError, match="alpha"):
        tint_masks(np.zeros((48, 64, 3), np.uint8), [a], alpha=2.0)
