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
Which parameters train: the paper's split (LoRA + heads) or everything (from scratch).

``paper`` (the M2SA paper's training setup): LoRA r 8 / alpha 16 / dropout 0.05 on the LLM's q_proj and
v_proj, full ``embed_tokens`` and ``lm_head`` (the new tokens need rows), SAM's mask
decoder (and mask refiner), the fusion convolutions, phi and the mask-type head; CLIP, the mm projector, SAM's image and
prompt encoders and the base LLM frozen. ``from_scratch`` trains every weight with no
LoRA: the tiny preset has no pretrained weights to protect; ``full`` is the same split
named for a model that starts from pretrained parts.

Staged training (docs/TRAINING.md) has a policy per pretraining stage: ``promptable_sam``
trains SAM alone (image encoder, prompt encoder, mask decoder, and the mask refiner
where the model has one), as SAM is trained;
``clip_alignment`` trains CLIP and the projector alone, against the language model's
word embeddings as they are (``m2sa_core.model.patch_alignment``);
``vision_language`` trains CLIP, the projector and the LLM (LLaVA's image-text
alignment and instruction tuning), leaving SAM as the first stage made it.

peft is imported only to add LoRA adapters: importing it imports bitsandbytes, which
prints warnings about CPU kernels it cannot find, and a node loading an exported model
(LoRA merged, no adapters) has no use for either. Until peft is imported no LoRA layer
can exist, so :func:`has_lora` and :func:`merge_lora` need not import it to answer.
"""

from __future__ import annotations

import sys
from typing import Any

from m2sa_core.model.config import LoraSettings
from m2sa_core.model.m2sa import M2SAModel
from torch import nn

POLICIES = ("paper", "from_scratch", "full", "promptable_sam", "clip_alignment", "vision_language")

# Parameter-name prefixes trained by each pretraining stage's policy.
_STAGE_PREFIXES = {
    "promptable_sam": ("sam.image_encoder.", "sam.prompt_encoder.", "sam.mask_decoder.", "refiner."),
    "clip_alignment": ("vision_tower.", "mm_projector."),
    "vision_language": ("vision_tower.", "mm_projector.", "llm."),
}

# Parameter-name prefixes trained in full under the paper policy.
_PAPER_FULL = (
    "llm.model.embed_tokens.",
    "llm.lm_head.",
    "sam.mask_decoder.",
    "refiner.",
    "fusion.",
    "seg_projector.",
    "mask_type_head.",
)


def _lora_layer_type() -> Any:
    """Return peft's LoraLayer class if peft is loaded, else None (then no module is a LoRA layer)."""
    lora = sys.modules.get("peft.tuners.lora")
    return None if lora is None else lora.LoraLayer


def has_lora(model: M2SAModel) -> bool:
    layer = _lora_layer_type()
    return layer is not None and any(isinstance(m, layer) for m in model.llm.modules())


def add_lora(model: M2SAModel, settings: LoraSettings | None = None) -> None:
    """
    Inject LoRA adapters into the LLM only (never CLIP, projector, SAM or phi).

    The adapters live inside ``model.llm`` so checkpoint keys stay those of the
    base model plus ``lora_A``/``lora_B``; ``config.lora`` records the settings so
    ``from_pretrained`` rebuilds the same structure.
    """
    if has_lora(model):
        return
    from peft import inject_adapter_in_model, LoraConfig

    settings = settings or LoraSettings()
    lora = LoraConfig(
        r=settings.r,
        lora_alpha=settings.alpha,
        lora_dropout=settings.dropout,
        target_modules=list(settings.target_modules),
        bias="none",
    )
    inject_adapter_in_model(lora, model.llm)
    model.config.lora = settings


def apply_trainable_policy(model: M2SAModel, policy: str = "paper") -> M2SAModel:
    """Set ``requires_grad`` per ``policy`` ("paper" adds LoRA when missing)."""
    if policy not in POLICIES:
        raise ValueError(f"unknown trainable policy {policy!r}; choose from {POLICIES}")
    if policy in ("from_scratch", "full"):
        if has_lora(model):
            raise ValueError(f"{policy} trains every weight: merge the LoRA adapters first (merge_lora)")
        for p in model.parameters():
            p.requires_grad_(True)
        return model
    if policy in _STAGE_PREFIXES:
        if has_lora(model):
            raise ValueError(f"{policy} trains base weights: merge the LoRA adapters first (merge_lora)")
        for name, p in model.named_parameters():
            p.requires_grad_(name.startswith(_STAGE_PREFIXES[policy]))
        return model
    add_lora(model, model.config.lora)
    for name, p in model.named_parameters():
        p.requires_grad_(name.startswith(_PAPER_FULL) or "lora_" in name)
    return model


def component_of(name: str) -> str:
    """Return the component a parameter belongs to ("lora", "embed_tokens", "sam.mask_decoder", "fusion", ...)."""
    if "lora_" in name:
        return "lora"
    if name.startswith("llm.model.embed_tokens."):
        return "embed_tokens"
    if name.startswith("llm.lm_head."):
        return "lm_head"
    if name.startswith("llm."):
        return "llm"
    if name.startswith("sam."):
        return "sam." + name.split(".")[1]
    return name.split(".")[0]


def trainable_parameter_groups(model: M2SAModel) -> dict[str, list[str]]:
    """Names of trainable parameters grouped by component, for logs and optimiser groups."""
    groups: dict[str, list[str]] = {}
    for name, p in model.named_parameters():
        if p.requires_grad:
            groups.setdefault(component_of(name), []).append(name)
    return groups


def split_summary(model: M2SAModel) -> str:
    """
    One line saying how many weights train and which components are held still.

    Printed when a run starts, so that a freeze list, a policy or a LoRA setting that does
    not do what was meant shows before hours of training rather than after them.
    """
    trained = 0
    held: dict[str, int] = {}
    training: set[str] = set()  # components with at least one trained weight
    for name, p in model.named_parameters():
        component = component_of(name)
        if p.requires_grad:
            trained += p.numel()
            training.add(component)
        else:
            held[component] = held.get(component, 0) + p.numel()
    line = f"{_size(trained)} of {_size(trained + sum(held.values()))} parameters train"
    if held:
        parts = [f"{c}{' (partly)' if c in training else ''} {_size(n)}"
                 for c, n in sorted(held.items(), key=lambda item: -item[1])]
        line += "; frozen: " + ", ".join(parts)
    return line


def _size(count: int) -> str:
    return f"{count / 1e6:.2f} M" if count >= 10_000 else f"{count / 1e3:.1f} k"


def merge_lora(model: M2SAModel) -> M2SAModel:
    """Fold the LoRA updates into the base weights and remove the adapters (for export)."""
    layer = _lora_layer_type()
    for name, module in list(model.llm.named_modules()):
        if layer is None or not isinstance(module, layer):
            continue
        module.merge()
        parent_name, _, child = name.rpartition(".")
        parent = model.llm.get_submodule(parent_name) if parent_name else model.llm
        base: nn.Module = module.get_base_layer()
        setattr(parent, child, base)
    model.config.lora = None
    return model
