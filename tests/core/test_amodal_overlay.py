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

"""Overlay of amodal masks: a dashed outline in the target's colour over the tinted visible mask."""

from __future__ import annotations

import cv2
from m2sa_core.types import Granularity, Target
from m2sa_core.visualize import dashed_outline, overlay_targets, target_colour
import numpy as np
import pytest


def _target(visible: np.ndarray, amodal: np.ndarray | None) -> Target:
    return Target(label="box_1", object_name="box", instance=1, part_name="", granularity=Granularity.OBJECT,
                  mask=visible, score=0.0, amodal_mask=amodal)


def _shapes():
    visible = np.zeros((60, 80), bool)
    visible[10:30, 10:30] = True
    amodal = np.zeros((60, 80), bool)
    amodal[10:30, 10:60] = True  # continues to the right, behind something
    return visible, amodal


def test_amodal_mask_is_a_dashed_outline_outside_the_visible_mask():
    image = np.zeros((60, 80, 3), np.uint8)
    visible, amodal = _shapes()
    out = overlay_targets(image, [_target(visible, amodal)], labels=False)
    plain = overlay_targets(image, [_target(visible, None)], labels=False)
    drawn = np.any(out != plain, axis=2)
    border = cv2.morphologyEx(amodal.astype(np.uint8), cv2.MORPH_GRADIENT, np.ones((3, 3), np.uint8)) > 0
    hidden_border = border & ~visible
    hidden_border[:, :32] = False  # the part of the outline away from the visible mask's own contour
    assert drawn[hidden_border].any(), "no outline where the hidden part ends"
    assert not drawn[hidden_border].all(), "a solid line, not dashes"
    assert not drawn[13:27, 35:57].any()  # the hidden interior stays untinted
    assert (out[drawn] == target_colour(0)).all()


def test_outline_can_be_turned_off():
    image = np.zeros((60, 80, 3), np.uint8)
    visible, amodal = _shapes()
    off = overlay_targets(image, [_target(visible, amodal)], labels=False, amodal_outline=False)
    np.testing.assert_array_equal(off, overlay_targets(image, [_target(visible, None)], labels=False))


def test_bad_amodal_mask_is_named():
    with pytest.raises(ValueError, match="amodal mask is 8x4"):
        dashed_outline(np.zeros((60, 80, 3), np.uint8), np.zeros((4, 8), bool), (255, 0, 0))
