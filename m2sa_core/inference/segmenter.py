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
Command -> Result on one frame, with a per-frame feature cache.

The expensive, command-independent work (SAM image encoder with early features, the
fusion convolutions, CLIP) runs once per frame and is kept in a small LRU, so several
commands on one frame pay for it once. Text is generated greedily with a KV cache, and
the hidden state that predicts each [SEG] is collected while generating (no second
pass): that state is the mask embedding, the same position training supervises.

Each [SEG] yields a visible and an amodal mask from one decoder pass, and the model's
mask-type head says which one the command asked for (``Target.mask_type``).
``Target.mask`` is always the visible mask; ``Target.amodal_mask`` carries the complete
shape when the command asked for it, or for every target with ``amodal`` on.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import replace
from pathlib import Path
import time

from m2sa_core.inference.answer import clean_answer
from m2sa_core.inference.frame_cache import FrameCache
from m2sa_core.inference.settings import DECODERS, DEFAULT_MAX_NEW_TOKENS, InferenceSettings
from m2sa_core.inference.stages import FrameEntry, SegmenterStages
from m2sa_core.inference.tracking import seg_prompt_embeddings, track_frame, TrackPrompts, TrackState
from m2sa_core.model.checkpoint import from_pretrained as load_checkpoint
from m2sa_core.model.checkpoint import save_pretrained as save_checkpoint
from m2sa_core.model.generation import SpecialIds
from m2sa_core.model.m2sa import M2SAModel
from m2sa_core.model.preprocess import ImageProcessor, validate_image
from m2sa_core.model.presets import build_preset, PRESETS
from m2sa_core.model.quantization import check_supported as check_quantization
from m2sa_core.model.quantization import quantize_language_model, resolve_decoder
from m2sa_core.prompt import build_prompt, sanitize_command, tokenize_prompt
from m2sa_core.types import Cancelled, Result
import numpy as np
import torch
from transformers import PreTrainedTokenizerBase

STAGES = ("encoding", "generating", "decoding")
# Model dtypes a user may name (the node's ``dtype`` parameter, ``m2sa-eval --dtype``, the benchmarks).
DTYPE_NAMES = ("float32", "bfloat16", "float16")


def default_dtype(device: torch.device) -> torch.dtype:
    """
    bf16 on CUDA: half the memory, what a 7B model needs; fp32 elsewhere.

    A small model can lose figures to bf16 rounding: in bf16 on a GPU an earlier tiny
    model answered 20 of 353 held-out questions other than in fp32, and only fp32 kept its
    figures (bench/RESULTS.md); pass ``dtype`` to choose.
    """
    return torch.bfloat16 if device.type == "cuda" else torch.float32


def dtype_from_name(name: str) -> torch.dtype | None:
    """Return a name of ``DTYPE_NAMES`` as a torch dtype; "auto" or "" is None, :func:`default_dtype` at load time."""
    if name in ("", "auto"):
        return None
    if name not in DTYPE_NAMES:
        raise ValueError(f"dtype {name!r}: must be one of {DTYPE_NAMES} or auto")
    return getattr(torch, name)


class _Setting:
    """A :class:`Segmenter` attribute that reads one field of its settings and, assigned, replaces them."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, segmenter: Segmenter | None, owner: type | None = None):
        return self if segmenter is None else getattr(segmenter.settings, self.name)

    def __set__(self, segmenter: Segmenter, value) -> None:
        segmenter.settings = replace(segmenter.settings, **{self.name: value})


class Segmenter:
    """Runs M2SA on RGB frames: ``segment(image, command) -> Result``."""

    def __init__(
        self,
        model: M2SAModel,
        tokenizer: PreTrainedTokenizerBase,
        processor: ImageProcessor | None = None,
        device: str | torch.device | None = None,
        dtype: torch.dtype | None = None,
        frame_cache_size: int = 4,
        max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
        mask_threshold: float = 0.0,
        decoder: str = "auto",
        amodal: bool = False,
        duplicate_iou: float | None = None,
    ) -> None:
        if decoder not in DECODERS:
            raise ValueError(f"decoder must be one of {DECODERS}, got {decoder!r}")
        if model.config.seg_token_id is None:
            raise ValueError("the model's config has no seg_token_id: it cannot produce masks")
        self.device = torch.device(device) if device is not None else model.device
        self.dtype = dtype or model.dtype
        self.seg_token_id = int(model.config.seg_token_id)
        self.eos_token_id = int(tokenizer.eos_token_id)
        self.pad_token_id = int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos_token_id)
        settings = InferenceSettings(
            device=self.device, dtype=self.dtype,
            special_ids=SpecialIds(eos=self.eos_token_id, pad=self.pad_token_id, seg=self.seg_token_id),
            decoder=("graph" if self.device.type == "cuda" else "dynamic") if decoder == "auto" else decoder,
            max_new_tokens=max_new_tokens, mask_threshold=mask_threshold, amodal=bool(amodal),
            # Merge instances named twice (m2sa_core/inference/duplicates.py); None: the model's setting.
            duplicate_iou=float(model.config.duplicate_instance_iou if duplicate_iou is None else duplicate_iou),
            lagged_stop=self.device.type == "cuda",
        )
        self.model = model.to(device=self.device, dtype=self.dtype).eval()
        self.tokenizer = tokenizer
        self.processor = processor or ImageProcessor(model.config)
        self.cache = FrameCache(frame_cache_size)
        # The stages of a call, for evaluation, benchmarks and tracking (see m2sa_core.inference.stages).
        self.stages = SegmenterStages(self.model, tokenizer, settings, self.processor, self.cache)

    # -- settings ---------------------------------------------------------------------
    @property
    def settings(self) -> InferenceSettings:
        """Return the settings every stage reads; assigning one (or a single setting below) replaces them whole."""
        return self.stages.settings

    @settings.setter
    def settings(self, settings: InferenceSettings) -> None:
        self.stages.settings = settings

    # One field of the settings each, read and assigned as plain attributes (the node sets two while active).
    max_new_tokens = _Setting()  # generated tokens per answer, at most
    mask_threshold = _Setting()  # mask logits above it are in a mask
    amodal = _Setting()  # fill Target.amodal_mask for every target
    duplicate_iou = _Setting()  # visible-mask IoU at which two instances are one named twice; 0 is off
    decoder = _Setting()  # resolved: dynamic, static or graph
    lagged_stop = _Setting()  # look at a step's EOS flags only after queuing the next step (CUDA)
    special_ids = _Setting()  # EOS, padding and [SEG] token ids

    # -- construction ---------------------------------------------------------------
    @classmethod
    def from_pretrained(
        cls,
        path_or_preset: str | Path,
        device: str | torch.device = "cpu",
        dtype: torch.dtype | None = None,
        frame_cache_size: int = 4,
        max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
        mask_threshold: float = 0.0,
        seed: int = 0,
        decoder: str = "auto",
        amodal: bool = False,
        quantization: str = "none",
        duplicate_iou: float | None = None,
    ) -> "Segmenter":
        """
        Load a checkpoint directory (our format) or build a preset with random weights.

        A preset name gives an untrained model (tests, benchmarks); ``tiny`` gets a
        tokenizer trained on a small built-in corpus. Default dtype: bf16 on CUDA, fp32 otherwise.

        ``quantization``: "none", "int8" or "int4" for the language model's linear layers
        (Llama body and ``lm_head``; CLIP, projector, SAM and phi stay in ``dtype``), see
        ``m2sa_core/model/quantization.py``: bitsandbytes LLM.int8() or NF4, as LISA, on
        CPU and CUDA. A quantized model is built or read in host memory and each layer is
        quantized on its way to ``device``, so the float language model never sits whole
        on the GPU; its decoder "auto" is "dynamic" (no CUDA graph; "graph" is refused).
        An unknown mode raises ValueError, a setting that cannot run (bitsandbytes
        missing, device other than CPU/CUDA, decoder "graph") ``UnsupportedQuantization``
        (a ValueError), both before any weight is read.

        ``duplicate_iou``: the visible-mask IoU at which two instances of one category are
        one instance named twice (:mod:`m2sa_core.inference.duplicates`); None takes the
        checkpoint's ``duplicate_instance_iou`` (0, off, for the authors' weights).
        """
        device = torch.device(device)
        dtype = default_dtype(device) if dtype is None else dtype
        check_quantization(quantization, device, dtype, decoder)
        staging = device if quantization == "none" else torch.device("cpu")
        path = Path(path_or_preset)
        if path.is_dir():
            model, tokenizer = load_checkpoint(path, device=staging, dtype=dtype)
        else:
            name = str(path_or_preset)
            if name not in PRESETS:
                raise ValueError(f"{name!r} is neither a checkpoint directory nor a preset ({sorted(PRESETS)})")
            model, tokenizer = build_preset(name, device=staging, dtype=dtype, seed=seed)
        return cls.from_model(model, tokenizer, device=device, dtype=dtype, quantization=quantization,
                              frame_cache_size=frame_cache_size, max_new_tokens=max_new_tokens,
                              mask_threshold=mask_threshold, decoder=decoder, amodal=amodal,
                              duplicate_iou=duplicate_iou)

    @classmethod
    def from_model(
        cls,
        model: M2SAModel,
        tokenizer: PreTrainedTokenizerBase,
        device: str | torch.device = "cpu",
        dtype: torch.dtype | None = None,
        quantization: str = "none",
        decoder: str = "auto",
        **kwargs,
    ) -> "Segmenter":
        """
        Wrap a model already in memory, quantizing its language model on the way to ``device``.

        :meth:`from_pretrained`'s last steps, for callers that hold the model themselves
        (a benchmark that draws a preset's weights once and copies them per mode). A
        quantized model should lie in host memory (see :meth:`from_pretrained`); it is
        changed in place. ``kwargs``: the other :class:`Segmenter` settings.
        """
        device = torch.device(device)
        dtype = default_dtype(device) if dtype is None else dtype
        check_quantization(quantization, device, dtype, decoder)
        quantize_language_model(model, quantization, device=device)
        return cls(model, tokenizer, device=device, dtype=dtype, decoder=resolve_decoder(quantization, decoder),
                   **kwargs)

    def save_pretrained(self, directory: str | Path) -> Path:
        """
        Write the model and tokenizer as a checkpoint directory :meth:`from_pretrained` loads.

        Our format (``config.json``, ``model.safetensors``, tokenizer files); the
        segmenter's own settings (cache size, token limit, threshold) are not saved.
        """
        return save_checkpoint(self.model, self.tokenizer, directory)

    # -- cache ------------------------------------------------------------------------
    @property
    def cache_stats(self) -> dict[str, int]:
        """Frame-feature cache counters: ``hits``, ``misses`` and ``size`` (frames held)."""
        return {"hits": self.cache.hits, "misses": self.cache.misses, "size": len(self.cache)}

    def clear_cache(self) -> None:
        """Forget every cached frame and reset the counters."""
        self.cache.clear()

    def prompt_ids(self, command: str) -> list[int]:
        """
        Token ids of the LLaVA v1 prompt for ``command`` (sanitised: no injected [SEG] or roles).

        The checkpoint's segmentation request (``config.seg_request``, the authors' text
        for real checkpoints) follows the command, as in the prompts it was trained on.
        """
        if not isinstance(command, str):
            raise TypeError(f"command must be a string, got {type(command).__name__}")
        text = sanitize_command(command)
        if not text:
            raise ValueError("command is empty")
        config = self.model.config
        return tokenize_prompt(self.tokenizer, build_prompt(text, config.use_im_start_end, config.seg_request))

    # -- public API -------------------------------------------------------------------
    def segment(
        self,
        image: np.ndarray,
        command: str,
        *,
        frame_key: Hashable | None = None,
        on_stage: Callable[[str], None] | None = None,
        on_text: Callable[[str], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
        amodal: bool | None = None,
        keep_prompts: bool = False,
    ) -> Result:
        """
        Answer ``command`` about ``image`` (RGB uint8 H x W x 3) with one mask per [SEG].

        ``on_stage`` hears "encoding", "generating", "decoding"; ``on_text`` the answer
        so far ([SEG] markers removed) after each token; ``should_stop`` is polled
        between stages and per token and raises :class:`Cancelled`. ``amodal``
        overrides the segmenter's setting for this call (fill ``Target.amodal_mask``).
        ``keep_prompts`` puts the command's [SEG] prompts in ``Result.prompts``, for
        :meth:`track` on later frames.
        """
        amodal = self.amodal if amodal is None else bool(amodal)
        validate_image(image)
        start = time.perf_counter()
        timings: dict[str, float] = {}

        def stage(name: str) -> None:
            if should_stop is not None and should_stop():
                raise Cancelled(f"cancelled before {name}")
            if on_stage is not None:
                on_stage(name)

        prompt = self.prompt_ids(command)
        stage("encoding")
        entry = self.stages.encode_frame(image, frame_key, timings)
        stage("generating")
        stream = None
        if on_text is not None:
            stream = lambda tokens: on_text(clean_answer(self.stages.decode_text(tokens)))  # noqa: E731
        (generation,) = self.stages.generate(entry.features, [prompt], timings, stream, should_stop)
        stage("decoding")
        decoded = self.stages.decode_masks(entry, generation.seg_states, timings, amodal)
        timings["total"] = (time.perf_counter() - start) * 1e3
        result = self.stages.build_result(generation, decoded, timings, amodal)
        if keep_prompts:
            result.prompts = self._track_prompts(result, generation.seg_states, command)
        return result

    def _track_prompts(self, result: Result, seg_states: list[torch.Tensor], command: str) -> TrackPrompts:
        """Return the prompts of the result's targets: the [SEG] states of merged instances left out."""
        embeddings = seg_prompt_embeddings(self.model, self.settings, [seg_states[i] for i in result.seg_indices])
        return TrackPrompts.from_result(result, embeddings, command)

    def track(
        self,
        image: np.ndarray,
        prompts: TrackPrompts,
        previous: TrackState | None = None,
        *,
        use_previous_mask: bool = False,
        frame_key: Hashable | None = None,
    ) -> tuple[Result, TrackState]:
        """
        Re-segment a command's targets on a new frame from its prompts, without the language model.

        One image encode (cached like any frame) and one mask-decoder pass. Pass the
        returned state back as ``previous`` for the next frame; with
        ``use_previous_mask`` its masks prompt SAM as well (see ``m2sa_core.inference.tracking``).
        """
        validate_image(image)
        return track_frame(self.stages, image, prompts, previous, use_previous_mask=use_previous_mask,
                           frame_key=frame_key)

    def segment_many(
        self,
        image: np.ndarray | Sequence[np.ndarray],
        commands: Sequence[str],
        frame_key: Hashable | Sequence[Hashable | None] | None = None,
        *,
        on_stage: Callable[[str], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
        amodal: bool | None = None,
        keep_prompts: bool | Sequence[bool] = False,
    ) -> list[Result]:
        """
        Several commands in one batched generation: on one frame, or each on its own frame.

        ``image`` is one frame (an array) for every command, or a list with one frame per
        command - several cameras' commands waiting together; ``frame_key`` is then None
        or a list of keys, one per command. Each distinct frame is encoded once (and
        cached); all prompts are generated greedily in one left-padded batch, which is
        where batching pays: a decode step of a few rows costs little more than a step of
        one. Every row gets the answer :meth:`segment` would give (up to float rounding
        of the padding). ``on_stage``, ``should_stop`` (raises :class:`Cancelled` for the
        whole batch), ``amodal`` and ``keep_prompts`` (one flag, or one per command) are
        as in :meth:`segment`; partial answers are not streamed.
        """
        images = [image] * len(commands) if isinstance(image, np.ndarray) else list(image)
        keys = [frame_key] * len(commands) if isinstance(image, np.ndarray) else \
            list(frame_key) if frame_key is not None else [None] * len(images)
        keep = [keep_prompts] * len(commands) if isinstance(keep_prompts, bool) else list(keep_prompts)
        if not len(images) == len(keys) == len(keep) == len(commands):
            raise ValueError(f"segment_many: {len(commands)} commands need as many frames ({len(images)}), "
                             f"frame keys ({len(keys)}) and keep_prompts flags ({len(keep)})")
        for frame in images:
            validate_image(frame)
        if not commands:
            return []
        amodal = self.amodal if amodal is None else bool(amodal)

        def stage(name: str) -> None:
            if should_stop is not None and should_stop():
                raise Cancelled(f"cancelled before {name}")
            if on_stage is not None:
                on_stage(name)

        start = time.perf_counter()
        timings: dict[str, float] = {}
        prompts = [self.prompt_ids(c) for c in commands]
        stage("encoding")
        entries: dict[int, FrameEntry] = {}  # one encode per distinct frame object
        rows = []
        for frame, key in zip(images, keys):
            if id(frame) not in entries:
                entries[id(frame)] = self.stages.encode_frame(frame, key, timings)
            rows.append(entries[id(frame)])
        stage("generating")
        generations = self.stages.generate([e.features for e in rows], prompts, timings, should_stop=should_stop)
        stage("decoding")
        results = []
        for entry, generation, command, keep_row in zip(rows, generations, commands, keep):
            own = dict(timings)
            decoded = self.stages.decode_masks(entry, generation.seg_states, own, amodal)
            result = self.stages.build_result(generation, decoded, own, amodal)
            if keep_row:
                result.prompts = self._track_prompts(result, generation.seg_states, command)
            results.append(result)
        total = (time.perf_counter() - start) * 1e3
        for r in results:
            r.timings_ms["total"] = total
        return results
