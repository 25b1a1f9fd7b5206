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
The absent commands' phrasings asked about things that are there, for training only.

The ``part``, ``instance`` and ``property`` kinds of :mod:`m2sa_core.data.synthetic.absent`
have phrasings of their own ("Show me the third mug.", "Where is the purple mug?",
"Show me the blade of the bottle."), which no present question uses. Trained on them
alone, a model can learn that an ordinal, a colour or a part's name means "not there"
without looking, and would refuse "Show me the second mug." with two mugs in view. These
ask the same train phrasings about an instance, a colour or a part the scene does hold
and answer with its mask, so that only the image tells the two apart: the second of two
mugs, a bottle whose glass is green (most of its visible pixels, while every other bottle
has next to none of that colour), the named object's own part.

Held-out phrasings are never used: val and test still ask the absent kinds only in the
words train never saw.
"""

from __future__ import annotations

from m2sa_core.data.synthetic.absent import (
    ABSENT_SHARE,
    colour_share,
    COLOURS,
    INSTANCE_PHRASINGS,
    ORDINALS,
    PART_PHRASINGS,
    PROPERTY_PHRASINGS,
    spoken_part,
)
from m2sa_core.data.synthetic.knowledge import _pick
from m2sa_core.data.synthetic.questions import _answer, _labels, phrasings_for, Question
from m2sa_core.data.synthetic.scene import Scene
from m2sa_core.data.synthetic.shapes import CATEGORIES
import numpy as np

ANSWERS = ("Here is {targets}.", "That is {targets}.")
# Categories whose colour differs from one instance to the next (shapes.py): a colour
# names one of them; a pan is always black, so "the black pan" would name the category.
COLOURED = ("mug", "bottle")
OWN_COLOUR_SHARE = 0.4  # of an instance's visible pixels within OWN_HUE_WINDOW: its colour
OWN_HUE_WINDOW = 20.0  # degrees: a yellow-green bottle (90 degrees) is neither yellow nor green


def _phrasing(rng: np.random.Generator, phrasings: tuple[str, ...]) -> str:
    return _pick(rng, phrasings_for(phrasings, held_out=False))


def _ask(rng: np.random.Generator, scene: Scene, family: str, text: str, targets: list[tuple[int, str]],
         function: str) -> Question:
    return Question(family, text[0].upper() + text[1:], _answer(rng, ANSWERS, _labels(scene, targets)), targets,
                    "modal", function)


def instance_twin(scene: Scene, rng: np.random.Generator) -> Question | None:
    """Ask for one instance of a category in view by its place from the left ("the second mug")."""
    category = _pick(rng, tuple(scene.categories()))
    indices = [i for i, o in enumerate(scene.objects) if o.category == category]
    index = indices[int(rng.integers(len(indices)))]
    name = _pick(rng, CATEGORIES[category].spoken)
    ordinal = ORDINALS[scene.objects[index].instance - 1]
    text = _phrasing(rng, INSTANCE_PHRASINGS).replace("{ordinal}", ordinal).replace("{name}", name)
    return _ask(rng, scene, "object", text, [(index, "")], "absent_twin_instance")


def colour_twin(scene: Scene, rng: np.random.Generator) -> Question | None:
    """
    Ask for the instances of a coloured category that show one colour, when the others show none of it.

    None when no colour sets some instances of a category in view apart that clearly.
    """
    options = []
    for category in COLOURED:
        indices = [i for i, o in enumerate(scene.objects) if o.category == category]
        for colour in COLOURS:
            own = [i for i in indices
                   if colour_share(scene.image, scene.objects[i], colour, OWN_HUE_WINDOW) >= OWN_COLOUR_SHARE]
            others = [i for i in indices if i not in own]
            if own and all(colour_share(scene.image, scene.objects[i], colour) < ABSENT_SHARE for i in others):
                options.append((category, colour, own))
    if not options:
        return None
    category, colour, own = options[int(rng.integers(len(options)))]
    name = _pick(rng, CATEGORIES[category].spoken)
    text = _phrasing(rng, PROPERTY_PHRASINGS).replace("{colour}", colour).replace("{name}", name)
    return _ask(rng, scene, "object", text, [(i, "") for i in own], "absent_twin_property")


def part_twin(scene: Scene, rng: np.random.Generator) -> Question | None:
    """Ask for a part of an object in view by the part's name, one of several instances by its place."""
    category = _pick(rng, tuple(scene.categories()))
    indices = [i for i, o in enumerate(scene.objects) if o.category == category]
    index = indices[int(rng.integers(len(indices)))]
    part = _pick(rng, CATEGORIES[category].parts)
    name = _pick(rng, CATEGORIES[category].spoken)
    if len(indices) > 1:
        name = f"{ORDINALS[scene.objects[index].instance - 1]} {name}"
    text = _phrasing(rng, PART_PHRASINGS).replace("{part}", spoken_part(part)).replace("{name}", name)
    return _ask(rng, scene, "part", text, [(index, part)], "absent_twin_part")


def absent_twin_questions(scene: Scene, rng: np.random.Generator) -> list[Question]:
    """One present twin per kind the scene allows: an instance, a colour, a part."""
    asked = (instance_twin(scene, rng), colour_twin(scene, rng), part_twin(scene, rng))
    return [q for q in asked if q is not None]
