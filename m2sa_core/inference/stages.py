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
The stages of one :class:`~m2sa_core.inference.Segmenter` call, for callers that need them apart.

``Segmenter.segment`` runs encode -> generate -> decode masks -> build result; the
evaluator (teacher-forced and generative protocols), the benchmarks and tracking need
the stages one by one (forced answers, timings per stage, both masks of every target).
They reach them through ``segmenter.stages`` (a :class:`SegmenterStages`), so the
Segmenter's own surface stays ``segment`` / ``segment_many`` / ``track`` / cache control.
The stages are handed what they use (model, tokenizer, :class:`InferenceSettings`, image
processor, frame cache), never the segmenter.

Tensor shapes: ``FrameEntry.fused`` [1, P, h, w]; a [SEG] state [D] (hidden size);
``DecodedMasks.masks`` bool [n, H, W] at the original image size.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
import time

from m2sa_core.inference.absence import absence_of
from m2sa_core.inference.answer import clean_answer, parse_targets
from m2sa_core.inference.duplicates import duplicate_targets, remove_from_answer
from m2sa_core.inference.frame_cache import FrameCache, FrameEntry, image_key
from m2sa_core.inference.settings import InferenceSettings
from m2sa_core.labels import ParsedLabel
from m2sa_core.model.generation import Generation, greedy_generate
from m2sa_core.model.kv_decoders import DynamicDecoder, static_length, StaticDecoder
from m2sa_core.model.m2sa import FrameFeatures, M2SAModel
from m2sa_core.model.preprocess import ImageProcessor
from m2sa_core.types import MaskType, Result, Target
import numpy as np
import torch
from transformers import PreTrainedTokenizerBase


@dataclass
class DecodedMasks:
    """Masks of one answer at the original image size, one row per [SEG]."""

    masks: np.ndarray  # bool [n, H, W] visible masks
    scores: np.ndarray  # [n] IoU predictions of the visible masks, 0..1
    mask_types: list[MaskType]  # per target: what the command asked for
    amodal_masks: np.ndarray | None = None  # bool [n, H, W], when computed
    amodal_scores: np.ndarray | None = None  # [n]


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class SegmenterStages:
    """
    Encode a frame, generate answers, decode masks, build a result: one Segmenter call in parts.

    Holds no state of its own but the static decoders; model, tokenizer, settings,
    processor and cache are the segmenter's, so a stage run here is exactly the one
    ``segment`` runs. ``settings`` is replaced, never changed, when the segmenter's are.
    """

    def __init__(self, model: M2SAModel, tokenizer: PreTrainedTokenizerBase, settings: InferenceSettings,
                 processor: ImageProcessor, cache: FrameCache) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.settings = settings
        self.processor = processor
        self.cache = cache
        self._decoders: OrderedDict[tuple[int, int], StaticDecoder] = OrderedDict()

    @torch.inference_mode()
    def encode_frame(self, image: np.ndarray, frame_key: Hashable | None, timings: dict[str, float]) -> FrameEntry:
        """Features of ``image`` from the cache or freshly computed (and cached)."""
        settings = self.settings
        key = frame_key if frame_key is not None else image_key(image)
        entry = self.cache.get(key)
        if entry is not None:
            timings.update(sam_encode=0.0, clip_encode=0.0)
            return entry
        inputs = self.processor(image)
        t0 = time.perf_counter()
        sam_image = inputs["sam_image"][None].to(settings.device)
        emb, early = self.model.encode_sam(sam_image)
        fused = self.model.fuse(emb, early)
        upsampling = self.model.encode_upsampling_weights(sam_image)
        _sync(settings.device)
        t1 = time.perf_counter()
        clip = self.model.encode_clip(inputs["clip_image"][None].to(settings.device))
        _sync(settings.device)
        t2 = time.perf_counter()
        timings.update(sam_encode=(t1 - t0) * 1e3, clip_encode=(t2 - t1) * 1e3)
        entry = FrameEntry(FrameFeatures(emb, early, clip, upsampling), fused, inputs["resize_size"],
                           inputs["original_size"])
        self.cache.put(key, entry)
        return entry

    def static_decoder(self, batch: int, prompt_length: int) -> StaticDecoder:
        """Return a reusable static-cache decoder for this shape (LRU of a few; graphs captured once each)."""
        settings = self.settings
        key = (batch, static_length(prompt_length, settings.max_new_tokens))
        decoder = self._decoders.pop(key, None)
        if decoder is None:
            use_graph = settings.decoder == "graph" and settings.device.type == "cuda"
            decoder = StaticDecoder(self.model.llm, batch, key[1], cuda_graph=use_graph)
        self._decoders[key] = decoder
        while len(self._decoders) > 4:
            self._decoders.popitem(last=False)
        return decoder

    @torch.inference_mode()
    def generate(
        self,
        features: FrameFeatures | Sequence[FrameFeatures],
        prompts: Sequence[list[int]],
        timings: dict[str, float],
        on_tokens: Callable[[list[int]], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
        forced: Sequence[Sequence[int]] | None = None,
    ) -> list[Generation]:
        """
        Greedy decoding of all ``prompts`` in one left-padded batch (see ``greedy_generate``).

        ``features`` is one frame for every prompt, or one frame per prompt (several
        cameras' commands batched into one generation: each row sees its own image).
        """
        settings = self.settings
        if forced is not None and len(forced) != len(prompts):
            raise ValueError(f"forced answers ({len(forced)}) must match prompts ({len(prompts)})")
        frames = list(features) if isinstance(features, Sequence) else [features] * len(prompts)
        if len(frames) != len(prompts):
            raise ValueError(f"frames ({len(frames)}) must match prompts ({len(prompts)})")
        model = self.model
        rows = [model.merge_image_embeddings(torch.tensor([p], device=settings.device), f.clip_embeds)[0][0]
                for p, f in zip(prompts, frames)]
        batch, length = len(rows), max(r.shape[0] for r in rows)
        embeds = rows[0].new_zeros((batch, length, rows[0].shape[-1]))
        attention = torch.zeros((batch, length), dtype=torch.long, device=settings.device)
        for b, row in enumerate(rows):
            embeds[b, length - row.shape[0]:] = row
            attention[b, length - row.shape[0]:] = 1
        stepper = DynamicDecoder(model.llm) if settings.decoder == "dynamic" else self.static_decoder(batch, length)
        t0 = time.perf_counter()
        prefilled = stepper.prefill(embeds, attention)
        _sync(settings.device)
        t1 = time.perf_counter()
        outputs, steps = greedy_generate(stepper, prefilled, settings.max_new_tokens, settings.special_ids,
                                         lagged=settings.lagged_stop, on_tokens=on_tokens, should_stop=should_stop,
                                         forced=forced)
        _sync(settings.device)
        t2 = time.perf_counter()
        timings.update(prefill=(t1 - t0) * 1e3, decode=(t2 - t1) * 1e3,
                       decode_per_token=(t2 - t1) * 1e3 / max(steps, 1))
        return outputs

    @torch.inference_mode()
    def decode_masks(
        self, entry: FrameEntry, seg_states: list[torch.Tensor], timings: dict[str, float], amodal: bool = False
    ) -> DecodedMasks:
        """
        Visible masks, mask types and (when ``amodal`` or a target asks for it) amodal masks.

        Amodal masks are upscaled only when needed: the low-res pair comes from one decoder
        pass either way, the full-size upscale is the part worth skipping.
        """
        settings = self.settings
        height, width = entry.original_size
        if not seg_states:
            empty = np.zeros((0, height, width), dtype=bool)
            none = np.zeros((0,), dtype=np.float32)
            return DecodedMasks(empty, none, [], empty if amodal else None, none if amodal else None)
        t0 = time.perf_counter()
        states = torch.stack(seg_states)
        low_res, iou = self.model.decode_mask_pair(entry.fused, states, entry.features.upsampling_weights)
        type_logits = self.model.mask_type_logits(states).float()
        mask_types = [MaskType.from_logits(m, a) for m, a in type_logits.tolist()]
        _sync(settings.device)
        t1 = time.perf_counter()
        with_amodal = amodal or MaskType.AMODAL in mask_types
        masks, scores = self.full_size_masks(entry, low_res, iou, with_amodal)
        t2 = time.perf_counter()
        timings["mask_decode"] = timings.get("mask_decode", 0.0) + (t1 - t0) * 1e3
        timings["postprocess"] = timings.get("postprocess", 0.0) + (t2 - t1) * 1e3
        return DecodedMasks(
            masks=masks[:, 0], scores=scores[:, 0], mask_types=mask_types,
            amodal_masks=masks[:, 1] if with_amodal else None, amodal_scores=scores[:, 1] if with_amodal else None,
        )

    def full_size_masks(self, entry: FrameEntry, low_res: torch.Tensor, iou: torch.Tensor,
                        with_amodal: bool) -> tuple[np.ndarray, np.ndarray]:
        """
        Turn decoder output into bool masks [n, k, H, W] at the frame's size and scores [n, 2] in 0..1.

        ``low_res`` [n, 2, g, g] holds the visible and amodal logits; ``k`` is 2 with
        ``with_amodal``, else 1 (the amodal upscale is the part worth skipping).
        """
        settings = self.settings
        channels = low_res if with_amodal else low_res[:, :1]
        n, k = channels.shape[:2]
        logits = self.model.upscale_masks(channels.flatten(0, 1)[:, None], entry.resize_size, entry.original_size)
        masks = (logits > settings.mask_threshold).unflatten(0, (n, k)).cpu().numpy()
        return masks, iou.float().clamp(0.0, 1.0).cpu().numpy()

    def decode_text(self, tokens: list[int]) -> str:
        """Return the generated text with [SEG] kept (other special tokens dropped)."""
        return self.tokenizer.decode(tokens, skip_special_tokens=True, clean_up_tokenization_spaces=False).strip()

    def build_result(self, generation: Generation, decoded: DecodedMasks, timings: dict[str, float],
                     amodal: bool = False) -> Result:
        """
        Targets labelled from the answer text: ``mask`` visible, ``amodal_mask`` when asked for or ``amodal``.

        Instances named twice (visible masks overlapping by the settings' ``duplicate_iou``)
        are merged into the first: see :mod:`m2sa_core.inference.duplicates`.
        """
        raw = self.decode_text(generation.tokens)
        parsed = parse_targets(raw)
        n = len(generation.seg_states)
        # The tokens are the truth; text round trips should agree, but never drop a mask.
        parsed = (parsed + [ParsedLabel(f"target_{i + 1}", f"target_{i + 1}", 0, "")
                            for i in range(len(parsed), n)])[:n]
        targets: list[Target] = []
        for i, p in enumerate(parsed):
            complete = decoded.mask_types[i] == MaskType.AMODAL
            with_amodal = (amodal or complete) and decoded.amodal_masks is not None
            targets.append(Target(
                label=p.label, object_name=p.object_name, instance=p.instance, part_name=p.part_name,
                granularity=p.granularity, mask=decoded.masks[i], score=float(decoded.scores[i]),
                amodal_mask=decoded.amodal_masks[i] if with_amodal else None,
                amodal_score=float(decoded.amodal_scores[i]) if with_amodal else 0.0,
                mask_type=decoded.mask_types[i]))
        dropped = duplicate_targets(targets, self.settings.duplicate_iou)
        kept = [i for i in range(len(targets)) if i not in dropped]
        return Result(answer=clean_answer(remove_from_answer(raw, dropped)), targets=[targets[i] for i in kept],
                      raw_answer=raw, timings_ms=timings, truncated=not generation.finished,
                      merged=[targets[i].label for i in dropped], seg_indices=kept,
                      absence=absence_of(raw))
