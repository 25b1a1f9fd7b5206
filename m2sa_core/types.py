"""Result types shared by inference, evaluation and the ROS layer.

They are plain dataclasses over numpy so that the ROS node, the evaluator and a
researcher's notebook all read the same thing without importing torch or rclpy.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # tracking imports this module
    from m2sa_core.tracking import TrackPrompts


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
    mask_type: str = "modal"
    amodal_score: float = 0.0  # predicted quality of ``amodal_mask``

    def __post_init__(self) -> None:
        if self.bbox == (0, 0, 0, 0) and self.mask is not None and self.mask.any():
            self.bbox = mask_bbox(self.mask)

    @property
    def requested_mask(self) -> np.ndarray:
        """The shape the command asked for: the complete one for "amodal", else the visible one."""
        if self.mask_type == "amodal" and self.amodal_mask is not None:
            return self.amodal_mask
        return self.mask


@dataclass
class Result:
    """What one command yields: the answer text and its targets."""

    answer: str
    targets: list[Target] = field(default_factory=list)
    raw_answer: str = ""  # the generated text with [SEG] markers, for debugging
    timings_ms: dict[str, float] = field(default_factory=dict)
    # True when generation hit the token limit before the end-of-answer token: the answer
    # (and its list of targets) may be cut short.
    truncated: bool = False
    # The command's [SEG] prompts, kept when asked for (``segment(..., keep_prompts=True)``):
    # they re-segment the same targets on later frames without the language model.
    prompts: TrackPrompts | None = None


def mask_bbox(mask: np.ndarray) -> tuple[int, int, int, int]:
    """Tight (x, y, width, height) box of a boolean mask; zeros for an empty mask."""
    ys = np.flatnonzero(mask.any(axis=1))
    xs = np.flatnonzero(mask.any(axis=0))
    if ys.size == 0:
        return (0, 0, 0, 0)
    return (int(xs[0]), int(ys[0]), int(xs[-1] - xs[0] + 1), int(ys[-1] - ys[0] + 1))
