"""Command -> Result on one frame, with a per-frame feature cache.

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

import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from transformers import PreTrainedTokenizerBase

from m2sa_core.answer import ParsedTarget, clean_answer, parse_targets
from m2sa_core.model.checkpoint import from_pretrained as load_checkpoint
from m2sa_core.model.decoding import DynamicDecoder, StaticDecoder, static_length
from m2sa_core.model.greedy import Generation, SpecialIds, greedy_generate
from m2sa_core.model.m2sa import FrameFeatures, M2SAModel
from m2sa_core.model.preprocess import ImageProcessor, validate_image
from m2sa_core.model.presets import PRESETS, get_preset
from m2sa_core.model.tokenizer import build_tiny_tokenizer
from m2sa_core.tracking import TrackPrompts, TrackState, seg_prompt_embeddings, track_frame
from m2sa_core.prompt import build_prompt, sanitize_command, tokenize_prompt
from m2sa_core.types import Cancelled, Granularity, MaskType, Result, Target

__all__ = ["Cancelled", "DecodedMasks", "FrameEntry", "Segmenter"]  # Cancelled: the node imports it from here

STAGES = ("encoding", "generating", "decoding")
# dynamic: transformers' DynamicCache; static: static KV cache; graph: static + the decode step
# replayed as a CUDA graph (CUDA only); auto: graph on CUDA, dynamic elsewhere. All give the same tokens
# (up to bf16 rounding on GPU).
DECODERS = ("auto", "dynamic", "static", "graph")
# MMR answers name up to 16 targets with long PACO names ("mouse_(computer_equipment)_1's
# left_button [SEG]" is ~20 tokens): 64 tokens lost trailing [SEG]s. See docs/FIDELITY.md, item 7.
DEFAULT_MAX_NEW_TOKENS = 256


@dataclass
class FrameEntry:
    """Cached, command-independent features of one frame."""

    features: FrameFeatures
    fused: torch.Tensor  # [1, P, h, w] image embedding + early fusion
    resize_size: tuple[int, int]
    original_size: tuple[int, int]


@dataclass
class DecodedMasks:
    """Masks of one answer at the original image size, one row per [SEG]."""

    masks: np.ndarray  # bool [n, H, W] visible masks
    scores: np.ndarray  # [n] IoU predictions of the visible masks, 0..1
    mask_types: list[MaskType]  # per target: what the command asked for
    amodal_masks: np.ndarray | None = None  # bool [n, H, W], when computed
    amodal_scores: np.ndarray | None = None  # [n]


class FrameCache:
    """LRU of :class:`FrameEntry` with hit/miss counters; capacity 0 disables it."""

    def __init__(self, capacity: int) -> None:
        if capacity < 0:
            raise ValueError(f"frame_cache_size must be >= 0, got {capacity}")
        self.capacity = capacity
        self._entries: OrderedDict[Hashable, FrameEntry] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable) -> FrameEntry | None:
        entry = self._entries.get(key)
        if entry is None:
            self.misses += 1
            return None
        self.hits += 1
        self._entries.move_to_end(key)
        return entry

    def put(self, key: Hashable, entry: FrameEntry) -> None:
        if self.capacity == 0:
            return
        self._entries[key] = entry
        self._entries.move_to_end(key)
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)

    def clear(self) -> None:
        self._entries.clear()
        self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)


def image_key(image: np.ndarray) -> str:
    """Content hash of a frame (used when the caller gives no frame key)."""
    digest = hashlib.blake2b(image.tobytes(), digest_size=16)
    digest.update(repr(image.shape).encode())
    return digest.hexdigest()


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


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
    ) -> None:
        if decoder not in DECODERS:
            raise ValueError(f"decoder must be one of {DECODERS}, got {decoder!r}")
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        if model.config.seg_token_id is None:
            raise ValueError("the model's config has no seg_token_id: it cannot produce masks")
        self.device = torch.device(device) if device is not None else model.device
        self.dtype = dtype or model.dtype
        self.model = model.to(device=self.device, dtype=self.dtype).eval()
        self.tokenizer = tokenizer
        self.processor = processor or ImageProcessor(model.config)
        self.cache = FrameCache(frame_cache_size)
        self.max_new_tokens = max_new_tokens
        self.mask_threshold = mask_threshold
        self.amodal = bool(amodal)  # fill Target.amodal_mask for every target
        self.decoder = ("graph" if self.device.type == "cuda" else "dynamic") if decoder == "auto" else decoder
        self._decoders: OrderedDict[tuple[int, int], StaticDecoder] = OrderedDict()
        self.seg_token_id = int(model.config.seg_token_id)
        self.eos_token_id = int(tokenizer.eos_token_id)
        self.pad_token_id = int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos_token_id)
        self.special_ids = SpecialIds(eos=self.eos_token_id, pad=self.pad_token_id, seg=self.seg_token_id)
        # Look at a step's EOS flags only after queuing the next step: keeps a GPU busy, wastes one step
        self.lagged_stop = self.device.type == "cuda"

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
    ) -> "Segmenter":
        """Load a checkpoint directory (our format) or build a preset with random weights.

        A preset name gives an untrained model (tests, benchmarks); ``tiny`` gets a
        tokenizer trained on a small built-in corpus. Default dtype: bf16 on CUDA, fp32 otherwise.
        """
        device = torch.device(device)
        if dtype is None:
            dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
        kwargs = dict(frame_cache_size=frame_cache_size, max_new_tokens=max_new_tokens, mask_threshold=mask_threshold,
                      decoder=decoder, amodal=amodal)
        path = Path(path_or_preset)
        if path.is_dir():
            model, tokenizer = load_checkpoint(path, device=device, dtype=dtype)
            return cls(model, tokenizer, device=device, dtype=dtype, **kwargs)
        name = str(path_or_preset)
        if name not in PRESETS:
            raise ValueError(f"{name!r} is neither a checkpoint directory nor a preset ({sorted(PRESETS)})")
        config = get_preset(name)
        tokenizer = build_tiny_tokenizer(use_im_start_end=config.use_im_start_end) if name == "tiny" else None
        if tokenizer is None:
            tokenizer = _placeholder_llama_tokenizer(config.vocab_size, config.use_im_start_end)
        ids = {"seg_token_id": tokenizer.convert_tokens_to_ids("[SEG]")}
        if config.use_im_start_end:
            ids.update(im_start_token_id=tokenizer.convert_tokens_to_ids("<im_start>"),
                       im_end_token_id=tokenizer.convert_tokens_to_ids("<im_end>"))
        for name, value in ids.items():
            setattr(config, name, value)
        config.text_config["vocab_size"] = max(len(tokenizer), config.vocab_size)
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            torch.manual_seed(seed)
            model = M2SAModel.build(config, device=device, dtype=dtype)
        return cls(model, tokenizer, device=device, dtype=dtype, **kwargs)

    # -- cache ------------------------------------------------------------------------
    @property
    def cache_stats(self) -> dict[str, int]:
        return {"hits": self.cache.hits, "misses": self.cache.misses, "size": len(self.cache)}

    def clear_cache(self) -> None:
        self.cache.clear()

    # -- stages -----------------------------------------------------------------------
    @torch.inference_mode()
    def encode_frame(self, image: np.ndarray, frame_key: Hashable | None, timings: dict[str, float]) -> FrameEntry:
        """Features of ``image`` from the cache or freshly computed (and cached)."""
        key = frame_key if frame_key is not None else image_key(image)
        entry = self.cache.get(key)
        if entry is not None:
            timings.update(sam_encode=0.0, clip_encode=0.0)
            return entry
        inputs = self.processor(image)
        t0 = time.perf_counter()
        emb, early = self.model.encode_sam(inputs["sam_image"][None].to(self.device))
        fused = self.model.fuse(emb, early)
        _sync(self.device)
        t1 = time.perf_counter()
        clip = self.model.encode_clip(inputs["clip_image"][None].to(self.device))
        _sync(self.device)
        t2 = time.perf_counter()
        timings.update(sam_encode=(t1 - t0) * 1e3, clip_encode=(t2 - t1) * 1e3)
        entry = FrameEntry(FrameFeatures(emb, early, clip), fused, inputs["resize_size"], inputs["original_size"])
        self.cache.put(key, entry)
        return entry

    def static_decoder(self, batch: int, prompt_length: int) -> StaticDecoder:
        """A reusable static-cache decoder for this shape (LRU of a few; graphs captured once each)."""
        key = (batch, static_length(prompt_length, self.max_new_tokens))
        decoder = self._decoders.pop(key, None)
        if decoder is None:
            use_graph = self.decoder == "graph" and self.device.type == "cuda"
            decoder = StaticDecoder(self.model.llm, batch, key[1], cuda_graph=use_graph)
        self._decoders[key] = decoder
        while len(self._decoders) > 4:
            self._decoders.popitem(last=False)
        return decoder

    def prompt_ids(self, command: str) -> list[int]:
        """Token ids of the LLaVA v1 prompt for ``command`` (sanitised: no injected [SEG] or roles).

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

    @torch.inference_mode()
    def generate(
        self,
        features: FrameFeatures,
        prompts: Sequence[list[int]],
        timings: dict[str, float],
        on_tokens: Callable[[list[int]], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
        forced: Sequence[Sequence[int]] | None = None,
    ) -> list[Generation]:
        """Greedy decoding of all ``prompts`` on one frame in one left-padded batch (see ``greedy_generate``)."""
        if forced is not None and len(forced) != len(prompts):
            raise ValueError(f"forced answers ({len(forced)}) must match prompts ({len(prompts)})")
        model = self.model
        rows = [model.merge_image_embeddings(torch.tensor([p], device=self.device), features.clip_embeds)[0][0]
                for p in prompts]
        batch, length = len(rows), max(r.shape[0] for r in rows)
        embeds = rows[0].new_zeros((batch, length, rows[0].shape[-1]))
        attention = torch.zeros((batch, length), dtype=torch.long, device=self.device)
        for b, row in enumerate(rows):
            embeds[b, length - row.shape[0]:] = row
            attention[b, length - row.shape[0]:] = 1
        stepper = DynamicDecoder(model.llm) if self.decoder == "dynamic" else self.static_decoder(batch, length)
        t0 = time.perf_counter()
        prefilled = stepper.prefill(embeds, attention)
        _sync(self.device)
        t1 = time.perf_counter()
        outputs, steps = greedy_generate(stepper, prefilled, self.max_new_tokens, self.special_ids,
                                         lagged=self.lagged_stop, on_tokens=on_tokens, should_stop=should_stop,
                                         forced=forced)
        _sync(self.device)
        t2 = time.perf_counter()
        timings.update(prefill=(t1 - t0) * 1e3, decode=(t2 - t1) * 1e3,
                       decode_per_token=(t2 - t1) * 1e3 / max(steps, 1))
        return outputs

    @torch.inference_mode()
    def decode(
        self, entry: FrameEntry, seg_states: list[torch.Tensor], timings: dict[str, float], amodal: bool = False
    ) -> DecodedMasks:
        """Visible masks, mask types and (when ``amodal`` or a target asks for it) amodal masks.

        Amodal masks are upscaled only when needed: the low-res pair comes from one decoder
        pass either way, the full-size upscale is the part worth skipping.
        """
        height, width = entry.original_size
        if not seg_states:
            empty = np.zeros((0, height, width), dtype=bool)
            none = np.zeros((0,), dtype=np.float32)
            return DecodedMasks(empty, none, [], empty if amodal else None, none if amodal else None)
        t0 = time.perf_counter()
        states = torch.stack(seg_states)
        low_res, iou = self.model.decode_mask_pair(entry.fused, states)
        type_logits = self.model.mask_type_logits(states).float()
        mask_types = [MaskType.from_logits(m, a) for m, a in type_logits.tolist()]
        _sync(self.device)
        t1 = time.perf_counter()
        with_amodal = amodal or MaskType.AMODAL in mask_types
        channels = low_res if with_amodal else low_res[:, :1]
        n, k = channels.shape[:2]
        logits = self.model.upscale_masks(channels.flatten(0, 1)[:, None], entry.resize_size, entry.original_size)
        masks = (logits > self.mask_threshold).unflatten(0, (n, k)).cpu().numpy()
        scores = iou.float().clamp(0.0, 1.0).cpu().numpy()
        t2 = time.perf_counter()
        timings["mask_decode"] = timings.get("mask_decode", 0.0) + (t1 - t0) * 1e3
        timings["postprocess"] = timings.get("postprocess", 0.0) + (t2 - t1) * 1e3
        return DecodedMasks(
            masks=masks[:, 0], scores=scores[:, 0], mask_types=mask_types,
            amodal_masks=masks[:, 1] if with_amodal else None, amodal_scores=scores[:, 1] if with_amodal else None,
        )

    def masks_for(
        self, entry: FrameEntry, seg_states: list[torch.Tensor], timings: dict[str, float]
    ) -> tuple[np.ndarray, np.ndarray]:
        """Visible bool masks [n, H, W] at the original size and scores [n] for one answer."""
        decoded = self.decode(entry, seg_states, timings)
        return decoded.masks, decoded.scores

    def decode_text(self, tokens: list[int]) -> str:
        """Generated text with [SEG] kept (other special tokens dropped)."""
        return self.tokenizer.decode(tokens, skip_special_tokens=True, clean_up_tokenization_spaces=False).strip()

    def build_result(self, generation: Generation, decoded: DecodedMasks, timings: dict[str, float],
                     amodal: bool = False) -> Result:
        """Targets labelled from the answer text: ``mask`` visible, ``amodal_mask`` when asked for or ``amodal``."""
        raw = self.decode_text(generation.tokens)
        parsed = parse_targets(raw)
        n = len(generation.seg_states)
        # The tokens are the truth; text round trips should agree, but never drop a mask.
        parsed = (parsed + [ParsedTarget(f"target_{i + 1}", f"target_{i + 1}", 0, "", Granularity.OBJECT)
                            for i in range(len(parsed), n)])[:n]
        targets = []
        for i, p in enumerate(parsed):
            complete = decoded.mask_types[i] == MaskType.AMODAL
            with_amodal = (amodal or complete) and decoded.amodal_masks is not None
            targets.append(Target(
                label=p.label, object_name=p.object_name, instance=p.instance, part_name=p.part_name,
                granularity=p.granularity, mask=decoded.masks[i], score=float(decoded.scores[i]),
                amodal_mask=decoded.amodal_masks[i] if with_amodal else None,
                amodal_score=float(decoded.amodal_scores[i]) if with_amodal else 0.0,
                mask_type=decoded.mask_types[i]))
        return Result(answer=clean_answer(raw), targets=targets, raw_answer=raw, timings_ms=timings,
                      truncated=not generation.finished)

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
        """Answer ``command`` about ``image`` (RGB uint8 H x W x 3) with one mask per [SEG].

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
        entry = self.encode_frame(image, frame_key, timings)
        stage("generating")
        stream = None
        if on_text is not None:
            stream = lambda tokens: on_text(clean_answer(self.decode_text(tokens)))  # noqa: E731
        (generation,) = self.generate(entry.features, [prompt], timings, stream, should_stop)
        stage("decoding")
        decoded = self.decode(entry, generation.seg_states, timings, amodal)
        timings["total"] = (time.perf_counter() - start) * 1e3
        result = self.build_result(generation, decoded, timings, amodal)
        if keep_prompts:
            embeddings = seg_prompt_embeddings(self, generation.seg_states)
            result.prompts = TrackPrompts.from_result(result, embeddings, command)
        return result

    def track(
        self,
        image: np.ndarray,
        prompts: TrackPrompts,
        previous: TrackState | None = None,
        *,
        use_previous_mask: bool = False,
        frame_key: Hashable | None = None,
    ) -> tuple[Result, TrackState]:
        """Re-segment a command's targets on a new frame from its prompts, without the language model.

        One image encode (cached like any frame) and one mask-decoder pass. Pass the
        returned state back as ``previous`` for the next frame; with
        ``use_previous_mask`` its masks prompt SAM as well (see ``m2sa_core.tracking``).
        """
        validate_image(image)
        return track_frame(self, image, prompts, previous, use_previous_mask=use_previous_mask,
                           frame_key=frame_key)

    def segment_many(self, image: np.ndarray, commands: Sequence[str], frame_key: Hashable | None = None
                     ) -> list[Result]:
        """Several commands on one frame: one feature pass, one batched generation."""
        validate_image(image)
        if not commands:
            return []
        start = time.perf_counter()
        timings: dict[str, float] = {}
        prompts = [self.prompt_ids(c) for c in commands]
        entry = self.encode_frame(image, frame_key, timings)
        generations = self.generate(entry.features, prompts, timings)
        results = []
        for generation in generations:
            own = dict(timings)
            decoded = self.decode(entry, generation.seg_states, own, self.amodal)
            results.append(self.build_result(generation, decoded, own, self.amodal))
        total = (time.perf_counter() - start) * 1e3
        for r in results:
            r.timings_ms["total"] = total
        return results


def _placeholder_llama_tokenizer(vocab_size: int, use_im_start_end: bool) -> PreTrainedTokenizerBase:
    """A byte-level tokenizer whose ids fit a 7b/13b preset built with random weights.

    Random-weight presets exist for benchmarks: their text is noise, so any tokenizer
    with [SEG] inside the vocabulary will do; real checkpoints bring their own.
    """
    tok = build_tiny_tokenizer(use_im_start_end=use_im_start_end)
    if len(tok) > vocab_size:
        raise ValueError(f"placeholder tokenizer ({len(tok)}) larger than the preset vocabulary ({vocab_size})")
    return tok
