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
The ``labels`` topic over DDS: one mono16 instance-label image per result, as grasp stacks read it.

A subscriber beside the result's rebuilds every target's mask from the label image
(value ``label_value`` = index + 1) and compares it with the result's own masks, decoded
from their cropped PNGs as a client decodes them (m2sa_ros.messages.mask_encoding), under the
overlap rule of docs/ROS_INTERFACE.md: where targets overlap, the smaller one's value is
there, between equal sizes the earlier one's. The rule is restated here independently of
m2sa_core.label_image. The label image carries the colour image's header and size, so a
synchronizer pairs it with colour and depth; a failed result has none.
"""

from __future__ import annotations

from typing import Any

from fake_models import SceneSegmenter
from m2sa_core.types import Granularity, Target
from node_harness import now_ns, wait_until
import numpy as np
import pytest
from scenes import H, random_scene, stamped_image, W

pytestmark = [pytest.mark.ros, pytest.mark.integration]


def _box(x: int, y: int, w: int, h: int) -> np.ndarray:
    mask = np.zeros((H, W), bool)
    mask[y:y + h, x:x + w] = True
    return mask


def _targets() -> list[Target]:
    """Return a TV, its button, a remote over the TV's corner, a box the remote's size over both, an empty mask."""
    shapes = [("television_set_1", _box(4, 4, 40, 30)), ("television_set_1's button", _box(10, 10, 4, 3)),
              ("remote_control_1", _box(30, 20, 20, 20)), ("box_1", _box(40, 25, 20, 20)),
              ("cup_1", np.zeros((H, W), bool))]
    return [Target(label, label.split("_")[0], 1, "", Granularity.OBJECT, mask, score=0.9) for label, mask in shapes]


def _stamp_ns(header: Any) -> int:
    return int(header.stamp.sec) * 10**9 + int(header.stamp.nanosec)


def _expected_pixels(masks: list[np.ndarray]) -> list[np.ndarray]:
    """Each target's pixels in the label image: its mask less those of the targets that win over it."""
    areas = [int(m.sum()) for m in masks]

    def beats(j: int, k: int) -> bool:
        return areas[j] < areas[k] or (areas[j] == areas[k] and j < k)

    return [masks[k] & ~np.any([masks[j] for j in range(len(masks)) if j != k and beats(j, k)] or
                               [np.zeros_like(masks[k])], axis=0) for k in range(len(masks))]


def test_each_result_has_a_label_image_that_rebuilds_its_masks_under_the_overlap_rule(graph):
    from m2sa_core.label_image import label_masks
    from m2sa_ros.messages.image_conversion import msg_to_labels
    from m2sa_ros.messages.mask_encoding import result_masks
    from m2sa_ros.msg import SegmentationResult
    from sensor_msgs.msg import Image
    from std_msgs.msg import String

    seg = SceneSegmenter()
    seg.targets = _targets()
    node = graph.add_node(seg)
    graph.start(node)
    results = graph.collect(SegmentationResult, "result")
    labels = graph.collect(Image, "labels")
    wait_until(lambda: node.camera().outputs.labels.get_subscription_count() > 0, 10, "the labels subscription")
    images, commands = graph.publisher(Image, "image", 1), graph.publisher(String, "command")

    stamp = now_ns(node)
    graph.publish_frame(node, images, stamped_image(random_scene(), stamp, frame_id="camera_optical"))
    commands.publish(String(data="the television and the things on it"))
    result = wait_until(lambda: results, 30, "the result")[0]
    assert result.success, result.error
    image = wait_until(lambda: [m for m in labels if _stamp_ns(m.header) == stamp], 30, "its label image")[0]

    # The colour image's header and size: an ExactTime synchronizer pairs it with colour and depth.
    assert (image.header.frame_id, _stamp_ns(image.header)) == ("camera_optical", stamp)
    assert (image.encoding, image.height, image.width, image.step) == ("mono16", H, W, 2 * W)
    assert image.header == result.header and (image.height, image.width) == (result.height, result.width)
    assert [t.label_value for t in result.targets] == [1, 2, 3, 4, 5]

    masks = result_masks(result)  # the result's masks as a client decodes them
    assert all(np.array_equal(got, sent.mask) for got, sent in zip(masks, seg.targets))
    pixels = msg_to_labels(image)
    rebuilt = label_masks(pixels, len(result.targets))
    expected = _expected_pixels(masks)
    for target, got, want in zip(result.targets, rebuilt, expected):
        assert np.array_equal(got, want), target.label
    assert np.array_equal(pixels > 0, np.any(masks, axis=0))  # every target pixel has a label, the rest is 0
    # The rule at work: the button stays on its TV, the remote over the TV's corner, the remote
    # over the box of its size (the earlier one), and an empty mask has no pixel.
    tv, button, remote, box, cup = rebuilt
    assert button.sum() == 12 and remote.sum() == 400 and not cup.any()
    assert box.sum() < 400 and tv.sum() == 1200 - 12 - np.sum(masks[0] & (masks[2] | masks[3]))

    # A failed result has no label image: a new frame's label image comes next, and nothing before it.
    commands.publish(String(data=" "))
    wait_until(lambda: len(results) >= 2, 30, "the failed result")
    assert not results[1].success
    later = now_ns(node)
    graph.publish_frame(node, images, stamped_image(random_scene(seed=2), later, frame_id="camera_optical"))
    commands.publish(String(data="the television again"))
    wait_until(lambda: any(_stamp_ns(m.header) == later for m in labels), 30, "the next label image")
    assert [_stamp_ns(m.header) for m in labels] == [stamp, later]
