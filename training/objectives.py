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
What a training step optimises: one :class:`Objective` per ``objective`` of the config.

Staged training (docs/TRAINING.md) runs the same loop, checkpoints and resume for every
stage; only the samples, their batch, the loss and the in-loop eval differ:

* ``m2sa``: answers and masks (conversations without masks train the words alone);
* ``promptable``: SAM from point and box prompts (``mask_annotations`` data);
* ``patch_words``: CLIP and the projector from the words of what covers each patch
  (``mask_annotations`` data, :mod:`m2sa_core.model.patch_alignment`).

A new stage is one more entry in :data:`OBJECTIVES`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from m2sa_core.data.patch_words import PatchWordSampleBuilder
from m2sa_core.data.prompt_samples import PromptSampleBuilder
from m2sa_core.model.batch import collate, collate_prompted
from m2sa_core.model.m2sa import M2SAOutput
from m2sa_core.model.patch_alignment import collate_patch_words, patch_word_forward
from m2sa_core.model.promptable import promptable_forward
from training import stage_evals

# (config, sources, tokenizer, question builder) -> the objective's sample builder
BuilderFactory = Callable[..., object]
# (builder, processor, pad token id, CLIP's patches a side) -> samples -> batch
CollateFactory = Callable[..., Callable[[list], dict]]


@dataclass(frozen=True)
class Objective:
    """The parts of a training stage that depend on what it optimises."""

    name: str
    # Reads the regions of mask_annotations records, not questions: seg_mode and
    # questions_per_image do not apply.
    reads_regions: bool
    make_builder: BuilderFactory
    make_collate: CollateFactory
    forward: Callable[..., M2SAOutput]  # (model, batch) -> the output whose losses the step takes
    evaluate: Callable[..., None]  # (model, tokenizer, config, step, info, writer, builder)


def _m2sa_forward(model, batch: dict) -> M2SAOutput:
    return model(batch)


OBJECTIVES: dict[str, Objective] = {
    objective.name: objective for objective in (
        Objective(
            name="m2sa", reads_regions=False,
            make_builder=lambda config, sources, tokenizer, questions: questions,
            make_collate=lambda builder, processor, pad_token_id, clip_grid: partial(
                collate, processor=processor, pad_token_id=pad_token_id),
            forward=_m2sa_forward, evaluate=stage_evals.m2sa_eval),
        Objective(
            name="promptable", reads_regions=True,
            make_builder=lambda config, sources, tokenizer, questions: PromptSampleBuilder(
                max_regions=config.prompt_regions, seed=config.seed),
            make_collate=lambda builder, processor, pad_token_id, clip_grid: partial(
                collate_prompted, processor=processor),
            forward=promptable_forward, evaluate=stage_evals.promptable_eval),
        Objective(
            name="patch_words", reads_regions=True,
            make_builder=lambda config, sources, tokenizer, questions: PatchWordSampleBuilder(
                tokenizer, (record for src in sources for record in src.items),
                instance_words=config.patch_instance_words),
            make_collate=lambda builder, processor, pad_token_id, clip_grid: partial(
                collate_patch_words, processor=processor, grid=clip_grid,
                category_words=builder.category_candidates, instance_words=builder.instance_candidates),
            forward=patch_word_forward, evaluate=stage_evals.patch_word_eval),
    )
}


def objective_of(name: str) -> Objective:
    """Return the :class:`Objective` called ``name``; a clear error for an unknown one."""
    try:
        return OBJECTIVES[name]
    except KeyError:
        raise ValueError(f"objective must be one of {tuple(OBJECTIVES)}, got {name!r}") from None
