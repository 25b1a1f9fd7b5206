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

from m2sa_core.inference.frame_cache import FrameCache, FrameEntry, image_key
from m2sa_core.inference.segmenter import default_dtype, dtype_from_name, DTYPE_NAMES, Segmenter, STAGES
from m2sa_core.inference.settings import DECODERS, DEFAULT_MAX_NEW_TOKENS, InferenceSettings
from m2sa_core.inference.stages import DecodedMasks, SegmenterStages
from m2sa_core.model.m2sa import FrameFeatures
from m2sa_core.types import Cancelled

# Cancelled: the node imports it from here; the rest for callers of the stages.
__all__ = ["Cancelled", "DECODERS", "DEFAULT_MAX_NEW_TOKENS", "DTYPE_NAMES", "DecodedMasks", "FrameCache",
           "FrameEntry", "FrameFeatures", "InferenceSettings", "STAGES", "Segmenter", "SegmenterStages",
           "default_dtype", "dtype_from_name", "image_key"]
