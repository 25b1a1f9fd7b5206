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
Inference: a command and a frame in, a :class:`~m2sa_core.types.Result` out.

``segmenter.py`` holds the :class:`Segmenter` (loading, ``segment``, ``segment_many``,
``track``); ``stages.py`` its stages, which take the model, the tokenizer and an
:class:`InferenceSettings` (``settings.py``); ``frame_cache.py`` the per-frame features;
``answer.py`` reads an answer's targets, ``duplicates.py`` merges an instance named
twice, ``tracking.py`` follows a command's targets on later frames with SAM alone. Each
imports only what lies below it: the segmenter uses all the others, nothing uses it.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

# Each public name and the module that holds it, imported on first use (PEP 562): a caller
# of the light modules (``answer``, ``absence``, which the data generator uses) does not
# pay for torch and transformers, which the segmenter and its stages import.
_EXPORTS = {
    "Cancelled": "m2sa_core.types",  # the node imports it from here
    "DECODERS": "m2sa_core.inference.settings",
    "DEFAULT_MAX_NEW_TOKENS": "m2sa_core.inference.settings",
    "DTYPE_NAMES": "m2sa_core.inference.segmenter",
    "DecodedMasks": "m2sa_core.inference.stages",
    "FrameCache": "m2sa_core.inference.frame_cache",
    "FrameEntry": "m2sa_core.inference.frame_cache",
    "FrameFeatures": "m2sa_core.model.m2sa",
    "InferenceSettings": "m2sa_core.inference.settings",
    "STAGES": "m2sa_core.inference.segmenter",
    "Segmenter": "m2sa_core.inference.segmenter",
    "SegmenterStages": "m2sa_core.inference.stages",
    "default_dtype": "m2sa_core.inference.segmenter",
    "dtype_from_name": "m2sa_core.inference.segmenter",
    "image_key": "m2sa_core.inference.frame_cache",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
