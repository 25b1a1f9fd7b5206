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
Patch-word samples: which word covers each CLIP patch of an image.

The tiny model's CLIP has no pretraining of its own: trained only through the language
model's answers it stayed blind (after stage 2 it named none of the objects in view and
counted every category as one: the answers' prior won over the image). A real CLIP comes out of
400 M image-text pairs with patches that already carry what they show; this is the tiny
world's stand-in, read from the same mask annotations as SAM's stage. For every object
of an image it keeps its visible mask and two words of its label as the language model
reads them in an answer (" mug_2" -> the word " mug" and the instance word "2"); the
patch-alignment objective (:mod:`m2sa_core.model.patch_alignment`) pulls each patch's
projected token towards the words of what covers it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Iterable

from m2sa_core.data.records import DataError, SegRecord
import numpy as np

# What covers a patch where no object does: the synthetic scenes are things on a table.
BACKGROUND_WORD = " table"

# What a patch's instance word says (``patch_instance_words`` of the training config):
# "ordinal", the object's own number (the second mug from the left says "2"); "count", how
# many objects of its category the image holds (every mug of a two-mug scene says "2"), the
# number an answer must reach when it lists them all. Each kind with what its eval reports it as.
INSTANCE_WORD_NAMES = {"ordinal": "number", "count": "count"}
INSTANCE_WORD_KINDS = tuple(INSTANCE_WORD_NAMES)


def check_instance_word_kind(kind: str) -> None:
    """
    Refuse a ``patch_instance_words`` that names no kind.

    M2sa-train calls it with the config's other checks, so a typo is reported before the
    data sets take seconds to open.
    """
    if kind not in INSTANCE_WORD_KINDS:
        raise ValueError(f"patch_instance_words must be one of {INSTANCE_WORD_KINDS}, got {kind!r}")


@dataclass
class PatchWordSample:
    """The objects of one image with the words that name them."""

    sample_id: str
    image: np.ndarray  # uint8 RGB [H, W, 3]
    masks: np.ndarray  # bool [n, H, W] visible object masks (n may be 0)
    category_words: np.ndarray  # int [n] token id of each object's category word
    instance_words: np.ndarray  # int [n] token id of each object's instance word


def label_words(tokenizer, label: str) -> tuple[int, int]:
    """
    (category word, instance word) token ids of an object label as an answer spells it.

    Answers say "the mug_2", so the label is tokenized after a space: its first token is
    the category word (" mug") and its last the instance number ("2").
    """
    ids = tokenizer(" " + label, add_special_tokens=False)["input_ids"]
    if len(ids) < 2:
        raise ValueError(f"label {label!r} is one token ({ids}): it has no separate instance word")
    return int(ids[0]), int(ids[-1])


def background_word(tokenizer) -> int:
    """
    Token id of the table's word.

    Its first token, as :func:`label_words` takes a category's (a tokenizer that cuts
    inflections spells " table" as " tabl" + "e").
    """
    ids = tokenizer(BACKGROUND_WORD, add_special_tokens=False)["input_ids"]
    stem = tokenizer.decode(ids[:1]).strip() if ids else ""
    if len(stem) < 3 or not BACKGROUND_WORD.strip().startswith(stem):
        raise ValueError(f"the background word {BACKGROUND_WORD!r} does not start with a token of its own "
                         f"in this tokenizer: {ids} (first token {stem!r})")
    return int(ids[0])


class PatchWordSampleBuilder:
    """
    Turns a ``mask_annotations`` record into a :class:`PatchWordSample`.

    The candidate words are fixed when the builder is made, from every object label of
    the training records, so each patch is told apart from every thing of the world (and
    the table), not only from what the batch happens to hold.
    """

    def __init__(self, tokenizer, records: Iterable[SegRecord], instance_words: str = "ordinal") -> None:
        check_instance_word_kind(instance_words)
        self.tokenizer = tokenizer
        self.instance_kind = instance_words
        categories: set[int] = set()
        instances: set[int] = set()
        for record in records:
            for category, instance in self._object_words(self._objects(record)):
                categories.add(category)
                instances.add(instance)
        if not categories:
            raise ValueError("patch words: the data holds no labelled object (mask_annotations with labels)")
        self.background = background_word(tokenizer)
        self.category_candidates = [self.background, *sorted(categories - {self.background})]
        self.instance_candidates = sorted(instances)

    @staticmethod
    def _objects(record: SegRecord) -> list:
        return [t for t in record.targets if not t.part_name and t.label]

    def _object_words(self, objects: list) -> list[tuple[int, int]]:
        """(category word, instance word) of each object, the instance word as ``instance_kind`` says."""
        if self.instance_kind == "ordinal":
            return [label_words(self.tokenizer, t.label) for t in objects]
        # "count": the label renumbered with its category's count, tokenized as labels are,
        # so "2" is the very token an answer's " mug_2" ends with.
        categories = [t.label.rsplit("_", 1)[0] for t in objects]
        counts = Counter(categories)
        return [label_words(self.tokenizer, f"{category}_{counts[category]}") for category in categories]

    def build(self, record: SegRecord, rng=None) -> PatchWordSample:  # noqa: ARG002 - no randomness
        h, w = record.height, record.width
        objects = self._objects(record)
        try:
            masks = np.stack([t.mask(h, w) for t in objects]) if objects else np.zeros((0, h, w), bool)
        except ValueError as exc:
            raise DataError(f"{record.record_id}: {exc}") from exc
        words = self._object_words(objects)
        return PatchWordSample(
            record.record_id, record.load_image(), masks,
            np.array([c for c, _ in words], np.int64), np.array([i for _, i in words], np.int64))
