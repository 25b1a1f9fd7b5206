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

"""The M2SA model: config, presets, SAM with early fusion, LLaVA, checkpoints."""

from m2sa_core.model.config import LoraSettings, M2SAConfig, SamConfig
from m2sa_core.model.m2sa import FrameFeatures, M2SAModel, M2SAOutput
from m2sa_core.model.preprocess import collate_images, ImageProcessor
from m2sa_core.model.presets import get_preset, PRESETS

__all__ = [
    "FrameFeatures",
    "ImageProcessor",
    "LoraSettings",
    "M2SAConfig",
    "M2SAModel",
    "M2SAOutput",
    "PRESETS",
    "SamConfig",
    "collate_images",
    "get_preset",
]
