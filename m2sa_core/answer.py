"""Parse a generated answer into one labelled target per [SEG].

The project's answer convention names every target right before its [SEG]:
``object_N`` (object level, ``mug_2 [SEG]``) or ``object_N's part`` (part level,
``television_set_1's button [SEG]``); ``its part [SEG]`` refers to the previous object.
Names are PACO style: lower case, underscores, possibly parentheses
(``mouse_(computer_equipment)_1's left_button``). The grammar and its case rule are
:mod:`m2sa_core.data.labels`'s (shared with the dataset readers); matches here are
folded to lower case, since generated text may capitalise a first word. A free-form model may break the
convention, so every [SEG] still yields a target, labelled from its raw text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from m2sa_core.data.labels import ITS_PART_RE, LABEL_RE
from m2sa_core.prompt import SEG_TOKEN
from m2sa_core.types import Granularity

# Where a free-form span starts: after sentence punctuation or a conjunction.
_SPAN_SPLIT_RE = re.compile(r"[.,;:!?\n]|\b(?:and|or)\b", re.IGNORECASE)
_LEADING_WORDS_RE = re.compile(r"^(?:(?:the|a|an|it|is|are|this|that|these|those)\s+)+", re.IGNORECASE)


@dataclass(frozen=True)
class ParsedTarget:
    """The label of one [SEG] and its parts (fields as in :class:`m2sa_core.types.Target`)."""

    label: str
    object_name: str
    instance: int
    part_name: str
    granularity: Granularity


def _fallback(span: str, index: int) -> ParsedTarget:
    """Label a [SEG] whose text breaks the convention with its last clause."""
    pieces = _SPAN_SPLIT_RE.split(span)
    clause = next((p.strip() for p in reversed(pieces) if p and p.strip()), "")
    clause = _LEADING_WORDS_RE.sub("", clause).strip() or clause
    label = clause or f"target_{index + 1}"
    return ParsedTarget(label, label, 0, "", Granularity.OBJECT)


def parse_targets(raw_answer: str) -> list[ParsedTarget]:
    """One :class:`ParsedTarget` per [SEG] in ``raw_answer``, in order."""
    spans = raw_answer.split(SEG_TOKEN)[:-1]  # the text before each [SEG]
    targets: list[ParsedTarget] = []
    last_object: tuple[str, int] | None = None
    for i, span in enumerate(spans):
        text = span.rstrip()
        m = LABEL_RE.search(text)
        if m:
            obj, inst, part = m["object"].lower(), int(m["instance"]), (m["part"] or "").lower()
            last_object = (obj, inst)
            if part:
                targets.append(ParsedTarget(f"{obj}_{inst}'s {part}", obj, inst, part, Granularity.PART))
            else:
                targets.append(ParsedTarget(f"{obj}_{inst}", obj, inst, "", Granularity.OBJECT))
            continue
        m = ITS_PART_RE.search(text)
        if m and last_object is not None:
            obj, inst = last_object
            part = m["part"].lower()
            targets.append(ParsedTarget(f"{obj}_{inst}'s {part}", obj, inst, part, Granularity.PART))
            continue
        targets.append(_fallback(text, i))
    return targets


def clean_answer(raw_answer: str) -> str:
    """The answer for people: [SEG] markers removed, whitespace tidied."""
    text = raw_answer.replace("</s>", "")
    text = re.sub(r"\s*" + re.escape(SEG_TOKEN), "", text)
    text = re.sub(r"\s+", " ", text)
    text = re.sub(r"\s+([.,;:!?])", r"\1", text)
    return text.strip()
