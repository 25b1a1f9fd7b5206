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
Each fixed visible/complete request with its twin of the other kind, for training only.

The four train phrasings of each view kind (``questions.AMODAL_PHRASINGS`` and
``VISIBLE_PHRASINGS``, the held-out fifth left out) are the requests the tiny model
meets most often, and their words lean one way: over a stage-3 mixture of the tiny model,
"hidden part" came in complete requests eleven times as often as in visible ones
("..., hidden parts included"), and so the held-out "Outline the mug as it appears,
without the hidden part." got the complete mask, while "Segment the mug, excluding the
hidden part." got the visible one. A twin keeps a fixed
phrasing's words and turns its meaning with a negation ("hidden parts included" ->
"hidden parts left out"), so the words a phrasing shares with its twin cannot decide the
kind, only the words that differ can. Twins are asked about the same targets as their
source and answered with the other kind's masks: minimal pairs on the same image.

No twin carries a clause of a held-out phrasing (checked by the test), so the held-out
R2SM queries still measure generalisation. Not in the shipped stage-3 mixture: with the
twins every one-piece variant of the held-out visible request got visible
masks, but the held-out sentence itself still the complete one, and MMR lost ground.
"""

from __future__ import annotations

from m2sa_core.data.synthetic.knowledge import _pick
from m2sa_core.data.synthetic.questions import (
    _answer,
    _labels,
    AMODAL_PHRASINGS,
    name_instance,
    phrasings_for,
    Question,
    VIEW_ANSWERS,
    VISIBLE_PHRASINGS,
)
from m2sa_core.data.synthetic.scene import Scene
from m2sa_core.data.synthetic.shapes import CATEGORIES
import numpy as np

# Train phrasing -> its twins of the other kind, in the order of questions.py.
TWINS: dict[str, tuple[str, ...]] = {
    # complete -> visible
    "Show me the whole {name}, including what is hidden.": (
        "Show me the {name}, not including what is hidden.",
        "Show me the {name}, leaving out what is hidden."),
    "Segment the complete {name}, even the parts covered by other things.": (
        "Segment the {name}, but not the parts covered by other things.",
        "Segment the {name}, except the parts covered by other things."),
    "Outline the entire {name} as if nothing were in front of it.": (
        "Outline the {name} only where nothing is in front of it.",
        "Outline the {name}, not as if nothing were in front of it."),
    "Give me the full shape of the {name}, hidden parts included.": (
        "Give me the shape of the {name}, hidden parts left out.",
        "Give me the shape of the {name}, hidden parts excluded."),
    # visible -> complete
    "Segment only the visible part of the {name}.": (
        "Segment not only the visible part of the {name}.",
        "Segment more than the visible part of the {name}."),
    "Show me just what can be seen of the {name}.": (
        "Show me not just what can be seen of the {name}.",
        "Show me more than what can be seen of the {name}."),
    "Mark the part of the {name} that is in view.": (
        "Mark the part of the {name} that is in view and the part that is not.",
        "Mark all of the {name}, not just the part that is in view."),
    "Which pixels of the {name} are not hidden?": (
        "Which pixels belong to the {name}, hidden or not?",
        "Which pixels of the {name} are hidden and which are not?"),
}
OTHER_KIND = {"amodal": ("visible", "visible", "modal"), "visible": ("amodal", "whole", "amodal")}


def source_phrasing(question: Question, scene: Scene) -> tuple[str, str] | None:
    """
    Return the train phrasing ``question`` was made from and the spoken name it was filled with.

    None for a held-out, named or other family's question.
    """
    phrasings = {"amodal": AMODAL_PHRASINGS, "visible": VISIBLE_PHRASINGS}.get(question.family)
    if phrasings is None:
        return None
    spoken = CATEGORIES[scene.objects[question.targets[0][0]].category].spoken
    for phrasing in phrasings_for(phrasings, held_out=False):
        for name in spoken:
            if question.question == phrasing.replace("{name}", name):
                return phrasing, name
    return None


def twin_view_questions(scene: Scene, question: Question, rng: np.random.Generator) -> list[Question]:
    """
    ``question``'s twin of the other kind, and once per instance by name when it has several.

    Same targets as ``question``, the other mask type; a question not made from a train
    view phrasing gives nothing.
    """
    source = source_phrasing(question, scene)
    if source is None:
        return []
    phrasing, name = source
    family, function, mask_type = OTHER_KIND[question.family]
    labels = _labels(scene, question.targets)

    def ask(text: str, targets: list[tuple[int, str]], names: list[str]) -> Question:
        return Question(family, text, _answer(rng, VIEW_ANSWERS[family], names), targets, mask_type, function)

    out = [ask(_pick(rng, TWINS[phrasing]).replace("{name}", name), list(question.targets), labels)]
    if len(question.targets) > 1:
        for target, label in zip(question.targets, labels):
            text = name_instance(_pick(rng, TWINS[phrasing]).replace("{name}", name), label)
            out.append(ask(text, [target], [label]))
    return out
