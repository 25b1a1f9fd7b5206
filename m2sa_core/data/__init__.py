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
Dataset readers, RLE, conversation templates, sample building and the synthetic world.

The readers (MMR, ReasonSeg, R2SM, AmodalReasonSeg) all yield
:class:`~m2sa_core.data.records.SegRecord` objects; :class:`~m2sa_core.data.builder.SampleBuilder`
turns a record into a :class:`~m2sa_core.data.builder.TrainingSample`. Submodules are
imported lazily by the names below so that ``import m2sa_core.prompt`` (used
at inference) does not pull in OpenCV or pycocotools.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "TargetAnnotation": "m2sa_core.data.records",
    "SegRecord": "m2sa_core.data.records",
    "SegDataset": "m2sa_core.data.records",
    "DataError": "m2sa_core.data.records",
    "DataProblem": "m2sa_core.data.records",
    "read_mmr": "m2sa_core.data.mmr",
    "MMRDataset": "m2sa_core.data.mmr",
    "read_reasonseg": "m2sa_core.data.reasonseg",
    "read_r2sm": "m2sa_core.data.r2sm",
    "read_amodal_reasonseg": "m2sa_core.data.amodal_reasonseg",
    "read_dataset": "m2sa_core.data.readers",
    "SampleBuilder": "m2sa_core.data.builder",
    "TrainingSample": "m2sa_core.data.builder",
    "encode_mask": "m2sa_core.data.rle",
    "decode_rle": "m2sa_core.data.rle",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'm2sa_core.data' has no attribute {name!r}")
