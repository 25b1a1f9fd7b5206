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
How a :class:`~m2sa_core.inference.Segmenter` runs a call: one frozen value the stages read.

The stages (:mod:`m2sa_core.inference.stages`) and tracking are handed the model, the
tokenizer and these settings rather than the segmenter, so nothing below the segmenter
reaches back up to it. A setting changed on a running segmenter (the node's
``mask_threshold``, say) replaces the whole value; a stage never sees half of a change.
"""

from __future__ import annotations

from dataclasses import dataclass

from m2sa_core.model.generation import SpecialIds
import torch

# dynamic: transformers' DynamicCache; static: static KV cache; graph: static + the decode step
# replayed as a CUDA graph (CUDA only); auto: graph on CUDA, dynamic elsewhere. All give the same tokens
# (up to bf16 rounding on GPU).
DECODERS = ("auto", "dynamic", "static", "graph")
# MMR answers name up to 16 targets with long PACO names ("mouse_(computer_equipment)_1's
# left_button [SEG]" is ~20 tokens): 64 tokens lost trailing [SEG]s. See docs/FIDELITY.md, item 7.
DEFAULT_MAX_NEW_TOKENS = 256


@dataclass(frozen=True)
class InferenceSettings:
    """
    Where the model runs and the knobs of one call, range-checked once.

    ``decoder`` is resolved ("auto" already chosen for the device); ``special_ids`` are
    the tokenizer's EOS and padding ids and the model's [SEG] id.
    """

    device: torch.device
    dtype: torch.dtype
    special_ids: SpecialIds
    decoder: str = "dynamic"
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS
    mask_threshold: float = 0.0  # mask logits above it are in the mask
    amodal: bool = False  # fill Target.amodal_mask for every target
    # Merge instances named twice (m2sa_core/inference/duplicates.py); 0 is off.
    duplicate_iou: float = 0.0
    # Look at a step's EOS flags only after queuing the next step: keeps a GPU busy, wastes one step
    lagged_stop: bool = False

    def __post_init__(self) -> None:
        if self.decoder not in DECODERS[1:]:
            raise ValueError(f"decoder must be one of {DECODERS[1:]} once resolved, got {self.decoder!r}")
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if not 0.0 <= self.duplicate_iou <= 1.0:
            raise ValueError(f"duplicate_iou must be in [0, 1] (0 = off), got {self.duplicate_iou}")
