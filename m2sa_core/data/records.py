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
The records every dataset reader yields, and the reader base class.

A reader parses and validates its annotation file once, up front, and then hands out
:class:`SegRecord` objects that keep masks as RLE and images on disk: a training loop
over MMR's ~200k questions must not hold decoded masks or pixels for all of them.
Bad entries are collected as :class:`DataProblem` (file, image id, question index and
reason); lenient readers skip them, strict readers raise :class:`DataError`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
import logging
import os
from pathlib import Path
from typing import Any

from m2sa_core.data.rle import check_rle, decode_rle, RLEError
from m2sa_core.types import Granularity
import numpy as np

logger = logging.getLogger(__name__)

SOURCES = ("mmr", "reasonseg", "r2sm", "amodal_reasonseg", "synthetic")


class DataError(ValueError):
    """A dataset entry that cannot be used; the message names file, image and question."""


@dataclass(frozen=True)
class DataProblem:
    """One rejected entry: where it is and why."""

    file: str
    image_id: Any
    question_index: int | None
    reason: str

    def __str__(self) -> str:
        where = f"{self.file}: image {self.image_id!r}"
        if self.question_index is not None:
            where += f", question {self.question_index}"
        return f"{where}: {self.reason}"


@dataclass
class TargetAnnotation:
    """One target of one question: its name, granularity and masks (as RLE)."""

    label: str  # as in the answer text: "television_set_1's button", or the category
    category_name: str  # PACO style: "television_set:button" or "mug"
    object_name: str
    instance: int  # 0 when the source gives none
    part_name: str  # "" for object-level targets
    granularity: Granularity
    mask_rle: dict[str, Any]
    amodal_rle: dict[str, Any] | None = None
    bbox: list[float] = field(default_factory=list)  # COCO x, y, w, h

    @classmethod
    def named(cls, label: str, category_name: str, object_name: str, instance: int, part_name: str,
              mask_rle: dict[str, Any], amodal_rle: dict[str, Any] | None = None,
              bbox: Sequence[float] = ()) -> TargetAnnotation:
        """
        Return a target whose granularity follows from whether it names a part.

        Every reader builds its targets this way, so none can call a part an object.
        """
        return cls(label=label, category_name=category_name, object_name=object_name, instance=instance,
                   part_name=part_name, granularity=Granularity.PART if part_name else Granularity.OBJECT,
                   mask_rle=mask_rle, amodal_rle=amodal_rle, bbox=[float(v) for v in bbox])

    def mask(self, height: int | None = None, width: int | None = None) -> np.ndarray:
        """Boolean [H, W] mask; the size is checked when given."""
        return decode_rle(self.mask_rle, height, width)

    def amodal_mask(self, height: int | None = None, width: int | None = None) -> np.ndarray | None:
        """Boolean [H, W] complete (amodal) mask, or None when the source has none."""
        if self.amodal_rle is None:
            return None
        return decode_rle(self.amodal_rle, height, width)


@dataclass
class SegRecord:
    """One question about one image, with its targets in answer order."""

    source: str
    split: str
    image_path: Path
    image_id: Any
    question_index: int
    question: str
    answer_template: str  # text answer with one "{seg}" per target; "" when the source has none
    targets: list[TargetAnnotation]
    height: int
    width: int
    ignore_mask_rle: dict[str, Any] | None = None  # pixels left out of the metric (ReasonSeg)
    mask_type: str | None = None  # "modal" | "amodal" when the text decides (R2SM)
    meta: dict[str, Any] = field(default_factory=dict)

    def load_image(self) -> np.ndarray:
        """RGB uint8 [H, W, 3]; a clear error naming the file and image id if unreadable."""
        import cv2  # deferred: readers must stay cheap to import

        try:
            bgr = cv2.imread(str(self.image_path), cv2.IMREAD_COLOR)
        except cv2.error as exc:  # pragma: no cover - cv2 usually returns None instead
            raise DataError(f"cannot read image {self.image_path} (image id {self.image_id!r}): {exc}") from exc
        if bgr is None:
            raise DataError(
                f"cannot read image {self.image_path} (image id {self.image_id!r}): missing or not an image"
            )
        if bgr.shape[:2] != (self.height, self.width):
            raise DataError(
                f"image {self.image_path} (image id {self.image_id!r}) is {bgr.shape[0]}x{bgr.shape[1]}, "
                f"the annotation says {self.height}x{self.width}"
            )
        return np.ascontiguousarray(bgr[:, :, ::-1])

    def ignore_mask(self) -> np.ndarray | None:
        """Boolean [H, W] region excluded from the metric, or None."""
        if self.ignore_mask_rle is None:
            return None
        return decode_rle(self.ignore_mask_rle, self.height, self.width)

    @property
    def record_id(self) -> str:
        return f"{self.source}:{self.split}:{self.image_id}:{self.question_index}"


class SegDataset(Sequence[SegRecord]):
    """A list of records plus the problems found while reading them."""

    def __init__(self, records: list[SegRecord], problems: list[DataProblem], path: Path) -> None:
        self.records = records
        self.problems = problems
        self.path = path
        if problems:  # lenient mode: say how much was dropped, once, where logs go
            logger.warning("%s; first: %s", self.summary(), problems[0])

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, index):  # type: ignore[override]
        return self.records[index]

    def __iter__(self) -> Iterator[SegRecord]:
        return iter(self.records)

    def summary(self) -> str:
        """One line for logs: how many records were kept and how many entries were skipped."""
        return f"{self.path}: {len(self.records)} records, {len(self.problems)} skipped entries"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.summary()})"


class ProblemLog:
    """Collects problems for one file; raises at the first one in strict mode."""

    def __init__(self, file: Path, strict: bool) -> None:
        self.file = file
        self.strict = strict
        self.problems: list[DataProblem] = []

    def report(self, image_id: Any, question_index: int | None, reason: str) -> None:
        problem = DataProblem(str(self.file), image_id, question_index, reason)
        if self.strict:
            raise DataError(str(problem))
        self.problems.append(problem)


def resolve_image_path(image_root: Path, file_name: Any) -> Path:
    """
    ``image_root / file_name``, refusing names that are not relative paths inside the root.

    Annotation files come from the internet; a ``file_name`` of ``../../etc/passwd`` or
    an absolute path must not make the loader read outside the dataset. The check is on
    the text of the name: symlinks *inside* the root (``images/train2017 -> /mnt/coco``,
    a common way to lay out datasets) were put there by the user and are followed.
    """
    if not isinstance(file_name, str) or not file_name:
        raise ValueError(f"file_name must be a non-empty string, got {file_name!r}")
    if "\x00" in file_name:
        raise ValueError("file_name contains a NUL byte")
    candidate = Path(file_name)
    if candidate.is_absolute() or file_name.startswith(("/", "\\")) or (len(file_name) > 1 and file_name[1] == ":"):
        raise ValueError(f"file_name {file_name!r} is absolute; it must be relative to the image root")
    if ".." in candidate.parts or ".." in file_name.replace("\\", "/").split("/"):
        raise ValueError(f"file_name {file_name!r} leaves the image root")
    root = os.path.normpath(os.path.abspath(image_root))
    full = os.path.normpath(os.path.join(root, file_name))
    if os.path.commonpath([root, full]) != root or full == root:
        raise ValueError(f"file_name {file_name!r} does not name a file inside the image root {root}")
    return Path(full)


def require_image_file(image_root: Path, file_name: str, what: str) -> Path:
    """
    Return the existing image ``file_name`` names under ``image_root``; ValueError naming ``what`` otherwise.

    The MMR and project-layout readers check this per image entry, before any of its
    questions are read, so a missing image is reported once under its entry rather than
    at training time.
    """
    try:
        image_path = resolve_image_path(image_root, file_name)
    except ValueError as exc:
        raise ValueError(f"{what}['file_name']: {exc}") from exc
    if not image_path.is_file():
        raise ValueError(f"image file {image_path} does not exist")
    return image_path


def entry_image_id(entry: Any, index: int) -> Any:
    """
    Return the id to report a problem of image entry ``index`` under, before the entry is validated.

    Its own ``image_id`` when it has one, so the problem can be found in the file;
    ``<entry N>`` when the entry is not even an object.
    """
    return entry.get("image_id", f"<entry {index}>") if isinstance(entry, dict) else f"<entry {index}>"


def check_rle_field(value: Any, height: int, width: int, what: str) -> dict[str, Any]:
    """Validate an RLE annotation against the image size; ValueError naming ``what``."""
    try:
        check_rle(value, height, width)
    except RLEError as exc:
        raise ValueError(f"{what}: {exc}") from exc
    return value


def require(entry: Any, key: str, kind: type | tuple[type, ...], what: str) -> Any:
    """``entry[key]`` checked against ``kind``; ValueError naming the key otherwise."""
    if not isinstance(entry, dict):
        raise ValueError(f"{what} must be a JSON object, got {type(entry).__name__}")
    if key not in entry:
        raise ValueError(f"{what} has no '{key}'")
    value = entry[key]
    bad_bool = isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,))
    if not isinstance(value, kind) or bad_bool:
        names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise ValueError(f"{what}['{key}'] must be {names}, got {type(value).__name__}")
    return value


def require_size(entry: dict, what: str) -> tuple[int, int]:
    """(height, width) of an image entry, positive ints."""
    h = require(entry, "height", int, what)
    w = require(entry, "width", int, what)
    if h <= 0 or w <= 0:
        raise ValueError(f"{what} has a non-positive size {h}x{w}")
    return h, w


def load_json(path: Path) -> Any:
    """Parse a JSON file; DataError naming the file if it is missing or malformed."""
    import json

    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError as exc:
        raise DataError(f"annotation file {path} does not exist") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"annotation file {path} is not valid JSON: {exc}") from exc
