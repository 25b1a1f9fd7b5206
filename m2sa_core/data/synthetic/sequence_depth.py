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
Registered depth for a camera sequence: one 3-D world, seen on every frame.

A tracking bag with depth needs, per frame, what a still scene's depth gives
(:mod:`m2sa_core.data.synthetic.depth`), and the frames must agree with each other: one
camera, one table, and each object's yaw, lean and part reliefs the same throughout, so
that a target's 3-D truth changes only where the picture does (an object nudged across
the table moves on it in 3-D, a pan slides the whole world, the occluder hides points).
``render_depth`` draws all of those from its generator in a fixed order (camera, table,
then per object in ``scene.objects`` order), and objects keep their index across a
sequence's frames, so drawing every frame from a fresh generator of the *same* seed gives
each of them once for the whole sequence.

Two approximations, both in the picture's favour: a zoom is rendered as the table seen
under the same camera with the objects standing where the zoomed picture has them (the
depth of every frame matches its own pixels, which is what a node measures), and a face
whose tilt would poke through its neighbour on one frame is settled flatter on that frame
only (``render_depth``'s rule). The occluding board is paint, not geometry: its pixels keep
the depth of what it hides, and no target's visible pixels lie under it.
"""

from __future__ import annotations

from collections.abc import Sequence

from m2sa_core.data.synthetic.depth import render_depth, SceneDepth
from m2sa_core.data.synthetic.sequences import SceneSequence
import numpy as np


def sequence_depths(sequence: SceneSequence, seed: Sequence[int]) -> list[SceneDepth]:
    """
    Depth and 3-D truth of every frame of ``sequence``, all drawn from ``SeedSequence(seed)``.

    ``seed`` is a sequence's own stream (a tracking bag uses ``(seed, k, DEPTH_STREAM)``);
    the pictures and masks are not touched, so a sequence's RGB is the same with or
    without depth.
    """
    horizons = sequence.horizons or [None] * len(sequence.frames)
    if len(horizons) != len(sequence.frames):
        raise ValueError(f"{len(horizons)} horizons for {len(sequence.frames)} frames")
    return [render_depth(scene, np.random.default_rng(np.random.SeedSequence(list(seed))), horizon=horizon)
            for scene, horizon in zip(sequence.frames, horizons)]
