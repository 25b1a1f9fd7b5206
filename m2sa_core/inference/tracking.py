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
Follow a command's targets on new frames with SAM alone.

Once the language model has answered a command, each ``[SEG]`` state has gone through
phi into one SAM prompt embedding. Those embeddings *are* the command's meaning as far
as SAM is concerned: on a later frame, SAM's image encoder (with early fusion) and its
mask decoder, prompted with the same embeddings, give updated masks of the same targets
without running the language model again, at SAM's speed. Optionally the previous
frame's visible mask logits go in as SAM's dense mask prompt, which helps SAM hold on to
the same instance when the view changes.

The prompts (:class:`~m2sa_core.types.TrackPrompts`, which a ``Result`` carries) are
plain numpy so a node or a notebook can keep them between frames without holding torch
state; :class:`TrackState` carries the one tensor that must stay on the device (the
previous low-res logits). Tracking runs on the segmenter's stages (its frame cache and
mask upscaling), never on the segmenter itself.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
import time

from m2sa_core.inference.settings import InferenceSettings
from m2sa_core.inference.stages import SegmenterStages
from m2sa_core.model.m2sa import M2SAModel
from m2sa_core.types import MaskType, Result, Target, TrackedTarget, TrackPrompts
import numpy as np
import torch

# TrackedTarget and TrackPrompts live with the Result that carries them; importable from here as before.
__all__ = ["TrackPrompts", "TrackState", "TrackedTarget", "seg_prompt_embeddings", "track_frame"]


@dataclass
class TrackState:
    """What one tracked frame leaves for the next: the visible masks' low-res logits."""

    low_res: torch.Tensor  # [n, 1, g, g] visible mask logits (config.sam.mask_grid_size), on the model's device
    frame_index: int = 0
    lost_frames: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # per target


@torch.inference_mode()
def seg_prompt_embeddings(model: M2SAModel, settings: InferenceSettings, seg_states: list[torch.Tensor]) -> np.ndarray:
    """Return phi of the [SEG] states: float32 [n, P] (an empty [0, P] for an answer without [SEG])."""
    width = model.config.sam.prompt_embed_dim
    if not seg_states:
        return np.zeros((0, width), dtype=np.float32)
    prompts = model.seg_projector(torch.stack(seg_states).to(device=settings.device, dtype=settings.dtype))
    return prompts.float().cpu().numpy()


@torch.inference_mode()
def track_frame(
    stages: SegmenterStages,
    image: np.ndarray,
    prompts: TrackPrompts,
    previous: TrackState | None = None,
    *,
    use_previous_mask: bool = False,
    frame_key: Hashable | None = None,
) -> tuple[Result, TrackState]:
    """
    Masks of ``prompts``' targets on ``image``: one image encode, one decoder pass, no language model.

    With ``use_previous_mask`` and a ``previous`` state, the previous frame's visible
    logits prompt SAM as a dense mask (SAM's ``mask_input``). The result carries the
    command's answer and labels; ``timings_ms`` has the encoders' times, ``mask_decode`` and ``total``.
    """
    start = time.perf_counter()
    timings: dict[str, float] = {}
    entry = stages.encode_frame(image, frame_key, timings)
    model, settings = stages.model, stages.settings
    n = len(prompts)
    previous_index = -1 if previous is None else previous.frame_index
    if n == 0:
        state = TrackState(torch.zeros((0, 1, 1, 1), device=settings.device), previous_index + 1)
        timings["total"] = (time.perf_counter() - start) * 1e3
        return Result(answer=prompts.answer, targets=[], timings_ms=timings), state
    t0 = time.perf_counter()
    embeddings = torch.from_numpy(prompts.embeddings).to(device=settings.device, dtype=settings.dtype)
    mask_input = None
    if use_previous_mask and previous is not None and previous.low_res.shape[0] == n:
        mask_input = previous.low_res
    low_res, iou = model.decode_prompt_pair(entry.fused, embeddings, mask_input, entry.features.upsampling_weights)
    wants_amodal = [t.mask_type == MaskType.AMODAL for t in prompts.targets]
    masks, scores = stages.full_size_masks(entry, low_res, iou, any(wants_amodal))
    timings["mask_decode"] = (time.perf_counter() - t0) * 1e3
    targets = []
    for i, (meta, amodal) in enumerate(zip(prompts.targets, wants_amodal)):
        targets.append(Target(
            label=meta.label, object_name=meta.object_name, instance=meta.instance, part_name=meta.part_name,
            granularity=meta.granularity, mask=masks[i, 0], score=float(scores[i, 0]),
            amodal_mask=masks[i, 1] if amodal else None, amodal_score=float(scores[i, 1]) if amodal else 0.0,
            mask_type=meta.mask_type))
    timings["total"] = (time.perf_counter() - start) * 1e3
    state = TrackState(low_res[:, :1].clone(), previous_index + 1)
    return Result(answer=prompts.answer, targets=targets, timings_ms=timings), state
