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
The configured data sources of the training mixture and evaluation, opened.

Each source's ``kind`` names its reader in the one registry,
:data:`m2sa_core.data.readers.READERS` (or ``module:function`` for the pluggable
sem_seg / refer_seg / vqa slots, see :func:`m2sa_core.data.readers.resolve_reader`).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Sequence

from m2sa_core.data.readers import resolve_reader
from m2sa_core.data.records import SegRecord
from training.config import DataSourceConfig
from training.mixture import Source

log = logging.getLogger(__name__)


class EmptySourceError(ValueError):
    """A configured data source yields no sample at all."""


def open_source(src: DataSourceConfig, strict: bool = False) -> Source:
    if not Path(src.path).exists():
        raise FileNotFoundError(f"data source {src.name or src.kind}: {src.path} does not exist")
    records = resolve_reader(src.kind)(src.path, src.image_root, strict)
    problems = getattr(records, "problems", [])
    name = src.name or src.kind
    records = _filtered(records, src, name)
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


def _filtered(records, src: DataSourceConfig, name: str):
    """
    Return the view ``min_instances``, ``min_targets``, ``families`` and ``exclude_families`` ask for.

    An empty view is an error naming the filter.
    """
    keep = []
    if src.min_targets > 1:
        keep.append((f"has {src.min_targets} or more targets (min_targets)",
                     lambda r: len(r.targets) >= src.min_targets))
    if src.min_instances > 1:
        keep.append((f"names {src.min_instances} or more instances of one object (min_instances)",
                     lambda r: most_instances_of_one_object(r) >= src.min_instances))
    if src.families:
        wanted = set(src.families)
        keep.append((f"is of the families {sorted(wanted)} (families)", lambda r: r.meta.get("family") in wanted))
    if src.exclude_families:
        unwanted = set(src.exclude_families)
        keep.append((f"is of none of the families {sorted(unwanted)} (exclude_families)",
                     lambda r: r.meta.get("family") not in unwanted))
    for what, test in keep:
        read = len(records)
        records = [r for r in records if test(r)]
        log.info("%s: %d of %d questions kept: each %s", name, len(records), read, what)
        if not records:
            raise EmptySourceError(f"data source {name}: none of the {read} questions in {src.path} {what}")
    return records


def most_instances_of_one_object(record: SegRecord) -> int:
    """
    How many instances of its most listed object an answer names.

    3 for "pan_1's bottom, pan_2's bottom and pan_3's bottom", 1 for "mug_1 and mug_1's
    handle" (one mug). Targets a dataset does not number (``instance`` 0) cannot be told
    apart, as in :func:`m2sa_core.evaluation.answer_errors.answer_error`: they count as one
    instance.
    """
    instances: dict[str, set] = {}
    for target in record.targets:
        instances.setdefault(target.object_name, set()).add(target.instance)
    return max((len(v) for v in instances.values()), default=0)


def open_sources(configs: Sequence[DataSourceConfig], strict: bool = False) -> list[Source]:
    if not configs:
        raise ValueError("the config lists no training data (key: data)")
    return [open_source(c, strict) for c in configs]
