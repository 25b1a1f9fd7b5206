# noqa: A005 - m2sa_core.types, a package's module: an absolute import never shadows the standard library's types.
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
Result types shared by inference, evaluation and the ROS layer.

They are plain dataclasses over numpy so that the ROS node, the evaluator and a
researcher's notebook all read the same thing without importing torch or rclpy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import enum

import numpy as np


class MaskType(str, enum.Enum):
    """
    Which shape a command asks for: the visible pixels or the complete (amodal) shape.

    String-valued, so data files, checkpoints and messages keep the plain "modal" /
    "amodal" they always had, and a member compares equal to its string. The order is
    the mask-type head's: index 0 is modal, 1 amodal.
    """

    MODAL = "modal"
    AMODAL = "amodal"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    @property
    def index(self) -> int:
        """Position of this type in the mask-type head's logits."""
        return _MASK_TYPE_ORDER.index(self)

    @classmethod
    def from_logits(cls, modal: float, amodal: float) -> "MaskType":
        """
        Return the one mask-type rule: amodal only when its logit is strictly greater.

        An untrained (zero) head ties and keeps the visible mask, so checkpoints from
        before the head existed behave as they did.
        """
        return cls.AMODAL if amodal > modal else cls.MODAL


_MASK_TYPE_ORDER = (MaskType.MODAL, MaskType.AMODAL)
MASK_TYPES = tuple(t.value for t in _MASK_TYPE_ORDER)  # ("modal", "amodal"): valid values in data files


class Cancelled(RuntimeError):
    """
    ``should_stop`` asked the generation (or the whole command) to stop.

    Here rather than in a torch module so that callers (the node) can catch it without
    importing torch.
    """


class Granularity(enum.IntEnum):
    """Values match the GRANULARITY_* constants of m2sa_ros/msg/Target."""

    OBJECT = 0
    PART = 1


@dataclass
class Target:
    """One segmented target of an answer ("television_set_1's button")."""

    label: str
    object_name: str
    instance: int
    part_name: str
    granularity: Granularity
    mask: np.ndarray  # bool, H x W of the source image: always the visible pixels
    score: float = 0.0  # predicted quality of ``mask``
    # The complete shape (occluded parts included), bool H x W: filled when the command
    # asked for it (``mask_type == "amodal"``) or amodal output is on, else None.
    amodal_mask: np.ndarray | None = None
    bbox: tuple[int, int, int, int] = (0, 0, 0, 0)  # x, y, width, height of the visible mask
    # Which shape the command asked for: "modal" (visible pixels) or "amodal" (the complete
    # shape). ``mask`` stays visible either way, so a box or a centroid computed from it
    # never lands on whatever occludes the object; read :attr:`requested_mask` for the
    # shape that was asked for.
    mask_type: str = MaskType.MODAL
    amodal_score: float = 0.0  # predicted quality of ``amodal_mask``

    def __post_init__(self) -> None:
        if self.bbox == (0, 0, 0, 0) and self.mask is not None and self.mask.any():
            self.bbox = mask_bbox(self.mask)

    @property
    def requested_mask(self) -> np.ndarray:
        """Return the shape the command asked for: the complete one for "amodal", else the visible one."""
        return self.amodal_mask if self._asked_complete else self.mask

    @property
    def requested_score(self) -> float:
        """Return the predicted quality of :attr:`requested_mask`."""
        return self.amodal_score if self._asked_complete else self.score

    @property
    def _asked_complete(self) -> bool:
        return self.mask_type == MaskType.AMODAL and self.amodal_mask is not None


@dataclass(frozen=True)
class Absence:
    """An answer that names no target, and the words of what it says is missing ("" if none)."""

    missing: str


@dataclass
class Result:
    """What one command yields: the answer text and its targets."""

    answer: str
    targets: list[Target] = field(default_factory=list)
    raw_answer: str = ""  # the generated text with [SEG] markers, for debugging
    # Labels the answer named twice and that went (m2sa_core/inference/duplicates.py): the
    # targets and ``answer`` are without them, ``raw_answer`` is as generated.
    merged: list[str] = field(default_factory=list)
    # Each target's [SEG] in ``raw_answer`` (0-based): 0, 1, ... unless targets were merged.
    seg_indices: list[int] = field(default_factory=list)
    timings_ms: dict[str, float] = field(default_factory=dict)
    # True when generation hit the token limit before the end-of-answer token: the answer
    # (and its list of targets) may be cut short.
    truncated: bool = False
    # The command's [SEG] prompts, kept when asked for (``segment(..., keep_prompts=True)``):
    # they re-segment the same targets on later frames without the language model.
    prompts: TrackPrompts | None = None
    # Set when the answer names no target (no [SEG]): the command asked about something that
    # is not there, and ``missing`` holds its words when the answer says them
    # (m2sa_core/inference/absence.py). ``None`` when the answer names targets.
    absence: Absence | None = None


@dataclass(frozen=True)
class TrackedTarget:
    """What a target keeps from the command's answer: its name and the shape asked for."""

    label: str
    object_name: str
    instance: int
    part_name: str
    granularity: Granularity
    mask_type: str  # "modal" | "amodal"


@dataclass
class TrackPrompts:
    """
    A command's targets as SAM prompts, reusable on any frame of the same camera.

    :func:`m2sa_core.inference.tracking.track_frame` prompts a frame with them.

    ``embeddings`` row i prompts target i; rows and ``targets`` are in answer order.
    """

    embeddings: np.ndarray  # float32 [n, P]: phi([SEG] states), SAM sparse prompt embeddings
    targets: list[TrackedTarget]
    answer: str
    command: str = ""

    def __post_init__(self) -> None:
        if self.embeddings.ndim != 2 or self.embeddings.shape[0] != len(self.targets):
            raise ValueError(f"prompt embeddings {self.embeddings.shape} do not match {len(self.targets)} targets")

    def __len__(self) -> int:
        return len(self.targets)

    @classmethod
    def from_result(cls, result: Result, embeddings: np.ndarray, command: str = "") -> TrackPrompts:
        """Pair a command's :class:`Result` with the phi embeddings of its [SEG] states."""
        targets = [TrackedTarget(t.label, t.object_name, t.instance, t.part_name, t.granularity, t.mask_type)
                   for t in result.targets]
        embeddings = np.asarray(embeddings, dtype=np.float32)
        if embeddings.ndim != 2:  # flat, as a message carries them; [0, P] already for an answer without [SEG]
            embeddings = embeddings.reshape(len(targets), -1) if targets else embeddings.reshape(0, 0)
        return cls(embeddings, targets, result.answer, command)


def mask_bbox(mask: np.ndarray) -> tuple[int, int, int, int]:
    """Tight (x, y, width, height) box of a boolean mask; zeros for an empty mask."""
    ys = np.flatnonzero(mask.any(axis=1))
    xs = np.flatnonzero(mask.any(axis=0))
    if ys.size == 0:
        return (0, 0, 0, 0)
    return (int(xs[0]), int(ys[0]), int(xs[-1] - xs[0] + 1), int(ys[-1] - ys[0] + 1))
