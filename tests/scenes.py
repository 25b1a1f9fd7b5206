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
The scenes node tests show the node, and the Image messages that carry them.

Several node tests over DDS feed the same frames: a seeded random RGB image of W x H
(:func:`random_scene`) stamped by :func:`stamped_image`, seen by :class:`SceneCamera`
when a flat depth goes with it, and a synthetic scene with its registered depth and each
target's 3-D ground truth (:func:`synthetic_scene`). They live here, not in one test
module, because a test module never imports another.
"""

from __future__ import annotations

import numpy as np

W, H = 64, 48


def stamped_image(rgb: np.ndarray, stamp_ns: int, frame_id: str = "camera_optical", encoding: str = "rgb8"):
    """Return ``rgb`` (any H x W [x C] array) as a sensor_msgs Image stamped ``stamp_ns`` in ``frame_id``."""
    from sensor_msgs.msg import Image

    msg = Image(height=rgb.shape[0], width=rgb.shape[1], encoding=encoding, step=rgb.shape[1] * rgb.shape[2]
                if rgb.ndim == 3 else rgb.shape[1] * rgb.itemsize)
    msg.header.frame_id = frame_id
    msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(int(stamp_ns), 1_000_000_000)
    msg.data = np.ascontiguousarray(rgb).tobytes()
    return msg


def random_scene(w: int = W, h: int = H, seed: int = 1) -> np.ndarray:
    """Return a ``h`` x ``w`` RGB image of random pixels, the same for the same ``seed``."""
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


class SceneCamera:
    """The camera of the W x H random scenes (fx = fy = 80, centred): what a flat depth is seen by."""

    height, width = H, W
    k = [80.0, 0.0, 31.5, 0.0, 80.0, 23.5, 0.0, 0.0, 1.0]


def synthetic_scene(seed: int, size: int = 256):
    """
    (scene, SceneDepth, targets with their ground truth) of one seeded synthetic scene.

    Every visible object and part; an occluded object also once as an amodal target
    (its complete shape asked for), whose geometry must be the visible part's.
    """
    from m2sa_core.data.synthetic.depth import render_depth
    from m2sa_core.data.synthetic.scene import render_layout
    from m2sa_core.types import Granularity, Target

    layout, scene = render_layout(np.random.default_rng(seed), size)
    sd = render_depth(scene, np.random.default_rng(10_000 + seed), horizon=layout.horizon)
    targets, truths = [], []
    for i, obj in enumerate(scene.objects):
        name = f"{obj.category}_{obj.instance}"
        if sd.truth(i) is not None:
            targets.append(Target(name, obj.category, obj.instance, "", Granularity.OBJECT, obj.visible.copy(),
                                  score=0.9))
            truths.append(sd.truth(i))
            if obj.occluded:
                targets.append(Target(name, obj.category, obj.instance, "", Granularity.OBJECT, obj.visible.copy(),
                                      score=0.9, amodal_mask=obj.amodal.copy(), mask_type="amodal",
                                      amodal_score=0.8))
                truths.append(sd.truth(i))
        for part, mask in obj.parts_visible.items():
            truth = sd.truth(i, part)
            if truth is not None:
                targets.append(Target(f"{name}'s {part}", obj.category, obj.instance, part, Granularity.PART,
                                      mask.copy(), score=0.8))
                truths.append(truth)
    return scene, sd, targets, truths
