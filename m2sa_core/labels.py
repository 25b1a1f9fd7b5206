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
Target names: PACO category names and the ``object_N's part`` labels of answers.

The project's answer-text convention names every target immediately before its
``[SEG]`` / ``{seg}``: ``mug_2`` (object level) or ``television_set_1's button`` (part
level). PACO categories name parts as ``object:part``. Both are parsed here so readers,
the synthetic world, the answer parser and the metrics agree on granularity; the module
stands beside ``data/`` and ``inference/`` because both read it.
"""

from __future__ import annotations

from dataclasses import dataclass
import re

from m2sa_core.types import Granularity

# The one grammar of target labels, shared by the dataset readers (parse_label_before)
# and the answer parser (m2sa_core.inference.answer). Names are PACO style: a letter, then letters,
# digits, underscores, hyphens and a parenthesised qualifier ("mouse_(computer_equipment)").
# A label is ``object_N`` or ``object_N's part`` at the end of the text before a [SEG].
#
# Case rule: labels match without regard to case, because generated text may capitalise
# a sentence's first word ("Mug_1 [SEG]"). Dataset labels are lower case and are kept
# as written; the answer parser folds what it matched to lower case.
NAME = r"[a-z][a-z0-9_()\-]*"
LABEL_RE = re.compile(
    rf"(?<![\w()'\-])(?P<object>{NAME}?)_(?P<instance>\d+)(?:'s\s+(?P<part>{NAME}))?\s*$",
    re.IGNORECASE,
)
# "its part" at the end of the text before a [SEG]: a part of the previous object.
ITS_PART_RE = re.compile(rf"(?<![\w'])its\s+(?P<part>{NAME})\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class ParsedLabel:
    """Object name, instance (0 when unknown) and part name ("" at object level)."""

    label: str
    object_name: str
    instance: int
    part_name: str

    @property
    def granularity(self) -> Granularity:
        return Granularity.PART if self.part_name else Granularity.OBJECT


def parse_label_before(text: str) -> ParsedLabel | None:
    """Return the target named at the end of ``text`` (the answer text before a ``{seg}``), if any."""
    m = LABEL_RE.search(text)
    if m is None:
        return None
    part = m.group("part") or ""
    return ParsedLabel(
        label=m.group(0).strip(),
        object_name=m.group("object"),
        instance=int(m.group("instance")),
        part_name=part,
    )


def split_category(category_name: str) -> tuple[str, str]:
    """("television_set", "button") for "television_set:button"; ("mug", "") for "mug"."""
    obj, sep, part = category_name.partition(":")
    return obj, part if sep else ""


def make_label(object_name: str, instance: int, part_name: str = "") -> str:
    """Return the answer-text label of a target: ``mug_2`` or ``television_set_1's button``."""
    base = f"{object_name}_{instance}" if instance > 0 else object_name
    return f"{base}'s {part_name}" if part_name else base


def category_of(object_name: str, part_name: str = "") -> str:
    """PACO category name: ``object:part`` for parts, ``object`` for objects."""
    return f"{object_name}:{part_name}" if part_name else object_name


def label_segments(template: str, placeholder: str = "{seg}") -> list[str]:
    """Return the text before each placeholder (from the previous one), in answer order."""
    pieces = template.split(placeholder)
    return pieces[:-1]
