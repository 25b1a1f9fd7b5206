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
Draw a Result over its image.

Each target's mask tinted in its own colour, outlined, with its label - what RViz
shows from the node's `overlay` topic, what the demo saves and what evaluation
reports use for qualitative figures. Pure numpy/OpenCV.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import cv2
from m2sa_core.types import Target
import numpy as np

# Distinct, saturated colours (RGB), readable on typical indoor scenes; cycled beyond 10.
PALETTE: tuple[tuple[int, int, int], ...] = (
    (230, 25, 75), (60, 180, 75), (0, 130, 200), (245, 130, 48), (145, 30, 180),
    (70, 240, 240), (240, 50, 230), (210, 245, 60), (250, 190, 212), (0, 128, 128),
)


def target_colour(index: int) -> tuple[int, int, int]:
    """Return the colour of the index-th target: stable, so target 0 is always the same red."""
    return PALETTE[index % len(PALETTE)]


def _check_image(image: np.ndarray) -> None:
    if not isinstance(image, np.ndarray) or image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
        shape = getattr(image, "shape", None)
        dtype = getattr(image, "dtype", type(image).__name__)
        raise ValueError(f"overlay: image must be uint8 HxWx3 RGB, got {dtype} {shape}")


def tint_masks(image: np.ndarray, masks: Sequence[np.ndarray], alpha: float = 0.5,
               colours: Sequence[tuple[int, int, int]] | None = None, outline: int = 2) -> np.ndarray:
    """Blend each mask into a copy of ``image`` with its colour; later masks on top."""
    _check_image(image)
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"overlay: alpha must be in [0, 1], got {alpha}")
    out = image.astype(np.float32)
    for i, mask in enumerate(masks):
        mask = np.asarray(mask, dtype=bool)
        if mask.shape != image.shape[:2]:
            raise ValueError(f"overlay: mask {i} is {mask.shape[1]}x{mask.shape[0]}, image is "
                             f"{image.shape[1]}x{image.shape[0]}")
        colour = np.array(colours[i] if colours else target_colour(i), dtype=np.float32)
        out[mask] = (1.0 - alpha) * out[mask] + alpha * colour
    result = np.clip(out + 0.5, 0, 255).astype(np.uint8)
    if outline > 0:
        for i, mask in enumerate(masks):
            contours, _ = cv2.findContours(np.asarray(mask, dtype=np.uint8), cv2.RETR_EXTERNAL,
                                           cv2.CHAIN_APPROX_SIMPLE)
            colour = tuple(int(c) for c in (colours[i] if colours else target_colour(i)))
            cv2.drawContours(result, contours, -1, colour, outline)
    return result


def _label_style(image: np.ndarray, scale: float | None) -> tuple[float, int]:
    """(font scale, stroke thickness): the scale follows the image size unless given."""
    h, w = image.shape[:2]
    scale = scale if scale is not None else max(0.3, min(h, w) / 600.0)
    return scale, max(1, int(round(scale * 1.5)))


def label_size(image: np.ndarray, text: str, scale: float | None = None) -> tuple[int, int]:
    """(width, height) in pixels of the box :func:`draw_label` fills for ``text`` on ``image``."""
    scale, thickness = _label_style(image, scale)
    (tw, th), baseline = cv2.getTextSize(text, cv2.FONT_HERSHEY_SIMPLEX, scale, thickness)
    return tw + 3, th + baseline + 3  # the filled rectangle includes both corners


def draw_label(image: np.ndarray, text: str, anchor: tuple[int, int],
               colour: tuple[int, int, int], scale: float | None = None) -> None:
    """
    Write ``text`` on a filled box of ``colour`` at ``anchor`` (x, y: box top-left), kept inside the image; in place.

    Scale follows the image size unless given.
    """
    h, w = image.shape[:2]
    scale, thickness = _label_style(image, scale)
    (tw, th), baseline = cv2.getTextSize(text, cv2.FONT_HERSHEY_SIMPLEX, scale, thickness)
    x = int(min(max(anchor[0], 0), max(w - tw - 2, 0)))
    y = int(min(max(anchor[1], 0), max(h - th - baseline - 2, 0)))
    cv2.rectangle(image, (x, y), (x + tw + 2, y + th + baseline + 2), colour, cv2.FILLED)
    luminance = 0.299 * colour[0] + 0.587 * colour[1] + 0.114 * colour[2]
    ink = (0, 0, 0) if luminance > 140 else (255, 255, 255)
    cv2.putText(image, text, (x + 1, y + th + 1), cv2.FONT_HERSHEY_SIMPLEX, scale, ink, thickness,
                cv2.LINE_AA)


def dashed_outline(image: np.ndarray, mask: np.ndarray, colour: tuple[int, int, int], dash: int = 6,
                   gap: int = 4, thickness: int = 1) -> None:
    """
    Draw the outline of ``mask`` as a dashed line, in place.

    Dashes, not a fill, so a complete (amodal) shape reads as "extends behind" without
    hiding the visible mask tinted underneath.
    """
    if dash < 1 or gap < 0:
        raise ValueError(f"overlay: dash must be >= 1 and gap >= 0, got {dash}, {gap}")
    mask = np.asarray(mask, dtype=bool)
    if mask.shape != image.shape[:2]:
        raise ValueError(f"overlay: amodal mask is {mask.shape[1]}x{mask.shape[0]}, image is "
                         f"{image.shape[1]}x{image.shape[0]}")
    contours, _ = cv2.findContours(mask.astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_NONE)
    period = dash + gap
    for contour in contours:
        points = contour[:, 0, :]
        for start in range(0, len(points), period):
            segment = points[start:start + dash + 1]
            if len(segment) > 1:
                cv2.polylines(image, [segment.reshape(-1, 1, 2)], False, colour, thickness)
            else:
                x, y = (int(v) for v in segment[0])
                image[y, x] = colour


def overlay_targets(image: np.ndarray, targets: Iterable[Target], alpha: float = 0.5,
                    labels: bool = True, amodal: bool = False, amodal_outline: bool = True) -> np.ndarray:
    """
    RGB uint8 image with every target's mask tinted and labelled; input untouched.

    ``amodal=True`` tints the amodal masks (where a target has one) instead of the
    visible ones, for R2SM / AmodalReasonSeg figures. Otherwise, with
    ``amodal_outline``, a target's amodal mask (when it has one) is drawn as a dashed
    outline in its colour over its tinted visible mask.
    """
    targets = list(targets)
    masks = [t.amodal_mask if amodal and t.amodal_mask is not None else t.mask for t in targets]
    out = tint_masks(image, masks, alpha=alpha)
    if amodal_outline and not amodal:
        thickness = max(1, min(image.shape[:2]) // 200)
        for i, target in enumerate(targets):
            if target.amodal_mask is not None:
                dashed_outline(out, target.amodal_mask, target_colour(i), thickness=thickness)
    if labels:
        placed: list[tuple[int, int, int, int]] = []
        for i, (target, mask) in enumerate(zip(targets, masks)):
            ys, xs = np.nonzero(mask)
            if ys.size == 0:
                continue
            text = target.label or target.object_name or f"target {i + 1}"
            if target.score:
                text = f"{text} {target.score:.2f}"
            scale, _ = _label_style(out, None)
            while label_size(out, text, scale)[0] > out.shape[1] - 1 and scale > 0.1:
                scale *= 0.95  # a long part name shrinks to fit rather than run off the edge
            box = _place_label(out.shape, label_size(out, text, scale), int(xs.min()), int(ys.min()), placed)
            placed.append(box)
            draw_label(out, text, box[:2], target_colour(i), scale)
    return out


def _place_label(shape: tuple[int, ...], size: tuple[int, int], x: int, top: int,
                 placed: list[tuple[int, int, int, int]]) -> tuple[int, int, int, int]:
    """
    Box (x0, y0, x1, y1) for a label of ``size`` at a mask whose top-left is (x, top).

    Just above the mask, so the label names the target without covering it (small
    parts are often narrower than their names), moved further up, else down into the
    mask, until it meets no label already placed; inside the image. Where every slot
    is taken, the first one.
    """
    h, w = shape[:2]
    bw, bh = size
    x = min(max(x, 0), max(w - bw, 0))
    above = [top - bh * k for k in range(1, top // max(bh, 1) + 1)]
    below = list(range(max(top, 0), max(h - bh, 0) + 1, max(bh, 1)))
    candidates = [min(max(y, 0), max(h - bh, 0)) for y in above + below] or [0]
    for y in candidates:
        box = (x, y, x + bw, y + bh)
        if not any(box[0] < o[2] and o[0] < box[2] and box[1] < o[3] and o[1] < box[3] for o in placed):
            return box
    return (x, candidates[0], x + bw, candidates[0] + bh)
