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
One instance-label image for a result's targets: what grasp stacks read beside colour and depth.

A grasp planner such as contact_graspnet_ros takes one mono16 image of instance ids,
synchronised with colour, depth and camera_info, rather than a list of masks. Pixel value
0 is the background and ``k + 1`` target ``k`` (its ``Target.label_value``). A pixel holds
one value, and targets overlap (a button on its TV, a mug in front of a laptop), so the
rule is: **the smaller target wins** (fewer visible pixels), so that a part stays visible
on its object and a small object on a large one; between targets of the same size the
earlier one (lower index) wins. A target wholly covered by smaller ones has no pixel in
the image; its own mask is still in the result. Only visible masks are painted: the
complete (amodal) shape of a target lies partly behind others by definition.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

MAX_TARGETS = int(np.iinfo(np.uint16).max)  # values 1..65535 in a mono16 image


def paint_order(masks: Sequence[np.ndarray]) -> list[int]:
    """Return the target indices in the order they are painted: the last one painted wins a pixel."""
    areas = [int(np.count_nonzero(m)) for m in masks]
    return sorted(range(len(masks)), key=lambda k: (-areas[k], -k))


def paint_labels(masks: Sequence[np.ndarray], shape: tuple[int, int]) -> np.ndarray:
    """
    Return the uint16 (H, W) label image of boolean full-frame ``masks`` (module doc's rule).

    ``shape`` is the image's (height, width), needed when there are no masks.
    """
    if len(masks) > MAX_TARGETS:
        raise ValueError(f"{len(masks)} targets do not fit a mono16 label image (at most {MAX_TARGETS})")
    labels = np.zeros(tuple(int(s) for s in shape), dtype=np.uint16)
    for k in paint_order(masks):
        mask = np.asarray(masks[k], dtype=bool)
        if mask.shape != labels.shape:
            raise ValueError(f"mask {k} is {mask.shape[1]}x{mask.shape[0]}, the label image "
                             f"{labels.shape[1]}x{labels.shape[0]}")
        labels[mask] = k + 1
    return labels


def label_masks(labels: np.ndarray, count: int) -> list[np.ndarray]:
    """Return the pixels each of ``count`` targets holds in a label image: boolean masks, target ``k`` = value k + 1."""
    return [labels == k + 1 for k in range(count)]
