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
CLIP and SAM preprocessing of the real presets against the authors' stack.

tests/core/golden/preprocess.{json,npz} were written by scripts/golden/make_fixtures.py from
the authors' ``CLIPImageProcessor.preprocess`` (openai/clip-vit-large-patch14 settings)
and ``ResizeLongestSide(1024).apply_image`` + normalise-and-pad, on the same
deterministic images (portrait, landscape wider than 1024, tiny). Stated tolerances:
CLIP within 1e-5 (float32 rounding of the same uint8 pixels), SAM's resized pixels within
1 grey level, and the whole SAM tensor's sum within 1e-6 relative.
"""

from __future__ import annotations

import json
from pathlib import Path

from m2sa_core.model.preprocess import ImageProcessor
from m2sa_core.model.presets import get_preset
import numpy as np
import pytest

GOLDEN = Path(__file__).parent / "golden"
META = json.loads((GOLDEN / "preprocess.json").read_text())
ARRAYS = np.load(GOLDEN / "preprocess.npz")
CLIP_TOLERANCE = 1e-5
SAM_PIXEL_TOLERANCE = 1


def pattern_image(height: int, width: int) -> np.ndarray:
    """Return the fixture script's deterministic image (scripts/golden/reference.py)."""
    y, x = np.mgrid[0:height, 0:width].astype(np.int64)
    r = (3 * x + 5 * y) % 256
    g = (x * y // 7) % 256
    b = ((x // 2 + y // 3) % 2) * 230 + 10
    return np.stack([r, g, b], axis=-1).astype(np.uint8)


@pytest.fixture(scope="module")
def processor():
    return ImageProcessor(get_preset("7b"))


@pytest.mark.parametrize("name", sorted(META["images"]))
def test_clip_input_matches_the_authors(processor, name):
    meta = META["images"][name]
    image = pattern_image(meta["height"], meta["width"])
    assert int(image.astype(np.int64).sum()) == meta["image_sum"]
    clip = processor.clip_image(image).numpy()
    assert list(clip.shape) == meta["clip_shape"]
    stride = META["clip_stride"]
    np.testing.assert_allclose(clip[:, ::stride, ::stride], ARRAYS[f"{name}_clip"], atol=CLIP_TOLERANCE, rtol=0)
    assert abs(float(clip.astype(np.float64).sum()) - meta["clip_sum"]) < CLIP_TOLERANCE * clip.size


@pytest.mark.parametrize("name", sorted(META["images"]))
def test_sam_input_matches_the_authors(processor, name):
    meta = META["images"][name]
    image = pattern_image(meta["height"], meta["width"])
    sam, (h, w) = processor.sam_image(image)
    assert [h, w] == meta["sam_resize"]
    assert list(sam.shape) == meta["sam_shape"]
    mean = np.asarray(processor.pixel_mean)[:, None, None]
    std = np.asarray(processor.pixel_std)[:, None, None]
    pixels = np.rint(sam.numpy()[:, :h, :w] * std + mean).transpose(1, 2, 0)
    stride = META["sam_stride"]
    diff = np.abs(pixels[::stride, ::stride] - ARRAYS[f"{name}_sam_resized"].astype(np.float64))
    assert diff.max() <= SAM_PIXEL_TOLERANCE
    total = float(sam.numpy().astype(np.float64).sum())
    assert abs(total - meta["sam_sum"]) <= 1e-6 * max(1.0, abs(meta["sam_sum"])) + 1e-3


def test_the_old_square_padding_would_not_match(processor):
    """The check has teeth: padding to a square (the former 7b framing) differs from the authors'."""
    meta = META["images"]["landscape"]
    image = pattern_image(meta["height"], meta["width"])
    config = get_preset("7b")
    config.pad_clip_to_square = True
    padded = ImageProcessor(config).clip_image(image).numpy()
    stride = META["clip_stride"]
    assert np.abs(padded[:, ::stride, ::stride] - ARRAYS["landscape_clip"]).mean() > 0.1


def test_tiny_preset_keeps_its_own_preprocessing():
    config = get_preset("tiny")
    assert (config.resize_backend, config.pad_clip_to_square, config.seg_request) == ("cv2", True, "")
