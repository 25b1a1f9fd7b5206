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
Parse a generated answer into one labelled target per [SEG].

The project's answer convention names every target right before its [SEG]:
``object_N`` (object level, ``mug_2 [SEG]``) or ``object_N's part`` (part level,
``television_set_1's button [SEG]``); ``its part [SEG]`` refers to the previous object.
Names are PACO style: lower case, underscores, possibly parentheses
(``mouse_(computer_equipment)_1's left_button``). The grammar and its case rule are
:mod:`m2sa_core.labels`'s (shared with the dataset readers); matches here are
folded to lower case, since generated text may capitalise a first word. A free-form model may break the
convention, so every [SEG] still yields a target, labelled from its raw text.
"""

from __future__ import annotations

import re

from m2sa_core.labels import ITS_PART_RE, LABEL_RE, ParsedLabel
from m2sa_core.prompt import SEG_TOKEN

# Where a free-form span starts: after sentence punctuation or a conjunction.
_SPAN_SPLIT_RE = re.compile(r"[.,;:!?\n]|\b(?:and|or)\b", re.IGNORECASE)
_LEADING_WORDS_RE = re.compile(r"^(?:(?:the|a|an|it|is|are|this|that|these|those)\s+)+", re.IGNORECASE)


def _fallback(span: str, index: int) -> ParsedLabel:
    """Label a [SEG] whose text breaks the convention with its last clause."""
    pieces = _SPAN_SPLIT_RE.split(span)
    clause = next((p.strip() for p in reversed(pieces) if p and p.strip()), "")
    clause = _LEADING_WORDS_RE.sub("", clause).strip() or clause
    label = clause or f"target_{index + 1}"
    return ParsedLabel(label, label, 0, "")


def _named(obj: str, instance: int, part: str) -> ParsedLabel:
    """Return the label as the answer spelt it, folded to lower case (``mug_0`` stays ``mug_0``)."""
    label = f"{obj}_{instance}'s {part}" if part else f"{obj}_{instance}"
    return ParsedLabel(label, obj, instance, part)


def parse_targets(raw_answer: str) -> list[ParsedLabel]:
    """One :class:`~m2sa_core.labels.ParsedLabel` per [SEG] in ``raw_answer``, in order."""
    spans = raw_answer.split(SEG_TOKEN)[:-1]  # the text before each [SEG]
    targets: list[ParsedLabel] = []
    last_object: tuple[str, int] | None = None
    for i, span in enumerate(spans):
        text = span.rstrip()
        m = LABEL_RE.search(text)
        if m:
            obj, inst = m["object"].lower(), int(m["instance"])
            last_object = (obj, inst)
            targets.append(_named(obj, inst, (m["part"] or "").lower()))
            continue
        m = ITS_PART_RE.search(text)
        if m and last_object is not None:
            targets.append(_named(*last_object, m["part"].lower()))
            continue
        targets.append(_fallback(text, i))
    return targets


def clean_answer(raw_answer: str) -> str:
    """Return the answer for people: [SEG] markers removed, whitespace tidied."""
    text = raw_answer.replace("</s>", "")
    text = re.sub(r"\s*" + re.escape(SEG_TOKEN), "", text)
    text = re.sub(r"\s+", " ", text)
    text = re.sub(r"\s+([.,;:!?])", r"\1", text)
    return text.strip()
