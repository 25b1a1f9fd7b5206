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

"""The instance-label image's rule: 0 background, k + 1 target k, the smaller target wins an overlap."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from m2sa_core.label_image import label_masks, paint_labels
import numpy as np
import pytest


def _box(shape, x, y, w, h) -> np.ndarray:
    mask = np.zeros(shape, bool)
    mask[y:y + h, x:x + w] = True
    return mask


def test_a_part_stays_on_its_object_and_equal_sizes_go_to_the_earlier():
    shape = (20, 30)
    tv, button = _box(shape, 2, 2, 20, 15), _box(shape, 5, 5, 3, 2)
    left, right = _box(shape, 20, 10, 5, 5), _box(shape, 22, 12, 5, 5)
    labels = paint_labels([tv, button, left, right], shape)
    assert labels.dtype == np.uint16 and labels.shape == shape
    assert (labels[button] == 2).all()  # painted over its TV
    assert (labels[left] == 3).all()  # as large as `right`, and earlier
    assert (labels[right & ~left] == 4).all()
    assert (labels[~(tv | button | left | right)] == 0).all()
    # The same whatever order the larger targets come in.
    again = paint_labels([button, tv], shape)
    assert (again[button] == 1).all() and (again[tv & ~button] == 2).all()


def test_no_targets_is_all_background_and_a_wrong_size_is_refused():
    assert not paint_labels([], (4, 5)).any() and paint_labels([], (4, 5)).shape == (4, 5)
    with pytest.raises(ValueError, match="mask 0 is 5x3, the label image 5x4"):
        paint_labels([np.ones((3, 5), bool)], (4, 5))


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 6))
def test_each_pixel_goes_to_the_smallest_target_covering_it(seed, count):
    rng = np.random.default_rng(seed)
    masks = [rng.random((12, 14)) < rng.uniform(0.05, 0.6) for _ in range(count)]
    labels = paint_labels(masks, (12, 14))
    areas = [int(m.sum()) for m in masks]
    for y in range(12):
        for x in range(14):
            covering = [k for k in range(count) if masks[k][y, x]]
            want = 0 if not covering else min(covering, key=lambda k: (areas[k], k)) + 1
            assert labels[y, x] == want
    rebuilt = label_masks(labels, count)
    assert all(not (r & ~m).any() for r, m in zip(rebuilt, masks))  # nobody gets a pixel outside its mask
