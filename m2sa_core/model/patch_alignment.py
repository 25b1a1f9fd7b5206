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
Patch alignment: CLIP's projected patch tokens learn the words of what they show.

The tiny CLIP's stand-in for its own pretraining (staged training, docs/TRAINING.md).
Each patch token that the language model reads (CLIP patch -> projector, exactly the
tokens spliced into the prompt) is compared, by cosine, with the language model's input
embeddings of the world's words: the category words (" mug", " laptop", and " table"
for the background) and the instance words ("1", "2", ...). Its targets are the shares
of the patch that each object covers (:class:`m2sa_core.data.patch_words.PatchWordSample`):
a patch half on the mug_2 and half on the table wants " mug" and " table" equally, and
"2" for its instance. Only CLIP and the projector train; the embeddings stay as they
are, so the tokens move into the language model's word space, as LLaVA's projector
stage aligns image features with a frozen LLM's words, and a patch of the second mug
reads to the language model like "mug 2".
"""

from __future__ import annotations

from collections.abc import Sequence
import math

from m2sa_core.model.m2sa import M2SAModel, M2SAOutput
from m2sa_core.model.preprocess import ImageProcessor, validate_image
import torch
import torch.nn.functional as F

# CLIP's initial temperature: cosine similarities of -1..1 become logits of -14..14.
TEMPERATURE = 0.07

PATCH_WORD_BATCH_KEYS = ("clip_images", "category_words", "category_targets", "instance_words",
                         "instance_targets", "instance_weights", "sample_ids")


def collate_patch_words(samples: Sequence, processor: ImageProcessor, grid: int,
                        category_words: Sequence[int], instance_words: Sequence[int]) -> dict:
    """
    Patch-word samples -> the batch of :func:`patch_word_forward`.

    ``category_targets`` [B, N, K]: per patch, the share of each candidate category word
    (the first candidate is the background word, which takes what no object covers);
    ``instance_targets`` [B, N, I]: the instance words' shares among the objects on the
    patch; ``instance_weights`` [B, N]: how much of the patch objects cover (a patch of
    bare table has no instance to learn). N = ``grid`` ** 2.
    """
    if not samples:
        raise ValueError("collate_patch_words: empty batch")
    category_index = {word: k for k, word in enumerate(category_words)}
    instance_index = {word: k for k, word in enumerate(instance_words)}
    n_patches = grid * grid
    category_targets = torch.zeros(len(samples), n_patches, len(category_words))
    instance_targets = torch.zeros(len(samples), n_patches, len(instance_words))
    for b, sample in enumerate(samples):
        unknown = ({int(w) for w in sample.category_words} - category_index.keys()) | (
            {int(w) for w in sample.instance_words} - instance_index.keys())
        if unknown:
            raise ValueError(f"patch words: {sample.sample_id} names token(s) {sorted(unknown)} that are not "
                             "among the candidate words (taken from the training records)")
        if len(sample.masks):
            coverage = processor.clip_patch_coverage(sample.masks, grid)  # [n, N]
            for obj, (category, instance) in enumerate(zip(sample.category_words, sample.instance_words)):
                category_targets[b, :, category_index[int(category)]] += coverage[obj]
                instance_targets[b, :, instance_index[int(instance)]] += coverage[obj]
        covered = category_targets[b, :, 1:].sum(-1).clamp(max=1.0)
        category_targets[b, :, 0] += 1.0 - covered
    weights = instance_targets.sum(-1)
    instance_targets = instance_targets / weights.clamp(min=1e-6)[..., None]
    category_targets = category_targets / category_targets.sum(-1, keepdim=True)
    return {
        # CLIP's input only: this objective never runs SAM, so its image is not prepared.
        "clip_images": torch.stack([processor.clip_image(validate_image(s.image, s.sample_id)) for s in samples]),
        "category_words": torch.tensor(list(category_words), dtype=torch.long),
        "category_targets": category_targets,
        "instance_words": torch.tensor(list(instance_words), dtype=torch.long),
        "instance_targets": instance_targets,
        "instance_weights": weights.clamp(max=1.0),
        "sample_ids": [s.sample_id for s in samples],
    }


def word_logits(tokens: torch.Tensor, embeddings: torch.Tensor) -> torch.Tensor:
    """Cosine logits [B, N, K] of patch tokens [B, N, d] against word embeddings [K, d]."""
    return F.normalize(tokens, dim=-1) @ F.normalize(embeddings, dim=-1).T / TEMPERATURE


def clip_grid(model: M2SAModel) -> int:
    """Return CLIP's patches a side (the square root of its image tokens)."""
    return math.isqrt(model.config.num_image_tokens)


def _patch_logits(model: M2SAModel, batch: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits [B, N, K] and [B, N, I] of every patch token against the batch's category and instance words."""
    tokens = model.encode_clip(batch["clip_images"]).float()
    embeddings = model.llm.get_input_embeddings().weight.float()
    device = tokens.device
    return (word_logits(tokens, embeddings[batch["category_words"].to(device)]),
            word_logits(tokens, embeddings[batch["instance_words"].to(device)]))


@torch.no_grad()
def instance_guesses(model: M2SAModel, batch: dict) -> torch.Tensor:
    """
    Index [B, N] into ``batch["instance_words"]`` of each patch token's nearest instance word.

    What a patch says its object's number is, read object by object by
    ``training/tiny/research/probe_patch_words.py --by-object``.
    """
    return _patch_logits(model, batch)[1].argmax(-1)


def patch_word_forward(model: M2SAModel, batch: dict) -> M2SAOutput:
    """
    Soft cross-entropy of every patch token against its category and instance words.

    The loss is the category term (every patch) plus the instance term (weighted by how
    much of each patch objects cover); both are reported together as ``ce_loss``.
    """
    missing = [k for k in PATCH_WORD_BATCH_KEYS if k not in batch]
    if missing:
        raise KeyError(f"patch_word_forward: batch lacks {missing}")
    category, instance = (logits.log_softmax(-1) for logits in _patch_logits(model, batch))
    device = category.device
    category_loss = -(batch["category_targets"].to(device) * category).sum(-1).mean()
    weights = batch["instance_weights"].to(device)
    per_patch = -(batch["instance_targets"].to(device) * instance).sum(-1)
    instance_loss = (weights * per_patch).sum() / weights.sum().clamp(min=1e-6)
    loss = category_loss + instance_loss
    zero = loss.new_zeros(())
    return M2SAOutput(loss, loss, zero, zero, amodal_bce_loss=zero, amodal_dice_loss=zero, mask_type_loss=zero)


@torch.no_grad()
def patch_word_accuracy(model: M2SAModel, batch: dict,
                        instance_names: Sequence[str] | None = None) -> dict[str, float]:
    """
    Measure how often a patch's nearest category word is its main one.

    Over patches an object covers most of (``category``) and over bare-table patches
    (``background``), and the same for instance words on object patches (``instance``).

    With ``instance_names`` (one per candidate instance word, in the batch's order) the
    instance accuracy also comes per true instance word (``instance_2``, with
    ``patches_instance_2`` counting its patches): most object patches are first
    instances, so the average hides whether a second mug's patches read "2", which an
    answer needs before it names the mug_2 (answers that fall short of the count name the
    first instance and stop).
    """
    category, instance = _patch_logits(model, batch)
    device = category.device
    targets = batch["category_targets"].to(device)
    guess, truth = category.argmax(-1), targets.argmax(-1)
    on_object = targets[..., 1:].sum(-1) > 0.5
    on_table = targets[..., 0] > 0.99
    instance_guess = instance.argmax(-1)
    instance_truth = batch["instance_targets"].to(device).argmax(-1)

    def share(hit: torch.Tensor, where: torch.Tensor) -> float:
        return float(hit[where].float().mean()) if where.any() else 0.0

    instance_hit = instance_guess == instance_truth
    report = {"category": share(guess == truth, on_object), "background": share(guess == truth, on_table),
              "instance": share(instance_hit, on_object)}
    if instance_names is not None:
        if len(instance_names) != instance.shape[-1]:
            raise ValueError(f"{len(instance_names)} instance names for {instance.shape[-1]} instance words")
        for k, name in enumerate(instance_names):
            where = on_object & (instance_truth == k)
            if where.any():
                report[f"instance_{name}"] = share(instance_hit, where)
                report[f"patches_instance_{name}"] = int(where.sum())
    return report
