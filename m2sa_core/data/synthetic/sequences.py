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
Short camera sequences of synthetic scenes, with ground truth on every frame.

Tracking (re-segmenting a command's targets on new frames without the language model)
needs what a still image cannot give: the same objects under a moving camera, moving
objects and a passing occluder, with every frame's visible and complete masks. A
sequence starts from one scene of the synthetic world (its questions are asked on frame
0) and changes it frame by frame:

* ``pan``: the camera slides sideways (the whole image shifts, objects leave the view);
* ``zoom``: the camera moves in (everything grows about the centre);
* ``nudge``: each object slides a little on the table, so the occlusions change;
* ``occluder``: a board passes in front of the scene from left to right, hiding the
  targets' visible pixels for a while (their complete shapes stay);
* ``mixed``: all of the above at once.

Objects keep their identity (and instance numbers) across the frames: object ``i`` of
every frame is object ``i`` of frame 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import cv2
from m2sa_core.data.synthetic.questions import Question, sample_questions
from m2sa_core.data.synthetic.scene import _compose, _number_instances, Layout, render_layout, Scene, SceneObject
from m2sa_core.types import MaskType
import numpy as np

MOTIONS = ("pan", "zoom", "nudge", "occluder", "mixed")


@dataclass
class SceneSequence:
    """Frames of one scene (``frames[0]`` is the still scene) and the questions asked on frame 0."""

    frames: list[Scene]
    questions: list[Question]
    motion: str
    # Per frame, the row of the wall/table boundary (the layout's, moved by the zoom):
    # what render_depth needs to put the table where the picture has it. Empty when unknown.
    horizons: list[int] = field(default_factory=list)

    def target_mask(self, frame: int, target: tuple[int, str], mask_type: str = "modal") -> np.ndarray:
        """Ground truth of one question target on one frame: visible, or complete for "amodal"."""
        index, part = target
        obj = self.frames[frame].objects[index]
        if mask_type == MaskType.AMODAL:
            return obj.parts_amodal[part] if part else obj.amodal
        return obj.parts_visible[part] if part else obj.visible


def _recompose(layout: Layout, offsets: list[tuple[int, int]]) -> tuple[np.ndarray, list[SceneObject]]:
    """Return the layout with each object moved by its (dx, dy), kept inside the frame; compose order."""
    size = layout.background.shape[0]
    moved = []
    for (cat, sprite, x0, y0), (dx, dy) in zip(layout.placed, offsets):
        h, w = sprite.labels.shape
        moved.append((cat, sprite, int(np.clip(x0 + dx, 0, size - w)), int(np.clip(y0 + dy, 0, size - h))))
    image = layout.background.copy()
    objects = _compose(image, moved, strict=False)
    assert objects is not None  # not strict: never rejected
    return image, objects


def _warp(image: np.ndarray, objects: list[SceneObject], matrix: np.ndarray) -> None:
    """Move the camera: warp the image (bilinear) and every mask (nearest) in place."""
    size = image.shape[1], image.shape[0]

    def mask(m: np.ndarray) -> np.ndarray:
        return cv2.warpAffine(m.astype(np.uint8), matrix, size, flags=cv2.INTER_NEAREST, borderValue=0).astype(bool)

    image[:] = cv2.warpAffine(image, matrix, size, flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT)
    for o in objects:
        o.amodal, o.visible = mask(o.amodal), mask(o.visible)
        o.parts_amodal = {k: mask(v) for k, v in o.parts_amodal.items()}
        o.parts_visible = {k: mask(v) for k, v in o.parts_visible.items()}


def _occlude(image: np.ndarray, objects: list[SceneObject], x: int, width: int, colour: np.ndarray) -> None:
    """Paint a board over columns [x, x + width) of the table area and hide what it covers."""
    height = image.shape[0]
    board = np.zeros(image.shape[:2], bool)
    board[height // 3:, max(x, 0):max(x + width, 0)] = True
    image[board] = colour
    for o in objects:
        o.visible = o.visible & ~board
        o.parts_visible = {k: v & ~board for k, v in o.parts_visible.items()}


def render_sequence(rng: np.random.Generator, n_frames: int = 8, motion: str = "mixed", size: int = 256,
                    held_out: bool = True) -> SceneSequence:
    """Return a scene and ``n_frames - 1`` changed views of it (see the module docstring for ``motion``)."""
    if motion not in MOTIONS:
        raise ValueError(f"motion must be one of {MOTIONS}, got {motion!r}")
    if n_frames < 1:
        raise ValueError(f"n_frames must be >= 1, got {n_frames}")
    layout, first = render_layout(rng, size)
    questions = sample_questions(first, rng, held_out)
    scale = size / 256
    moves = {m: motion in (m, "mixed") for m in MOTIONS}
    velocities = [(int(rng.integers(-3, 4)), int(rng.integers(-1, 2))) for _ in layout.placed]
    pan_step = float(rng.choice([-1, 1])) * rng.uniform(2.0, 4.0) * scale
    zoom_step = rng.uniform(0.02, 0.04)
    board_width = int(size * rng.uniform(0.12, 0.2))
    board_colour = rng.integers(40, 220, 3).astype(np.uint8)
    order: list[int] | None = None
    frames = []
    horizons = []
    for t in range(n_frames):
        offsets = [(round(vx * t * scale), round(vy * t * scale)) if moves["nudge"] else (0, 0)
                   for vx, vy in velocities]
        image, objects = _recompose(layout, offsets)
        if order is None:  # frame 0: the instance numbers and order of the still scene
            numbered = _number_instances(list(objects))
            order = [next(k for k, o in enumerate(objects) if o is n) for n in numbered]
        ordered = [objects[k] for k in order]
        for mine, still in zip(ordered, first.objects):
            mine.instance = still.instance
        zoom = 1.0 + zoom_step * t if t and moves["zoom"] else 1.0
        horizon = size / 2 + (layout.horizon - size / 2) * zoom  # the warp is about the centre
        horizons.append(int(np.clip(round(horizon), 1, size - 1)))
        if t and (moves["pan"] or moves["zoom"]):
            matrix = cv2.getRotationMatrix2D((size / 2, size / 2), 0.0, zoom)
            if moves["pan"]:
                matrix[0, 2] += pan_step * t
            _warp(image, ordered, matrix)
        if t and moves["occluder"]:
            travel = size + board_width
            x = int(-board_width + travel * t / max(n_frames - 1, 1))
            _occlude(image, ordered, x, board_width, board_colour)
        frames.append(Scene(image=image, objects=ordered))
    return SceneSequence(frames, questions, motion, horizons)
