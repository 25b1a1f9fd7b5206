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

"""Synthetic camera sequences: frame 0 is the still scene, later frames move with ground truth."""

from __future__ import annotations

from m2sa_core.data.synthetic.scene import render_scene
from m2sa_core.data.synthetic.sequences import MOTIONS, render_sequence
import numpy as np
import pytest


def rng(seed: int = 3) -> np.random.Generator:
    return np.random.default_rng(seed)


def test_frame_zero_is_the_still_scene_of_the_same_seed():
    still = render_scene(rng())
    sequence = render_sequence(rng(), n_frames=3, motion="mixed")
    first = sequence.frames[0]
    np.testing.assert_array_equal(first.image, still.image)
    assert [(o.category, o.instance) for o in first.objects] == [(o.category, o.instance) for o in still.objects]
    for mine, theirs in zip(first.objects, still.objects):
        np.testing.assert_array_equal(mine.visible, theirs.visible)
        np.testing.assert_array_equal(mine.amodal, theirs.amodal)
        for part in theirs.parts_visible:
            np.testing.assert_array_equal(mine.parts_visible[part], theirs.parts_visible[part])
    assert sequence.questions, "frame 0 has questions"


@pytest.mark.parametrize("motion", MOTIONS)
def test_every_motion_changes_the_frames_and_keeps_identities(motion):
    sequence = render_sequence(rng(5), n_frames=5, motion=motion)
    assert len(sequence.frames) == 5
    names = [(o.category, o.instance) for o in sequence.frames[0].objects]
    for frame in sequence.frames[1:]:
        assert [(o.category, o.instance) for o in frame.objects] == names
        assert frame.image.shape == sequence.frames[0].image.shape
        for o in frame.objects:
            assert not (o.visible & ~o.amodal).any()  # visible pixels are part of the complete shape
    assert any(not np.array_equal(f.image, sequence.frames[0].image) for f in sequence.frames[1:])


def test_pan_moves_every_mask_sideways():
    sequence = render_sequence(rng(11), n_frames=4, motion="pan")

    def centre_x(mask: np.ndarray) -> float:
        return float(np.nonzero(mask)[1].mean())

    first, last = sequence.frames[0].objects, sequence.frames[-1].objects
    shifts = [centre_x(b.amodal) - centre_x(a.amodal) for a, b in zip(first, last) if b.amodal.sum() > 50]
    assert shifts and (all(s > 2 for s in shifts) or all(s < -2 for s in shifts)), shifts


def test_occluder_hides_visible_pixels_and_keeps_complete_shapes():
    sequence = render_sequence(rng(2), n_frames=7, motion="occluder")
    first = sequence.frames[0].objects
    hidden = 0
    for frame in sequence.frames[1:]:
        for a, b in zip(first, frame.objects):
            np.testing.assert_array_equal(a.amodal, b.amodal)
            assert not (b.visible & ~a.visible).any()
            hidden += int((a.visible & ~b.visible).sum())
    assert hidden > 0


def test_target_mask_reads_the_question_targets_on_each_frame():
    sequence = render_sequence(rng(4), n_frames=3, motion="nudge")
    question = sequence.questions[0]
    for t in range(3):
        for target in question.targets:
            visible = sequence.target_mask(t, target)
            complete = sequence.target_mask(t, target, "amodal")
            assert visible.shape == complete.shape and not (visible & ~complete).any()


def test_sequences_are_reproducible_and_validate_arguments():
    a, b = render_sequence(rng(9), n_frames=3), render_sequence(rng(9), n_frames=3)
    for x, y in zip(a.frames, b.frames):
        np.testing.assert_array_equal(x.image, y.image)
    with pytest.raises(ValueError, match="motion"):
        render_sequence(rng(), motion="spin")
    with pytest.raises(ValueError, match="n_frames"):
        render_sequence(rng(), n_frames=0)
