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
Sensor artefacts for synthetic depth: holes, noise and mixed pixels at edges.

A real registered depth image is not the clean one :mod:`.depth` renders: stereo and ToF
sensors lose pixels (shiny, dark or too-near surfaces), add noise that grows with range,
and at an object's border give "mixed" or "flying" pixels whose depth lies between the
object and what is behind it - after registration to the colour camera these land
inside the object's mask. Geometry code must survive all three, so tests and recorded
bags degrade the clean depth with these functions. Each takes its own rng, returns a new
float32 array (H, W) and leaves its input alone; ``invalid`` is what a hole holds (NaN as
32FC1 carries it, 0 as 16UC1 does).
"""

from __future__ import annotations

import cv2
import numpy as np


def add_holes(depth: np.ndarray, rng: np.random.Generator, fraction: float,
              invalid: float = np.nan) -> np.ndarray:
    """Return a random ``fraction`` of the pixels (independently drawn) set to ``invalid``."""
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"hole fraction must be in [0, 1], got {fraction}")
    out = np.array(depth, dtype=np.float32, copy=True)
    out[rng.random(out.shape) < fraction] = invalid
    return out


def add_noise(depth: np.ndarray, rng: np.random.Generator, sigma_m: float,
              per_metre: float = 0.0) -> np.ndarray:
    """
    Gaussian noise along the viewing direction.

    Sigma = ``sigma_m`` + ``per_metre`` * z (stereo error grows with range); invalid
    pixels stay invalid.
    """
    out = np.array(depth, dtype=np.float32, copy=True)
    valid = np.isfinite(out) & (out > 0)
    sigma = sigma_m + per_metre * out[valid]
    out[valid] = np.maximum(out[valid] + rng.normal(0.0, 1.0, int(valid.sum())) * sigma, 1e-3)
    return out


def bleed_edges(depth: np.ndarray, mask: np.ndarray, rng: np.random.Generator, width_px: int = 2) -> np.ndarray:
    """
    Mix the pixels of the ring of ``mask`` within ``width_px`` of its border with what is behind.

    Each ring pixel takes a random
    blend ``a * own + (1 - a) * behind`` (a uniform in [0, 1], so a = 0 is a pixel wholly
    of the background, as when a mask spills over the edge), where ``behind`` is the
    farthest depth within ``width_px + 1`` pixels - the background the mask borders on.
    """
    out = np.array(depth, dtype=np.float32, copy=True)
    mask = np.asarray(mask, dtype=bool)
    if width_px <= 0 or not mask.any():
        return out
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * width_px + 1, 2 * width_px + 1))
    inner = cv2.erode(mask.astype(np.uint8), kernel, borderType=cv2.BORDER_CONSTANT, borderValue=0) > 0
    ring = mask & ~inner
    filled = np.where(np.isfinite(out), out, 0).astype(np.float32)
    reach = cv2.getStructuringElement(cv2.MORPH_RECT, (2 * width_px + 3, 2 * width_px + 3))
    behind = cv2.dilate(filled, reach)  # grey dilation = the local maximum (the farthest)
    a = rng.random(int(ring.sum())).astype(np.float32)
    own = out[ring]
    mixed = a * own + (1 - a) * behind[ring]
    out[ring] = np.where(np.isfinite(own), mixed, own)
    return out
