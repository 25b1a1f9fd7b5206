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
The project's JSON layout, shared by the R2SM and AmodalReasonSeg readers.

Neither release format could be checked here, so docs/DATASETS.md defines one layout
for both: a header object (``"dataset"``, ``"split"``) with an ``images`` list whose
entries carry ``image_id``, ``file_name``, ``height``, ``width`` and a list of items
(R2SM "queries", AmodalReasonSeg "questions"). Only the items differ, so each reader
passes its own item parser and everything else - header check, image validation,
problem reporting with file, image id and index - is done once, here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from m2sa_core.data.records import (
    DataError,
    DataProblem,
    entry_image_id,
    load_json,
    ProblemLog,
    require,
    require_image_file,
    require_size,
    SegRecord,
    TargetAnnotation,
)


@dataclass(frozen=True)
class LayoutImage:
    """One validated image entry: what every record made from its items has in common."""

    image_id: Any
    image_path: Path
    height: int
    width: int
    split: str

    def record(self, source: str, question_index: int, question: str, answer_template: str,
               targets: list[TargetAnnotation], **fields: Any) -> SegRecord:
        """Return a record of this image; ``fields`` are the optional SegRecord fields (mask_type, meta, ...)."""
        return SegRecord(
            source=source,
            split=self.split,
            image_path=self.image_path,
            image_id=self.image_id,
            question_index=question_index,
            question=question,
            answer_template=answer_template,
            targets=targets,
            height=self.height,
            width=self.width,
            **fields,
        )


# (item, item index, its image) -> record; ValueError naming the bad field.
ItemParser = Callable[[Any, int, LayoutImage], SegRecord]


def read_layout_images(json_path: Path, dataset: str) -> tuple[list[Any], str]:
    """Return the ``images`` list and split of a project-layout file, after checking its header."""
    data = load_json(json_path)
    # A wrong header makes the whole file unusable: an error even in lenient mode.
    if not isinstance(data, dict) or data.get("dataset") != dataset:
        raise DataError(f'{json_path}: not a {dataset} file (expected a JSON object with "dataset": "{dataset}")')
    images = data.get("images")
    if not isinstance(images, list):
        raise DataError(f"{json_path}: 'images' must be a list")
    split = data.get("split") if isinstance(data.get("split"), str) else json_path.stem
    return images, split


def parse_layout_image(entry: Any, index: int, image_root: Path, split: str) -> LayoutImage:
    """One image entry, validated; ValueError naming the bad field."""
    what = f"images[{index}]"
    image_id = require(entry, "image_id", (int, str), what)
    file_name = require(entry, "file_name", str, what)
    height, width = require_size(entry, what)
    return LayoutImage(image_id, require_image_file(image_root, file_name, what), height, width, split)


def layout_images(json_path: Path, image_root: str | Path, log: ProblemLog, dataset: str, items_key: str
                  ) -> Iterator[tuple[LayoutImage, list[Any]]]:
    """(image, its ``items_key`` list) per valid image entry; a bad entry is reported to ``log`` and skipped."""
    images, split = read_layout_images(json_path, dataset)
    for index, entry in enumerate(images):
        try:
            image = parse_layout_image(entry, index, Path(image_root), split)
            items = require(entry, items_key, list, f"images[{index}]")
        except ValueError as exc:
            log.report(entry_image_id(entry, index), None, str(exc))
            continue
        yield image, items


def read_layout_records(json_path: Path, image_root: str | Path, strict: bool, dataset: str, items_key: str,
                        parse_item: ItemParser) -> tuple[list[SegRecord], list[DataProblem]]:
    """
    Read the records of a project-layout file: per image entry, ``parse_item`` for each of its ``items_key``.

    One bad image entry or item is reported with file, image id and index and skipped
    (lenient) or raised (strict); the rest of the file is still read.
    """
    log = ProblemLog(json_path, strict)
    records: list[SegRecord] = []
    for image, items in layout_images(json_path, image_root, log, dataset, items_key):
        for q_index, item in enumerate(items):
            try:
                records.append(parse_item(item, q_index, image))
            except ValueError as exc:
                log.report(image.image_id, q_index, str(exc))
    return records, log.problems
