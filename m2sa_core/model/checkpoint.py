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
Saving and loading M2SA weights: our format, LLaVA v1 + SAM, and the authors' layout.

Every loader does strict key accounting: each tensor of a checkpoint is either mapped
onto a parameter, deliberately ignored for a stated reason (rotary caches, CLIP's text
tower), or reported; missing and unexpected keys raise :class:`KeyMismatchError`
listing them unless ``strict=False`` (the authors load SAM with ``strict=False``, which
silently leaves new layers random: we never do that silently). Pickle files are read
with ``torch.load(weights_only=True)``, so a checkpoint that would execute code is
refused.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
import json
from pathlib import Path
import pickle
import re

from m2sa_core.model.config import CONFIG_NAME, M2SAConfig
from m2sa_core.model.llama_tokenizer import load_tokenizer as _load_tokenizer
from m2sa_core.model.llama_tokenizer import save_tokenizer, TokenizerLoadError
from m2sa_core.model.m2sa import M2SAModel
from m2sa_core.model.presets import attach_tokenizer, get_preset
from m2sa_core.model.trainable import add_lora
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
import torch
from transformers import PreTrainedTokenizerBase

WEIGHTS_NAME = "model.safetensors"
_WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)
# Buffers some checkpoints carry that our modules recompute: ignored, with the reason.
_IGNORABLE = (
    (re.compile(r"rotary_emb\.inv_freq$"), "rotary cache, recomputed"),
    (re.compile(r"embeddings\.position_ids$"), "CLIP position ids, recomputed"),
)


class CheckpointError(RuntimeError):
    """A checkpoint could not be read or does not fit the model."""


class KeyMismatchError(CheckpointError):
    """Missing, unexpected or mis-shaped tensors (strict loading)."""

    def __init__(self, source: str, report: "LoadReport") -> None:
        self.report = report
        super().__init__(f"{source}: checkpoint does not match the model.\n{report.problems()}")


@dataclass
class LoadReport:
    """What happened to every tensor of a checkpoint."""

    mapped: list[str] = field(default_factory=list)  # model keys that received a tensor
    ignored: dict[str, str] = field(default_factory=dict)  # checkpoint key -> reason
    missing: list[str] = field(default_factory=list)  # model keys nobody filled
    unexpected: list[str] = field(default_factory=list)  # checkpoint keys with no home
    shape_mismatch: list[str] = field(default_factory=list)
    initialised: list[str] = field(default_factory=list)  # new layers left at their init, by design
    resized: list[str] = field(default_factory=list)  # vocab rows added to embeddings

    def problems(self) -> str:
        lines = []
        for title, keys in (
            ("missing", self.missing),
            ("unexpected", self.unexpected),
            ("shape mismatch", self.shape_mismatch),
        ):
            if keys:
                lines.append(f"  {title} ({len(keys)}): " + ", ".join(keys[:50]) + (" ..." if len(keys) > 50 else ""))
        return "\n".join(lines)

    @property
    def ok(self) -> bool:
        return not (self.missing or self.unexpected or self.shape_mismatch)

    def merge(self, other: "LoadReport") -> "LoadReport":
        for name in ("mapped", "missing", "unexpected", "shape_mismatch", "initialised", "resized"):
            getattr(self, name).extend(getattr(other, name))
        self.ignored.update(other.ignored)
        return self


# -- reading tensor files --------------------------------------------------------------------
def load_tensor_file(path: str | Path) -> dict[str, torch.Tensor]:
    """
    Read a safetensors file or a pickle (.pth/.bin/.pt) of tensors, safely.

    :raises CheckpointError: the file is missing, unreadable, would execute code when
        unpickled, or holds something other than a (possibly nested) tensor dict.
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint file not found: {path}")
    if path.suffix == ".safetensors":
        try:
            return load_file(str(path))
        except SafetensorError as err:  # truncated or not a safetensors file at all
            raise CheckpointError(f"{path} is not a readable safetensors file ({err})") from err
    try:
        obj = torch.load(str(path), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        raise CheckpointError(
            f"refusing to load {path}: it is a pickle holding objects other than tensors, which could "
            f"execute code on load (torch.load weights_only=True rejected it: {str(err).splitlines()[0]})"
        ) from err
    except Exception as err:  # corrupt zip, truncated file, ...
        raise CheckpointError(f"cannot read checkpoint {path}: {err}") from err
    for wrapper in ("state_dict", "model", "module"):
        if isinstance(obj, dict) and isinstance(obj.get(wrapper), dict) and len(obj) <= 3:
            obj = obj[wrapper]
    if not isinstance(obj, dict) or not all(isinstance(v, torch.Tensor) for v in obj.values()):
        raise CheckpointError(f"{path} does not hold a flat dict of tensors")
    return obj


def load_weights_dir(directory: str | Path) -> dict[str, torch.Tensor]:
    """All tensors of a (possibly sharded) Hugging Face style weights directory or a single file."""
    directory = Path(directory)
    if directory.is_file():
        return load_tensor_file(directory)
    for name in _WEIGHT_FILES:
        path = directory / name
        if not path.is_file():
            continue
        if name.endswith(".index.json"):
            index = json.loads(path.read_text())
            shards = sorted(set(index.get("weight_map", {}).values()))
            if not shards:
                raise CheckpointError(f"{path} lists no shards")
            state: dict[str, torch.Tensor] = {}
            for shard in shards:
                state.update(load_tensor_file(directory / shard))
            return state
        return load_tensor_file(path)
    raise CheckpointError(f"no weights in {directory} (looked for {', '.join(_WEIGHT_FILES)})")


# -- strict loading --------------------------------------------------------------------------
def load_mapped_state(
    model: torch.nn.Module,
    state: dict[str, torch.Tensor],
    key_map: Callable[[str], str | None],
    *,
    expected_prefixes: Iterable[str] | None = None,
    allowed_missing_prefixes: Iterable[str] = (),
    source: str = "checkpoint",
    strict: bool = True,
    resize_vocab: bool = False,
) -> LoadReport:
    """
    Copy ``state`` into ``model`` through ``key_map`` with full accounting.

    :param key_map: checkpoint key -> model key, or None for "not ours" (unexpected).
    :param expected_prefixes: the model keys this checkpoint is meant to fill (others are
        not "missing"); None means all of the model.
    :param allowed_missing_prefixes: model keys that may stay at their initialisation
        (new layers), recorded as ``initialised``.
    :param resize_vocab: accept embedding/lm_head tensors with fewer rows than the model
        (new tokens); the extra rows get the mean of the loaded rows.
    """
    report = LoadReport()
    own = model.state_dict()
    prefixes = tuple(expected_prefixes) if expected_prefixes is not None else ("",)
    allowed = tuple(allowed_missing_prefixes)
    filled: dict[str, torch.Tensor] = {}
    for key, tensor in state.items():
        reason = next((why for pattern, why in _IGNORABLE if pattern.search(key)), None)
        if reason:
            report.ignored[key] = reason
            continue
        target = key_map(key)
        if target is None or target not in own:
            report.unexpected.append(key)
            continue
        want = own[target].shape
        if tensor.shape != want:
            vocab = target.endswith(("embed_tokens.weight", "lm_head.weight"))
            if resize_vocab and vocab and tensor.ndim == 2 and tensor.shape[1] == want[1] and tensor.shape[0] < want[0]:
                grown = tensor.new_empty(want)
                grown[: tensor.shape[0]] = tensor
                grown[tensor.shape[0]:] = tensor.float().mean(0).to(tensor.dtype)
                tensor = grown
                report.resized.append(target)
            else:
                report.shape_mismatch.append(f"{key} {tuple(tensor.shape)} -> {target} {tuple(want)}")
                continue
        filled[target] = tensor
    for key in own:
        if key in filled or not key.startswith(prefixes):
            continue
        (report.initialised if key.startswith(allowed) else report.missing).append(key)
    report.mapped = sorted(filled)
    if strict and not report.ok:
        raise KeyMismatchError(source, report)
    with torch.no_grad():
        for key, tensor in filled.items():
            own[key].copy_(tensor)
    return report


# Layers no published checkpoint has (the authors' layout, LLaVA + SAM): left at their
# init and listed in ``report.initialised``.
NEW_HEAD_PREFIXES = ("mask_type_head.",)


# -- our format ----------------------------------------------------------------------------
def save_pretrained(model: M2SAModel, tokenizer: PreTrainedTokenizerBase, directory: str | Path) -> Path:
    """Write config.json, model.safetensors and the tokenizer files to ``directory``."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    model.config.save(directory)
    state = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}
    save_file(state, str(directory / WEIGHTS_NAME), metadata={"format": "pt", "m2sa_preset": model.config.name})
    save_tokenizer(tokenizer, directory)
    return directory


def load_tokenizer(path: str | Path) -> PreTrainedTokenizerBase:
    """Return a tokenizer from local files only (never the hub); Llama ones tokenize as the authors' stack."""
    try:
        return _load_tokenizer(path)
    except TokenizerLoadError as err:
        raise CheckpointError(str(err)) from err


def from_pretrained(
    directory: str | Path,
    device: str | torch.device = "cpu",
    dtype: torch.dtype | None = None,
    strict: bool = True,
) -> tuple[M2SAModel, PreTrainedTokenizerBase]:
    """Load a model saved by :func:`save_pretrained` (our format)."""
    directory = Path(directory)
    if not (directory / CONFIG_NAME).is_file():
        raise CheckpointError(f"{directory} is not an M2SA checkpoint (no {CONFIG_NAME})")
    config = M2SAConfig.load(directory)
    tokenizer = load_tokenizer(directory)
    if config.seg_token_id is not None and tokenizer.convert_tokens_to_ids("[SEG]") != config.seg_token_id:
        raise CheckpointError(f"{directory}: tokenizer's [SEG] id differs from config.seg_token_id")
    lora = config.lora
    config.lora = None
    model = M2SAModel.build(config, device=device, dtype=dtype)
    if lora is not None:
        add_lora(model, lora)
    state = load_weights_dir(directory)
    # Checkpoints saved before the mask-type head existed lack it; its zero init reads
    # "modal", so they behave as they did (visible masks), and it is reported, not silent.
    load_mapped_state(
        model, state, lambda k: k, allowed_missing_prefixes=NEW_HEAD_PREFIXES, source=str(directory), strict=strict
    )
    model.eval()
    return model, tokenizer


# -- the authors' M2SA layout ---------------------------------------------------------------
def authors_key(key: str) -> str | None:
    """Map a key of the authors' M2SA checkpoint (LISA lineage) to ours."""
    rules = (
        ("model.visual_model.mask_decoder.compress_vit.", "fusion."),
        ("model.visual_model.", "sam."),
        ("model.text_hidden_fcs.0.", "seg_projector."),
        ("model.mm_projector.", "mm_projector."),
        ("model.layers.", "llm.model.layers."),
        ("model.embed_tokens.", "llm.model.embed_tokens."),
        ("model.norm.", "llm.model.norm."),
        ("lm_head.", "llm.lm_head."),
    )
    if key.startswith("model.vision_tower."):
        return clip_key(key)
    for old, new in rules:
        if key.startswith(old):
            return new + key[len(old):]
    return None


_CLIP_VISION_ROOTS = ("embeddings.", "pre_layrnorm.", "encoder.", "post_layernorm.")


def clip_key(key: str) -> str | None:
    """
    Map a CLIP checkpoint key to ours; None for anything outside the vision tower.

    Accepts OpenAI/HF ``CLIPModel`` and older ``CLIPVisionModel`` files
    (``vision_model.*``), LLaVA's embedded tower (``model.vision_tower.vision_tower.
    vision_model.*``) and current transformers' ``CLIPVisionModel`` (bare keys).
    """
    for wrapper in ("model.vision_tower.vision_tower.", "vision_tower.", ""):
        if key.startswith(wrapper + "vision_model."):
            key = key[len(wrapper + "vision_model."):]
            break
    if key.startswith(_CLIP_VISION_ROOTS):
        return "vision_tower." + key
    return None


def load_clip_tower(model: M2SAModel, clip_path: str | Path, strict: bool = True) -> LoadReport:
    """Fill ``model.vision_tower`` from a local CLIP checkpoint; CLIP's text tower is ignored."""
    state = load_weights_dir(clip_path)
    vision = {k: v for k, v in state.items() if clip_key(k) is not None}
    report = load_mapped_state(
        model, vision, clip_key, expected_prefixes=("vision_tower.",), source=str(clip_path), strict=strict
    )
    for key in state:
        if key not in vision:
            report.ignored[key] = "not part of CLIP's vision tower"
    return report


def _config_for(config: M2SAConfig | str) -> M2SAConfig:
    return get_preset(config) if isinstance(config, str) else config


def _attach_tokenizer(config: M2SAConfig, tokenizer: PreTrainedTokenizerBase, vocab_rows: int | None) -> None:
    attach_tokenizer(config, tokenizer)
    if vocab_rows is not None and vocab_rows != len(tokenizer):
        raise CheckpointError(
            f"the checkpoint's embeddings have {vocab_rows} rows but the tokenizer has {len(tokenizer)} tokens "
            f"after adding [SEG]{' and the image start/end tokens' if config.use_im_start_end else ''}"
        )


def import_authors_checkpoint(
    checkpoint: str | Path,
    clip_path: str | Path,
    config: M2SAConfig | str = "7b",
    tokenizer_path: str | Path | None = None,
    device: str | torch.device = "cpu",
    dtype: torch.dtype | None = None,
    strict: bool = True,
) -> tuple[M2SAModel, PreTrainedTokenizerBase, LoadReport]:
    """
    Assemble a model from a checkpoint exported by the authors' M2SA code.

    ``checkpoint`` is a directory (sharded or not) or a single weights file in their
    layout (``model.visual_model.*``, ``model.text_hidden_fcs.0.*``, ``model.layers.*``,
    ...); the CLIP tower is not inside and comes from ``clip_path``. The tokenizer is
    read from ``tokenizer_path`` (default: the checkpoint directory).
    """
    config = _config_for(config)
    state = load_weights_dir(checkpoint)
    tok_dir = Path(tokenizer_path) if tokenizer_path else Path(checkpoint)
    tokenizer = load_tokenizer(tok_dir if tok_dir.is_dir() else tok_dir.parent)
    rows = state.get("model.embed_tokens.weight")
    _attach_tokenizer(config, tokenizer, None if rows is None else int(rows.shape[0]))
    model = M2SAModel.build(config, device=device, dtype=dtype)
    own_prefixes = ("llm.", "mm_projector.", "sam.", "fusion.", "seg_projector.") + NEW_HEAD_PREFIXES
    has_tower = any(k.startswith("model.vision_tower.") for k in state)
    report = load_mapped_state(
        model,
        state,
        authors_key,
        expected_prefixes=own_prefixes + (("vision_tower.",) if has_tower else ()),
        allowed_missing_prefixes=NEW_HEAD_PREFIXES,
        source=str(checkpoint),
        strict=strict,
    )
    if not has_tower:
        report.merge(load_clip_tower(model, clip_path, strict=strict))
    model.eval()
    return model, tokenizer, report


# -- LLaVA v1 + SAM -------------------------------------------------------------------------
def llava_key(key: str) -> str | None:
    """Map a key of an original LLaVA v1 checkpoint (HF Llama + ``mm_projector``) to ours."""
    if key.startswith("model.mm_projector."):
        return "mm_projector." + key[len("model.mm_projector."):]
    if key.startswith("model.vision_tower."):
        return clip_key(key)
    if key.startswith("model."):
        return "llm." + key
    if key.startswith("lm_head."):
        return "llm." + key
    return None


def import_llava_sam(
    llava_dir: str | Path,
    sam_checkpoint: str | Path,
    clip_path: str | Path | None = None,
    config: M2SAConfig | str = "7b",
    device: str | torch.device = "cpu",
    dtype: torch.dtype | None = None,
    strict: bool = True,
) -> tuple[M2SAModel, PreTrainedTokenizerBase, LoadReport]:
    """
    Assemble an untrained M2SA from LLaVA v1 weights and a SAM ``.pth``: the starting point of training.

    The fusion convolutions, phi and the mask-type head are new layers and stay at their initialisation
    (listed in ``report.initialised``); the new token rows ([SEG], image start/end)
    are initialised to the mean embedding (``report.resized``). ``clip_path`` is
    needed unless the LLaVA directory carries its vision tower.
    """
    config = _config_for(config)
    llava_dir = Path(llava_dir)
    state = load_weights_dir(llava_dir)
    tokenizer = load_tokenizer(llava_dir)
    _attach_tokenizer(config, tokenizer, None)
    model = M2SAModel.build(config, device=device, dtype=dtype)
    has_tower = any(k.startswith("model.vision_tower.") for k in state)
    if not has_tower and clip_path is None:
        raise CheckpointError(f"{llava_dir} has no vision tower weights: pass clip_path")
    report = load_mapped_state(
        model,
        state,
        llava_key,
        expected_prefixes=("llm.", "mm_projector.") + (("vision_tower.",) if has_tower else ()),
        source=str(llava_dir),
        strict=strict,
        resize_vocab=True,
    )
    sam_state = load_tensor_file(sam_checkpoint)
    report.merge(
        load_mapped_state(
            model,
            sam_state,
            lambda k: "sam." + k,
            expected_prefixes=("sam.", "fusion.", "seg_projector.") + NEW_HEAD_PREFIXES,
            allowed_missing_prefixes=("fusion.", "seg_projector.") + NEW_HEAD_PREFIXES,
            source=str(sam_checkpoint),
            strict=strict,
        )
    )
    if not has_tower:
        report.merge(load_clip_tower(model, clip_path, strict=strict))
    model.eval()
    return model, tokenizer, report
