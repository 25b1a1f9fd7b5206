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
COCO run-length encoding of masks, through pycocotools.

Datasets store masks as COCO RLE (``{"size": [h, w], "counts": ...}``) with ``counts``
either the compressed string of the MMR/PACO release or an uncompressed list of run
lengths. Everything in the project encodes and decodes here so that both forms, the
size checks and the error messages are handled once.
"""

from __future__ import annotations

import functools
from typing import Any
import warnings

import numpy as np
from pycocotools import mask as mask_utils


class RLEError(ValueError):
    """A mask annotation that cannot be decoded (wrong type, size or counts)."""


def encode_mask(mask: np.ndarray) -> dict[str, Any]:
    """Compressed COCO RLE of a boolean [H, W] mask, JSON-ready (``counts`` is a str)."""
    if mask.ndim != 2:
        raise RLEError(f"encode_mask needs a 2-D mask, got shape {mask.shape}")
    rle = mask_utils.encode(np.asfortranarray(mask.astype(np.uint8)))
    return {"size": [int(rle["size"][0]), int(rle["size"][1])], "counts": rle["counts"].decode("ascii")}


def _to_coco_rle(rle: Any) -> dict[str, Any]:
    """Validate an RLE dict and convert it to the form pycocotools' C code accepts."""
    if not isinstance(rle, dict):
        raise RLEError(f"RLE must be a dict with 'size' and 'counts', got {type(rle).__name__}")
    size = rle.get("size")
    counts = rle.get("counts")
    if (
        not isinstance(size, (list, tuple))
        or len(size) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in size)
    ):
        raise RLEError(f"RLE 'size' must be [height, width] of non-negative ints, got {size!r}")
    h, w = int(size[0]), int(size[1])
    if isinstance(counts, list):
        if not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in counts):
            raise RLEError("uncompressed RLE 'counts' must be a list of non-negative ints")
        if sum(counts) != h * w:
            raise RLEError(f"uncompressed RLE counts sum to {sum(counts)}, expected {h}*{w}={h * w}")
        # frPyObjects compresses list counts; it needs the size as separate h, w.
        return mask_utils.frPyObjects({"size": [h, w], "counts": counts}, h, w)
    if isinstance(counts, str):
        counts = counts.encode("ascii", errors="strict") if counts.isascii() else None
    if not isinstance(counts, bytes):
        raise RLEError("RLE 'counts' must be an ASCII string or a list of ints")
    return {"size": [h, w], "counts": counts}


def decode_rle(rle: Any, height: int | None = None, width: int | None = None) -> np.ndarray:
    """
    Boolean [H, W] mask of an RLE; checks the size against ``height``/``width`` when given.

    A compressed string whose runs do not add up to H*W is rejected: pycocotools would
    otherwise return a silently truncated or padded mask.
    """
    coco = _checked_coco_rle(rle, height, width)
    with warnings.catch_warnings():
        # pycocotools 2.0.x trips a numpy 2 DeprecationWarning inside decode (its own code).
        warnings.simplefilter("ignore", DeprecationWarning)
        return mask_utils.decode(coco).astype(bool)


def check_rle(rle: Any, height: int | None = None, width: int | None = None) -> None:
    """
    Check what :func:`decode_rle` checks, without making the mask.

    Readers validate every annotation of a data set when they open it, and decoding each one
    took most of that time.
    """
    _checked_coco_rle(rle, height, width)


def _checked_coco_rle(rle: Any, height: int | None, width: int | None) -> dict[str, Any]:
    coco = _to_coco_rle(rle)
    h, w = coco["size"]
    if (height is not None and h != height) or (width is not None and w != width):
        raise RLEError(f"RLE size {h}x{w} does not match the image size {height}x{width}")
    total = _compressed_total(coco["counts"])
    if total != h * w:
        raise RLEError(f"RLE runs cover {total} pixels, expected {h}*{w}={h * w}")
    return coco


def rle_area(rle: Any) -> int:
    """Return the number of foreground pixels, without decoding the mask."""
    return int(mask_utils.area(_to_coco_rle(rle)))


def rle_bbox(rle: Any) -> list[float]:
    """COCO [x, y, w, h] box of an RLE."""
    return [float(v) for v in mask_utils.toBbox(_to_coco_rle(rle))]


# Characters a run may take: 7 hold any run of a 2**31-pixel image; 12 keep every shift
# inside int64. Longer is a corrupt string, not a mask.
_MAX_RUN_CHARS = 12


@functools.lru_cache(maxsize=1 << 16)  # a data set repeats its masks: per question, modal = amodal
def _compressed_total(counts: bytes) -> int:
    """
    Sum of the run lengths of a compressed COCO counts string.

    Mirrors the LEB128-like scheme of COCO's ``rleFrString`` (5 bits per char, bit 0x20
    continues a run, bit 0x10 of a run's last char its sign, runs after the second stored
    as differences from the run two before) so corrupt strings can be detected;
    pycocotools itself does not check. Vectorised: data sets hold hundreds of thousands
    of masks and every one is checked when they are read.
    """
    if not counts:
        return 0
    chars = np.frombuffer(counts, np.uint8).astype(np.int64) - 48
    bad = np.flatnonzero((chars < 0) | (chars > 63))
    if bad.size:
        raise RLEError(f"RLE counts string has an invalid character {chr(counts[bad[0]])!r}")
    last = (chars & 0x20) == 0  # the last char of each run
    if not last[-1]:
        raise RLEError("RLE counts string ends in the middle of a run")
    starts = np.flatnonzero(np.concatenate(([True], last[:-1])))
    run_of_char = np.cumsum(np.concatenate(([0], last[:-1])))
    place = np.arange(chars.size) - starts[run_of_char]  # k: the char's place within its run
    if place.max() >= _MAX_RUN_CHARS:
        raise RLEError(f"RLE counts string has a run of more than {_MAX_RUN_CHARS} characters")
    runs = np.add.reduceat((chars & 0x1F) << (5 * place), starts)
    negative = (chars[last] & 0x10) != 0
    runs = np.where(negative, runs | (-1 << (5 * (place[last] + 1))), runs)
    # Differences: run i (i > 2) adds run i - 2, so odd runs from the second and even ones
    # from the third are running sums; the first run stands alone.
    runs[1::2] = np.cumsum(runs[1::2])
    runs[2::2] = np.cumsum(runs[2::2])
    if (runs < 0).any():
        raise RLEError("RLE counts string decodes to a negative run length")
    return int(runs.sum())
