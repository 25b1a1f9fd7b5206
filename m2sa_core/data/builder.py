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
Turn a dataset record into a training sample: prompt, token ids, labels and masks.

Every source goes through the same path so the text the model sees in training is the
text it sees at inference: the question (wrapped in a LISA-style template for
datasets without text answers), an answer with one ``[SEG]`` per target, the LLaVA v1
conversation of :mod:`m2sa_core.prompt`, and labels that supervise only the
answer. Masks are stacked in answer order, which is the order of the ``[SEG]`` tokens
and therefore the order of the predicted masks.
"""

from __future__ import annotations

from dataclasses import dataclass
import random

from m2sa_core.data.mmr import SEG_PLACEHOLDER
from m2sa_core.data.records import DataError, SegRecord
from m2sa_core.data.templates import (
    ANSWER_TEMPLATES,
    AUTHORS_EVAL_SHORT_QUESTION,
    AUTHORS_MMR_QUESTION_TEMPLATES,
    LONG_QUESTION_TEMPLATES,
    SHORT_QUESTION_TEMPLATES,
)
from m2sa_core.prompt import (
    build_conversation,
    sanitize_command,
    SEG_TOKEN,
    tokenize_conversation,
    with_request,
)
import numpy as np


@dataclass
class TrainingSample:
    """Everything one training step needs from one question (before collation)."""

    sample_id: str
    source: str
    image: np.ndarray  # uint8 RGB [H, W, 3]
    command: str  # the user's turn (question, possibly templated)
    answer: str  # assistant text with one [SEG] per target
    prompt: str  # the conversation up to "ASSISTANT:"
    input_ids: list[int]
    labels: list[int]  # IGNORE_INDEX except on the answer tokens
    masks: np.ndarray  # bool [n, H, W], answer order
    amodal_masks: np.ndarray | None  # bool [n, H, W] when every target has one
    target_labels: list[str]
    mask_type: str | None  # "modal" | "amodal" when the text decides (R2SM)
    ignore_mask: np.ndarray | None = None  # bool [H, W], pixels left out of the metric


class SampleBuilder:
    """
    Builds :class:`TrainingSample` objects with one tokenizer and template choice policy.

    ``seed`` makes the template choice reproducible when ``build`` is called without an
    ``rng``; a data loader worker should pass its own ``random.Random`` instead.

    ``question_templates="authors"`` (real checkpoints, ``M2SAConfig.question_templates``)
    reproduces the authors' text: in training a question with a text answer (MMR) is
    wrapped in one of their long templates, each ending with a segmentation request; with
    ``evaluation=True`` every question gets ``seg_request`` appended and every answer the
    final "." of their validation conversations. "plain" (the tiny model) uses the
    question as given.
    """

    def __init__(self, tokenizer, use_im_start_end: bool = False, seed: int = 0, question_templates: str = "plain",
                 seg_request: str = "", evaluation: bool = False) -> None:
        self.tokenizer = tokenizer
        self.use_im_start_end = use_im_start_end
        self.authors = question_templates == "authors"
        self.seg_request = seg_request
        self.evaluation = evaluation
        self._rng = random.Random(seed)
        seg_ids = tokenizer(SEG_TOKEN, add_special_tokens=False)["input_ids"]
        if len(seg_ids) != 1:
            raise ValueError(
                f"the tokenizer splits {SEG_TOKEN} into {len(seg_ids)} tokens; add it as a special token first"
            )
        self.seg_token_id = seg_ids[0]

    @classmethod
    def for_model(cls, tokenizer, config, seed: int = 0, evaluation: bool = False) -> "SampleBuilder":
        """Return a builder with the prompt conventions stored in an :class:`M2SAConfig`."""
        return cls(tokenizer, use_im_start_end=config.use_im_start_end, seed=seed,
                   question_templates=config.question_templates, seg_request=config.seg_request,
                   evaluation=evaluation)

    def eval_user_text(self, record: SegRecord) -> str:
        """Return the authors' validation question before its request: the sentence, or "What is X in this image?"."""
        question = sanitize_command(record.question)
        if record.answer_template or record.meta.get("is_sentence", True):
            return question
        return AUTHORS_EVAL_SHORT_QUESTION.format(class_name=question.lower())

    def command_for(self, record: SegRecord, rng: random.Random) -> str:
        """Return the user's text: the question itself, or a template around a bare query."""
        question = sanitize_command(record.question)
        if self.authors and self.evaluation:
            return with_request(self.eval_user_text(record), self.seg_request)
        if record.answer_template:
            if self.authors:
                return rng.choice(AUTHORS_MMR_QUESTION_TEMPLATES).format(sent=question)
            return question
        if record.meta.get("is_sentence", True):
            return rng.choice(LONG_QUESTION_TEMPLATES).format(sent=question)
        return rng.choice(SHORT_QUESTION_TEMPLATES).format(class_name=question.lower())

    def answer_for(self, record: SegRecord, rng: random.Random) -> str:
        """Return the answer text with one [SEG] per target."""
        if record.answer_template:
            answer = record.answer_template.replace(SEG_PLACEHOLDER, SEG_TOKEN)
            if self.authors and self.evaluation:
                answer += "."  # the authors' validation answer: "{}.".format(text_answer)
        elif len(record.targets) == 1:
            answer = f"{SEG_TOKEN}." if self.authors and self.evaluation else rng.choice(ANSWER_TEMPLATES)
        else:
            raise DataError(
                f"{record.record_id}: {len(record.targets)} targets but no text answer "
                f"to place their {SEG_TOKEN} tokens"
            )
        if answer.count(SEG_TOKEN) != len(record.targets):
            raise DataError(
                f"{record.record_id}: the answer has {answer.count(SEG_TOKEN)} {SEG_TOKEN} tokens "
                f"for {len(record.targets)} targets"
            )
        return answer

    def build(self, record: SegRecord, rng: random.Random | None = None) -> TrainingSample:
        """One sample from one record; images and masks are decoded here, not before."""
        rng = rng if rng is not None else self._rng
        command = self.command_for(record, rng)
        answer = self.answer_for(record, rng)
        prompt, answer_turn = build_conversation(command, answer, self.use_im_start_end)
        input_ids, labels = tokenize_conversation(self.tokenizer, prompt, answer_turn)
        n_seg = sum(1 for t in input_ids if t == self.seg_token_id)
        if n_seg != len(record.targets):
            raise DataError(
                f"{record.record_id}: {n_seg} {SEG_TOKEN} ids after tokenization for {len(record.targets)} targets"
            )
        image = record.load_image()
        h, w = record.height, record.width
        try:
            # No targets: a conversation answered in words (pretraining), supervised as text only.
            masks = np.stack([t.mask(h, w) for t in record.targets]) if record.targets else np.zeros((0, h, w), bool)
            amodal = None
            if record.targets and all(t.amodal_rle is not None for t in record.targets):
                amodal = np.stack([t.amodal_mask(h, w) for t in record.targets])
            ignore = record.ignore_mask()
        except ValueError as exc:
            raise DataError(f"{record.record_id}: {exc}") from exc
        return TrainingSample(
            sample_id=record.record_id,
            source=record.source,
            image=image,
            command=command,
            answer=answer,
            prompt=prompt,
            input_ids=input_ids,
            labels=labels,
            masks=masks,
            amodal_masks=amodal,
            target_labels=[t.label for t in record.targets],
            mask_type=record.mask_type,
            ignore_mask=ignore,
        )
