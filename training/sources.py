"""Dataset readers by name, for the training mixture and evaluation.

The sem_seg / refer_seg / vqa slots of LISA's mixture are pluggable: a source whose
``kind`` is ``module:function`` calls that function as ``fn(path, image_root, strict)``
and uses the sequence of records it returns, so a lab adds ADE20K or RefCOCO without
touching this package.
"""

from __future__ import annotations

import importlib
import logging
from pathlib import Path
from typing import Callable, Sequence

from m2sa_core.data.amodal_reasonseg import read_amodal_reasonseg
from m2sa_core.data.mmr import read_mmr
from m2sa_core.data.r2sm import read_r2sm
from m2sa_core.data.reasonseg import read_reasonseg
from training.config import DataSourceConfig
from training.mixture import Source

log = logging.getLogger(__name__)

Reader = Callable[[str, str, bool], Sequence]

READERS: dict[str, Reader] = {
    "mmr": lambda path, root, strict: read_mmr(path, root, strict=strict),
    "synthetic": lambda path, root, strict: read_mmr(path, root, strict=strict, source="synthetic"),
    "reasonseg": lambda path, root, strict: read_reasonseg(path, strict=strict),
    "r2sm": lambda path, root, strict: read_r2sm(path, root, strict=strict),
    "amodal_reasonseg": lambda path, root, strict: read_amodal_reasonseg(path, root, strict=strict),
}
PLUGGABLE_SLOTS = ("sem_seg", "refer_seg", "vqa")


class EmptySourceError(ValueError):
    """A configured data source yields no sample at all."""


def resolve_reader(kind: str) -> Reader:
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


def open_source(src: DataSourceConfig, strict: bool = False) -> Source:
    if not Path(src.path).exists():
        raise FileNotFoundError(f"data source {src.name or src.kind}: {src.path} does not exist")
    records = resolve_reader(src.kind)(src.path, src.image_root, strict)
    problems = getattr(records, "problems", [])
    name = src.name or src.kind
    if len(records) == 0:
        # A source that silently vanished from the mixture would change the recipe unseen
        # (e.g. an MMR image root one folder too deep fails every image check).
        first = f"; first: {problems[0]}" if problems else ""
        raise EmptySourceError(
            f"data source {name}: no usable samples in {src.path} ({len(problems)} entries skipped{first}). "
            f"Check image_root ({src.image_root or 'unset'}): MMR file_name entries carry the COCO split folder "
            "(train2017/...), so image_root is the folder that holds train2017/"
        )
    if problems:
        log.warning("%s: skipped %d bad entries (first: %s)", src.path, len(problems), problems[0])
    return Source(name=name, items=records, rate=src.rate)


def open_sources(configs: Sequence[DataSourceConfig], strict: bool = False) -> list[Source]:
    if not configs:
        raise ValueError("the config lists no training data (key: data)")
    return [open_source(c, strict) for c in configs]
