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
Image preprocessing for both branches of M2SA.

SAM sees the image resized so that its longest side is ``sam.image_size``, normalised
with the pixel mean/std and padded bottom-right (so mask coordinates map back by a
crop and a resize, as in ``Sam.postprocess_masks``). CLIP sees a square image at its
own size: padded to a square with the mean colour (keeps the edges visible) or, as the
authors do (``pad_clip_to_square=False``), resized so that its shortest side is the
CLIP size and centre-cropped.

``resize_backend`` picks the resampling: "pil" reproduces the authors' stack (PIL
bicubic for CLIP, as transformers' ``CLIPImageProcessor`` does, and PIL bilinear for
SAM, as torchvision's ``resize`` of a PIL image does; both antialias when shrinking),
"cv2" is cv2 without antialiasing, which the tiny model was trained with. Golden
tensors from the authors' stack are checked in ``tests/core/test_fidelity_preprocess.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import cv2
from m2sa_core.model.config import M2SAConfig
import numpy as np
from PIL import Image
import torch


def validate_image(image: Any, where: str = "image") -> np.ndarray:
    """Check that ``image`` is an RGB uint8 H x W x 3 array; raise a clear error otherwise."""
    if not isinstance(image, np.ndarray):
        raise TypeError(f"{where}: expected a numpy array (H x W x 3, uint8 RGB), got {type(image).__name__}")
    if image.dtype != np.uint8:
        raise ValueError(f"{where}: expected dtype uint8, got {image.dtype}")
    if image.ndim != 3 or image.shape[2] != 3:
        raise ValueError(f"{where}: expected shape H x W x 3 (RGB), got {tuple(image.shape)}")
    if image.shape[0] == 0 or image.shape[1] == 0:
        raise ValueError(f"{where}: empty image of shape {tuple(image.shape)}")
    return image


def longest_side_size(height: int, width: int, target: int) -> tuple[int, int]:
    """(h, w) after scaling the longest side to ``target`` (SAM's ResizeLongestSide rounding)."""
    scale = target / max(height, width)
    return int(height * scale + 0.5), int(width * scale + 0.5)


def clip_shortest_side_size(height: int, width: int, target: int) -> tuple[int, int]:
    """(h, w) after scaling the shortest side to ``target`` (transformers' rounding: the long side truncated)."""
    if height <= width:
        return target, int(target * width / height)
    return int(target * height / width), target


def pil_resize(image: np.ndarray, height: int, width: int, resample: int) -> np.ndarray:
    """Resize a uint8 RGB array with PIL (antialiased when shrinking), back to uint8."""
    return np.asarray(Image.fromarray(np.ascontiguousarray(image)).resize((width, height), resample=resample))


def centre_crop(image: np.ndarray, side: int) -> np.ndarray:
    """Return the central ``side`` x ``side`` window (top/left offsets rounded down, as transformers does)."""
    h, w = image.shape[:2]
    top, left = (h - side) // 2, (w - side) // 2
    return image[top:top + side, left:left + side]


class ImageProcessor:
    """Turns an RGB uint8 image into the tensors :class:`M2SAModel` expects."""

    def __init__(self, config: M2SAConfig) -> None:
        self.sam_size = config.sam.image_size
        self.clip_size = config.clip_image_size
        self.pad_clip_to_square = config.pad_clip_to_square
        self.resize_backend = config.resize_backend
        self.pixel_mean = np.asarray(config.pixel_mean, dtype=np.float32)
        self.pixel_std = np.asarray(config.pixel_std, dtype=np.float32)
        self.clip_mean = np.asarray(config.clip_mean, dtype=np.float32)
        self.clip_std = np.asarray(config.clip_std, dtype=np.float32)

    def sam_image(self, image: np.ndarray) -> tuple[torch.Tensor, tuple[int, int]]:
        """[3, S, S] float tensor and the (h, w) of the resized, unpadded content."""
        h, w = longest_side_size(image.shape[0], image.shape[1], self.sam_size)
        if self.resize_backend == "pil":
            resized = pil_resize(image, h, w, Image.BILINEAR)
        else:
            resized = cv2.resize(image, (w, h), interpolation=cv2.INTER_LINEAR)
        norm = (resized.astype(np.float32) - self.pixel_mean) / self.pixel_std
        padded = np.zeros((self.sam_size, self.sam_size, 3), dtype=np.float32)
        padded[:h, :w] = norm
        return torch.from_numpy(padded).permute(2, 0, 1).contiguous(), (h, w)

    def clip_image(self, image: np.ndarray) -> torch.Tensor:
        """[3, C, C] float tensor normalised with the OpenAI CLIP mean/std."""
        h, w = image.shape[:2]
        if self.resize_backend == "pil" and not self.pad_clip_to_square:
            size = clip_shortest_side_size(h, w, self.clip_size)
            resized = centre_crop(pil_resize(image, *size, Image.BICUBIC), self.clip_size)
            return self._normalise_clip(resized)
        if self.pad_clip_to_square:
            side = max(h, w)
            fill = np.round(self.clip_mean * 255).astype(np.uint8)
            square = np.empty((side, side, 3), dtype=np.uint8)
            square[:] = fill
            top, left = (side - h) // 2, (side - w) // 2
            square[top:top + h, left:left + w] = image
        else:
            side = min(h, w)
            top, left = (h - side) // 2, (w - side) // 2
            square = image[top:top + side, left:left + side]
        if self.resize_backend == "pil":
            resized = pil_resize(square, self.clip_size, self.clip_size, Image.BICUBIC)
        else:
            resized = cv2.resize(square, (self.clip_size, self.clip_size), interpolation=cv2.INTER_CUBIC)
        return self._normalise_clip(resized)

    def clip_patch_coverage(self, masks: np.ndarray, grid: int) -> torch.Tensor:
        """
        Bool masks [n, H, W] -> the fraction of each CLIP patch they cover, [n, grid * grid].

        The masks go through the geometry of :meth:`clip_image` (the padded or the
        centre-cropped square), then each patch of the ``grid`` x ``grid`` layout is the
        area average of its cell, row-major as CLIP orders its patch tokens.
        """
        n, h, w = masks.shape
        square = torch.from_numpy(np.ascontiguousarray(masks)).float()
        if self.pad_clip_to_square:
            side = max(h, w)
            top, left = (side - h) // 2, (side - w) // 2
            square = torch.nn.functional.pad(square, (left, side - w - left, top, side - h - top))
        else:
            side = min(h, w)
            top, left = (h - side) // 2, (w - side) // 2
            square = square[:, top:top + side, left:left + side]
        return torch.nn.functional.adaptive_avg_pool2d(square[:, None], grid)[:, 0].flatten(1)

    def _normalise_clip(self, resized: np.ndarray) -> torch.Tensor:
        norm = (resized.astype(np.float32) / 255.0 - self.clip_mean) / self.clip_std
        return torch.from_numpy(norm).permute(2, 0, 1).contiguous()

    def __call__(self, image: np.ndarray) -> dict[str, Any]:
        """``{sam_image, clip_image, resize_size, original_size}`` for one RGB uint8 image."""
        validate_image(image)
        sam, resize_size = self.sam_image(image)
        return {
            "sam_image": sam,
            "clip_image": self.clip_image(image),
            "resize_size": resize_size,
            "original_size": (int(image.shape[0]), int(image.shape[1])),
        }


def collate_images(items: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Stack the outputs of :class:`ImageProcessor` into batch fields of the model contract."""
    if not items:
        raise ValueError("collate_images: no images")
    return {
        "sam_images": torch.stack([it["sam_image"] for it in items]),
        "clip_images": torch.stack([it["clip_image"] for it in items]),
        "resize_sizes": [tuple(it["resize_size"]) for it in items],
        "original_sizes": [tuple(it["original_size"]) for it in items],
    }
