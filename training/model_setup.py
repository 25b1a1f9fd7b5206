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

"""Build the model, tokenizer, sample builder and image processor a training run uses."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Sequence

from m2sa_core.data.builder import SampleBuilder
from m2sa_core.data.templates import ANSWER_TEMPLATES, LONG_QUESTION_TEMPLATES, SHORT_QUESTION_TEMPLATES
from m2sa_core.model.config import M2SAConfig
from m2sa_core.model.m2sa import M2SAModel
from m2sa_core.model.preprocess import ImageProcessor
from m2sa_core.model.presets import attach_tokenizer, get_preset
from m2sa_core.model.tokenizer import builtin_corpus, train_tokenizer
import torch
from training.config import ModelConfig, TrainConfig
from training.mixture import Source
from training.sources import open_sources

log = logging.getLogger(__name__)
# Config fields that change what a checkpoint's model does, not its shapes: the only
# overrides that apply to a model started from a checkpoint (ablations of staged training).
BEHAVIOUR_FIELDS = frozenset({"use_early_fusion", "dice_smooth", "mask_type_weight", "iou_head_loss_weight",
                              "duplicate_instance_iou", "exclusion_loss_weight",
                              "exclusion_margin"})


def training_corpus(sources: Sequence[Source]) -> list[str]:
    """Every text the model will read or write in training, for a tokenizer trained from scratch."""
    texts = list(builtin_corpus())
    texts += list(SHORT_QUESTION_TEMPLATES) + list(LONG_QUESTION_TEMPLATES) + list(ANSWER_TEMPLATES)
    for source in sources:
        for record in source.items:
            texts.append(record.question)
            if record.answer_template:
                texts.append(record.answer_template)
            texts.extend(t.label for t in record.targets)
    return texts


def build_training_model(config: TrainConfig, sources: Sequence[Source], device: torch.device):
    """(model, tokenizer, sample builder, image processor), trainable split applied."""
    from m2sa_core.model.checkpoint import from_pretrained as load_pretrained
    from m2sa_core.model.trainable import apply_trainable_policy

    mc = config.model
    if mc.init_from or Path(mc.preset).is_dir():
        if mc.tokenizer_split_inflections:
            raise ValueError(f"model.tokenizer_split_inflections applies when a tokenizer is trained; "
                             f"{mc.init_from or mc.preset} brings its own (set it in the stage that trains it)")
        model, tokenizer = load_pretrained(mc.init_from or mc.preset, device=device)
        for key, value in mc.overrides.items():
            if key not in BEHAVIOUR_FIELDS:
                raise ValueError(f"model.overrides: {key} changes the shape of the model and cannot apply to the "
                                 f"checkpoint {mc.init_from or mc.preset}; with a checkpoint only "
                                 f"{sorted(BEHAVIOUR_FIELDS)} can change")
            _override(model.config, key, value)
    else:
        model_config = preset_config(mc)
        if mc.tokenizer_vocab_size <= 0:
            raise ValueError(
                f"preset {mc.preset!r} has no weights or tokenizer to start from: set model.init_from to a "
                "checkpoint directory (see docs/TRAINING.md: importing LLaVA + SAM), or model.tokenizer_vocab_size > 0 "
                "to train a tokenizer on the training texts (tiny preset)")
        corpus_sources = open_sources(mc.tokenizer_data, strict=config.strict_data) if mc.tokenizer_data else []
        tokenizer = train_tokenizer(training_corpus([*sources, *corpus_sources]), vocab_size=mc.tokenizer_vocab_size,
                                    split_inflections=mc.tokenizer_split_inflections)
        attach_tokenizer(model_config, tokenizer)
        model = M2SAModel.build(model_config, device=device)
    model.config.set_loss_weights(mc.loss_weights)
    apply_trainable_policy(model, mc.trainable_policy)
    freeze_prefixes(model, mc.freeze)
    if mc.gradient_checkpointing:
        model.set_gradient_checkpointing(True)
    builder = SampleBuilder.for_model(tokenizer, model.config, seed=config.seed)
    return model, tokenizer, builder, ImageProcessor(model.config)


def preset_config(mc: ModelConfig) -> M2SAConfig:
    """
    Return the config a model built from scratch gets: preset ``mc.preset`` with ``mc.overrides`` applied.

    Stage 1 of the tiny model builds this way, so the shipped model's shapes are this
    config's (tests/training/test_staged_training.py).
    """
    model_config = get_preset(mc.preset)
    for key, value in mc.overrides.items():
        _override(model_config, key, value)
    return model_config


def freeze_prefixes(model, prefixes) -> None:
    """Freeze every parameter under ``prefixes``; a prefix that names nothing is a typo, so an error."""
    names = [name for name, _ in model.named_parameters()]
    for prefix in prefixes:
        hits = [n for n in names if n.startswith(prefix)]
        if not hits:
            raise ValueError(f"model.freeze: no parameter name starts with {prefix!r}")
    for name, p in model.named_parameters():
        if name.startswith(tuple(prefixes)):
            p.requires_grad_(False)


def optimizer_groups(model, lr: float, lr_scale: dict[str, float]) -> list[dict]:
    """
    Return the trainable parameters as AdamW groups.

    One at ``lr``, one per ``lr_scale`` prefix at its factor of ``lr`` (the longest matching
    prefix wins). A prefix that names no trainable parameter, or a factor that is not
    positive, is an error: both are typos that would otherwise train at the wrong rate
    without a word.
    """
    prefixes = sorted(lr_scale, key=len, reverse=True)
    for prefix, factor in lr_scale.items():
        if not factor > 0:
            raise ValueError(f"optim.lr_scale: {prefix!r} has factor {factor}; it must be > 0 "
                             "(model.freeze keeps parameters still)")
    groups: dict[str | None, list] = {None: []}
    for name, param in model.named_parameters():
        if param.requires_grad:
            groups.setdefault(next((x for x in prefixes if name.startswith(x)), None), []).append(param)
    idle = [prefix for prefix in lr_scale if prefix not in groups]
    if idle:
        raise ValueError(f"optim.lr_scale: no trainable parameter name starts with {idle}")
    return [{"params": params, "lr": lr * (lr_scale[prefix] if prefix is not None else 1.0)}
            for prefix, params in groups.items() if params]


def _override(target, dotted: str, value) -> None:
    *path, last = dotted.split(".")
    node = target
    for key in path:
        node = node[key] if isinstance(node, dict) else getattr(node, key)
    if isinstance(node, dict):
        node[last] = value
    elif hasattr(node, last):
        setattr(node, last, value)
    else:
        raise ValueError(f"model.overrides: {dotted} is not a field of the preset config")


def trainable_state(model) -> dict[str, torch.Tensor]:
    """Return the parameters that training changes (what a checkpoint must keep)."""
    return {name: p.detach() for name, p in model.named_parameters() if p.requires_grad}


def load_trainable_state(model, state: dict[str, torch.Tensor]) -> None:
    params = dict(model.named_parameters())
    expected = {n for n, p in params.items() if p.requires_grad}
    missing, unexpected = sorted(expected - set(state)), sorted(set(state) - expected)
    if missing or unexpected:
        raise ValueError(f"checkpoint does not fit this model: missing {missing[:5]}, unexpected {unexpected[:5]}")
    with torch.no_grad():
        for name, value in state.items():
            params[name].copy_(value.to(params[name].device, params[name].dtype))


def save_trained_model(model, tokenizer, out_dir: Path) -> None:
    """Our checkpoint format, LoRA merged, ready for ``Segmenter.from_pretrained``."""
    import copy

    from m2sa_core.model.checkpoint import save_pretrained
    from m2sa_core.model.trainable import has_lora, merge_lora

    if has_lora(model):
        model = merge_lora(copy.deepcopy(model))
    save_pretrained(model, tokenizer, out_dir)


def model_at_checkpoint(checkpoint: str | Path, device: torch.device | str = "cpu"):
    """
    (model, tokenizer) of a training checkpoint (``<out_dir>/checkpoints/step_N``).

    A checkpoint keeps only what training changes, so the model is rebuilt the way the run
    built it (its ``config.json``: the ``init_from`` model, or a tokenizer trained on its
    data) and the checkpoint's trainables go on top: a run's middle can be scored and
    shipped like its end.
    """
    from training import checkpoints as ckpt
    from training.config import load_config

    path = Path(checkpoint)
    config_path = path.parent.parent / "config.json"
    if not (path / "manifest.json").is_file() or not config_path.is_file():
        raise FileNotFoundError(f"{path} is not a training checkpoint (expected <out_dir>/checkpoints/step_N with a "
                                f"manifest.json, and the run's config.json at {config_path})")
    config = load_config(config_path)
    state = ckpt.load_checkpoint(path)  # checks every file against its manifest
    sources = [] if config.model.init_from else open_sources(config.data, strict=config.strict_data)
    # What training leaves frozen is the initialisation, drawn after this seed as in training.setup.
    torch.manual_seed(config.seed)
    model, tokenizer, _, _ = build_training_model(config, sources, torch.device(device))
    load_trainable_state(model, state.trainables)
    return model.eval(), tokenizer
