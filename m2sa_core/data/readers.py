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
The one registry of dataset readers, by kind, and the reader for a path.

:data:`READERS` maps a dataset kind (MMR, the synthetic world, ReasonSeg, R2SM,
AmodalReasonSeg, and the pretraining sets: mask annotations, image conversations) to its
reader; :func:`resolve_reader` also accepts ``module:function``
for the pluggable sem_seg / refer_seg / vqa slots of LISA's mixture, called as
``fn(path, image_root, strict)``, so a lab adds ADE20K or RefCOCO without touching this
package. :func:`read_dataset` serves the command-line tools, where a user names a file
and expects it to be understood without saying which dataset it belongs to.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Callable, Sequence

from m2sa_core.data.amodal_reasonseg import read_amodal_reasonseg
from m2sa_core.data.image_conversations import read_image_conversations
from m2sa_core.data.mask_annotations import read_mask_annotations
from m2sa_core.data.mmr import read_mmr
from m2sa_core.data.r2sm import read_r2sm
from m2sa_core.data.reasonseg import read_reasonseg
from m2sa_core.data.records import DataError, SegDataset

Reader = Callable[[str, str, bool], Sequence]

READERS: dict[str, Reader] = {
    "mmr": lambda path, root, strict: read_mmr(path, root, strict=strict),
    "synthetic": lambda path, root, strict: read_mmr(path, root, strict=strict, source="synthetic"),
    "reasonseg": lambda path, root, strict: read_reasonseg(path, strict=strict),
    "r2sm": lambda path, root, strict: read_r2sm(path, root, strict=strict),
    "amodal_reasonseg": lambda path, root, strict: read_amodal_reasonseg(path, root, strict=strict),
    # Pretraining sets (docs/TRAINING.md, staged training): masks without text, text without masks.
    "mask_annotations": lambda path, root, strict: read_mask_annotations(path, root, strict=strict),
    "image_conversations": lambda path, root, strict: read_image_conversations(path, root, strict=strict),
}
PLUGGABLE_SLOTS = ("sem_seg", "refer_seg", "vqa")


def resolve_reader(kind: str) -> Reader:
    """Return the reader of a dataset kind: a name in :data:`READERS` or ``module:function``."""
    if kind in READERS:
        return READERS[kind]
    if ":" in kind:
        module_name, _, attr = kind.partition(":")
        try:
            return getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            raise ValueError(f"data source kind {kind!r}: cannot import {attr} from {module_name}: {exc}") from exc
    hint = ""
    if kind in PLUGGABLE_SLOTS:
        hint = f" ({kind} needs a reader of yours: set kind to 'your.module:read_function')"
    raise ValueError(f"unknown data source kind {kind!r}{hint}; built in: {sorted(READERS)}")


def default_image_root(json_path: Path) -> Path:
    """``images/`` beside the file when it exists (the synthetic layout), else the file's folder."""
    candidate = json_path.parent / "images"
    return candidate if candidate.is_dir() else json_path.parent


def detect_format(path: Path) -> str:
    """Return "reasonseg" for a directory, else the format of the JSON file's top level."""
    if path.is_dir():
        return "reasonseg"
    with open(path, encoding="utf-8") as f:
        head = f.read(4096).lstrip()
    if head.startswith("["):
        return "mmr"
    if head.startswith("{"):
        try:
            with open(path, encoding="utf-8") as f:
                name = json.load(f).get("dataset")
        except (json.JSONDecodeError, AttributeError) as exc:
            raise DataError(f"{path}: not valid JSON: {exc}") from exc
        if name in ("r2sm", "amodal_reasonseg", "mask_annotations", "image_conversations"):
            return name
    raise DataError(f"{path}: not an MMR list, an R2SM/AmodalReasonSeg/mask-annotation/image-conversation file "
                    "or a ReasonSeg directory")


def read_dataset(path: str | Path, image_root: str | Path | None = None, strict: bool = False) -> SegDataset:
    """Read any supported dataset file or ReasonSeg split directory."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path} does not exist")
    fmt = detect_format(path)
    if fmt == "reasonseg":  # a split directory: its images sit beside the annotations
        return READERS[fmt](path, None, strict)
    root = Path(image_root) if image_root is not None else default_image_root(path)
    return READERS[fmt](path, root, strict)
