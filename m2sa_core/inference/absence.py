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
Answers that name no target: the command asked about something that is not there.

A planner must be able to tell "there is no microwave here" from a mask of something else,
from an error and from an empty mask. The model says so in words and with no ``[SEG]``; the
synthetic world trains it on the sentences in :data:`ABSENT_ANSWERS` (the data generator
writes them from this module, so writer and reader cannot drift), and :func:`absence_of`
reads the missing thing's words back. An answer with no ``[SEG]`` that follows none of the
sentences (real M2SA weights, which never learned to refuse, or a chat answer) is still an
answer naming no target: its ``missing`` is empty.
"""

from __future__ import annotations

import re

from m2sa_core.prompt import SEG_TOKEN
from m2sa_core.types import Absence

# "{missing}" is the absent thing's words: "microwave", "mug_1's handle", "third mug",
# "red cup". The last sentence is held out: the train split never answers with it.
ABSENT_ANSWERS: tuple[str, ...] = (
    "There is no {missing} here.",
    "I cannot see any {missing} here.",
    "No {missing} is in view.",
    "I see no {missing} in this image.",
)


def _pattern(template: str) -> re.Pattern[str]:
    before, after = template.split("{missing}")
    return re.compile(r"^\s*" + re.escape(before) + r"(?P<missing>.+?)" + re.escape(after.rstrip(".")) + r"\.?\s*$",
                      re.IGNORECASE | re.DOTALL)


_PATTERNS = tuple(_pattern(t) for t in ABSENT_ANSWERS)


def absent_answer(missing: str, template_index: int = 0) -> str:
    """Return the sentence the model is taught for ``missing`` (``ABSENT_ANSWERS[template_index]``)."""
    return ABSENT_ANSWERS[template_index].format(missing=missing)


def absence_of(raw_answer: str) -> Absence | None:
    """``None`` when ``raw_answer`` names a target (holds a ``[SEG]``); else what it says is missing."""
    if SEG_TOKEN in raw_answer:
        return None
    text = re.sub(r"\s+", " ", raw_answer.replace("</s>", "")).strip()
    for pattern in _PATTERNS:
        m = pattern.match(text)
        if m:
            return Absence(m["missing"].strip())
    return Absence("")
