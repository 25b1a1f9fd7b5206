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
One 3-D world per camera sequence (m2sa_core.data.synthetic.sequence_depth).

A tracked target is scored in 3-D on every frame, so the frames' ground truth must be
one world: the same camera, table and object faces throughout, each frame's depth the
picture's own, and a target's truth moving only as the picture does.
"""

from __future__ import annotations

from m2sa_core.data.synthetic.sequence_depth import sequence_depths
from m2sa_core.data.synthetic.sequences import render_sequence
import numpy as np
import pytest

SIZE, FRAMES = 128, 5


def _sequence(motion: str, k: int = 1):
    return render_sequence(np.random.default_rng(np.random.SeedSequence([4242, k])), FRAMES, motion, SIZE)


@pytest.mark.parametrize("motion", ["pan", "zoom", "nudge", "mixed"])
def test_every_frame_sees_the_same_camera_table_and_faces(motion):
    sequence = _sequence(motion)
    depths = sequence_depths(sequence, (4242, 1, 100))
    assert len(depths) == FRAMES
    first = depths[0]
    for sd in depths[1:]:
        assert sd.camera == first.camera
        np.testing.assert_array_equal(sd.table.up, first.table.up)
        assert sd.table.height_m == first.table.height_m
        for obj, obj0 in zip(sd.objects, first.objects):
            assert obj.relief_m == obj0.relief_m
            # The yaw is drawn once; the lean follows from the face's height in the picture.
            if obj.surface is not None and obj0.surface is not None and sd.occlusion_conflicts == 0:
                assert obj.yaw_deg == obj0.yaw_deg
    # Another sequence's stream is another world.
    other = sequence_depths(sequence, (4242, 2, 100))[0]
    assert other.camera != first.camera or not np.array_equal(other.table.up, first.table.up)


@pytest.mark.parametrize("motion", ["pan", "nudge", "mixed"])
def test_each_frames_depth_is_its_pictures_and_the_truth_moves_with_it(motion):
    """
    Each frame's depth agrees with its picture, and the truth moves with it.

    With ``mixed`` the occluder changes what is visible (the visible centroid jumps), so
    only the depth's agreement with the picture is checked there.
    """
    sequence = _sequence(motion)
    depths = sequence_depths(sequence, (4242, 1, 100))
    steps = []
    for t, (scene, sd) in enumerate(zip(sequence.frames, depths)):
        assert sd.depth.shape == scene.image.shape[:2]
        for index, obj in enumerate(scene.objects):
            truth = sd.truth(index)
            if truth is None:
                assert not obj.visible.any()
                continue
            # The truth is the depth under the frame's own visible mask.
            assert truth.points.shape[0] == int(obj.visible.sum())
            assert truth.centroid[2] == pytest.approx(float(sd.depth[obj.visible].astype(np.float64).mean()), abs=1e-5)
            previous = depths[t - 1].truth(index) if t else None
            if previous is not None:
                steps.append(float(np.linalg.norm(truth.centroid - previous.centroid)))
    if motion == "mixed":
        return
    assert steps, "some target is visible on consecutive frames"
    # A few pixels of motion a frame at about 0.5-1 m: millimetres to a few centimetres, never a new world.
    assert max(steps) < 0.05, sorted(steps)[-3:]
    assert any(s > 1e-4 for s in steps), "the targets move"


def test_a_zoom_brings_the_world_closer():
    sequence = _sequence("zoom")
    depths = sequence_depths(sequence, (4242, 1, 100))
    assert sequence.horizons == sorted(sequence.horizons, reverse=True), "the table's far edge rises as it zooms"
    z = [np.nanmedian(sd.depth[obj.visible]) for sd, scene in zip(depths, sequence.frames)
         for obj in scene.objects[:1] if obj.visible.any()]
    assert len(z) == FRAMES and z[-1] < z[0]


def test_the_pictures_are_the_same_with_or_without_depth():
    a, b = _sequence("mixed"), _sequence("mixed")
    sequence_depths(a, (4242, 1, 100))
    for fa, fb in zip(a.frames, b.frames):
        np.testing.assert_array_equal(fa.image, fb.image)
