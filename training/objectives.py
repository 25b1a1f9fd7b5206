"""What a training step optimises: one entry per ``objective`` of the config.

Staged training (docs/TRAINING.md) runs the same loop, checkpoints and resume for every
stage; only the samples, their batch and the loss differ:

* ``m2sa``: answers and masks (conversations without masks train the words alone);
* ``promptable``: SAM from point and box prompts (``mask_annotations`` data);
* ``patch_words``: CLIP and the projector from the words of what covers each patch
  (``mask_annotations`` data, :mod:`m2sa_core.model.patch_alignment`).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from m2sa_core.data.patch_words import PatchWordSampleBuilder
from m2sa_core.data.prompt_samples import PromptSampleBuilder
from m2sa_core.model.batch import collate, collate_prompted
from m2sa_core.model.m2sa import M2SAOutput
from m2sa_core.model.patch_alignment import collate_patch_words, patch_word_forward
from m2sa_core.model.promptable import promptable_forward

OBJECTIVES = ("m2sa", "promptable", "patch_words")
# The objectives that read regions of mask_annotations records, not questions.
REGION_OBJECTIVES = ("promptable", "patch_words")


def objective_builder(config, sources, tokenizer, builder):
    """The sample builder of ``config.objective``; ``builder`` (questions) for m2sa."""
    if config.objective == "promptable":
        return PromptSampleBuilder(max_regions=config.prompt_regions, seed=config.seed)
    if config.objective == "patch_words":
        return PatchWordSampleBuilder(tokenizer, (record for src in sources for record in src.items))
    return builder


def objective_collate(objective: str, builder, processor, pad_token_id: int, clip_grid: int) -> Callable[[list], dict]:
    """samples -> the batch the objective's forward reads (``clip_grid``: CLIP's patches a side)."""
    if objective == "promptable":
        return partial(collate_prompted, processor=processor)
    if objective == "patch_words":
        return partial(collate_patch_words, processor=processor, grid=clip_grid,
                       category_words=builder.category_candidates, instance_words=builder.instance_candidates)
    return partial(collate, processor=processor, pad_token_id=pad_token_id)


def objective_forward(objective: str) -> Callable[..., M2SAOutput]:
    """(model, batch) -> the output whose losses the step takes."""
    if objective == "promptable":
        return promptable_forward
    if objective == "patch_words":
        return patch_word_forward
    return lambda model, batch: model(batch)
