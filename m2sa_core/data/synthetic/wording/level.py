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
One use asked at both levels: the object that serves it, and the part of it that does.

The object and part families ask about different uses in different words ("What can I
cut the vegetables with?" for the knife, "Which part of the knife is sharp?" for its
blade), so nothing in training sets the two levels side by side: the same use, once for
the thing and once for its part. The held-out answers of the tiny model missed the
level more often than anything else (a part for an object question, the object for a
part question: about one held-out question in five). These pairs ask about one part's
action twice on the same image: for the thing that has it,
without naming the thing ("Which tool here would I cut with?"), and for the part,
naming the thing ("On the knife, what do I cut with?"), so that what sets the level is
how the request is put, not which use it names.

No wording carries a clause of a held-out object, part, multi or mixed phrasing
(:data:`HELD_OUT_CLAUSES`, checked at composition), so the held-out splits still measure
whether the model reads the level of a sentence it has never seen.

The object side is worded by use, under kinds of thing and "where" (held-out object
requests begin "Where could I ...", "Which gadget ..."), not by possession: worded "Which
object has the bit I cut with?", the pairs taught the model that one cue rather than the
level, and it answered held-out object requests put as a use with a part.
"""

from __future__ import annotations

from m2sa_core.data.synthetic.knowledge import _pick
from m2sa_core.data.synthetic.questions import (
    _answer,
    _labels,
    MAX_TARGETS,
    MIXED_PHRASINGS,
    MULTI_FUNCTIONS,
    OBJECT_FUNCTIONS,
    PART_FUNCTIONS,
    phrasings_for,
    Question,
)
from m2sa_core.data.synthetic.scene import Scene
from m2sa_core.data.synthetic.shapes import CATEGORIES
from m2sa_core.data.synthetic.wording import lexicon
from m2sa_core.data.synthetic.wording.lexicon import held_out_clauses
from m2sa_core.data.synthetic.wording.mixed import VERBS
import numpy as np

SPOTS = ("bit", "piece", "spot", "side", "area")
# The object side names the thing by a kind ("device", "tool") or not at all, and asks
# for it by its use, never by what it has: forms by possession ("Which object has the bit
# I cut with?") taught that one cue for the object level, and held-out object requests put
# as a use ("Which gadget moves the pointer ...?") were answered with the part.
THINGS = ("thing", "object", "device", "gadget", "tool", "item", "utensil")
# "{v}" a verb, "{t}" a kind of thing, "{s}" a spot, "{name}" the spoken name, "{action}" the action.
OBJECT_FORMS = (
    "Which {t} here would I {action}?",
    "Where is something I could {action}?",
    "What {t} do I {action}?",
    "I need something to {action}. Which {t} is it?",
    "{v} the {t} I would {action}, all of it.",
    "Where could I find the {t} to {action}?",
    "What is there in this room that I could {action}?",
)
PART_FORMS = (
    "On the {name}, what do I {action}?",
    "{v} the {s} of the {name} I {action}.",
    "What on the {name} do I {action}?",
    "I want only the {s} of the {name} that I {action}.",
    "{v} just the {s} of the {name} I {action}, not all of it.",
)
OBJECT_ANSWERS = ("You can use {targets}.", "That is {targets}.")


HELD_OUT_CLAUSES = held_out_clauses([phrasings_for(fn.phrasings, held_out=True)[0]
                                     for fn in OBJECT_FUNCTIONS + PART_FUNCTIONS + MULTI_FUNCTIONS]
                                    + list(phrasings_for(MIXED_PHRASINGS, held_out=True)))


def compose(rng: np.random.Generator, forms: tuple[str, ...], name: str, action: str) -> str:
    """One request from ``forms`` about ``action`` (and ``name``), from the lexicon."""
    slots = {"{v}": VERBS, "{t}": THINGS, "{s}": SPOTS, "{name}": name, "{action}": action}
    return lexicon.compose(rng, forms, slots, HELD_OUT_CLAUSES, f"{name!r} / {action!r}")


def worded_level_questions(scene: Scene, rng: np.random.Generator) -> list[Question]:
    """
    Per category in view, one of its part functions asked for the object, then for the part.

    Both questions target every instance of the category (objects, or each one's part);
    a category with more instances than an answer holds gives none.
    """
    out = []
    for category in scene.categories():
        functions = [fn for fn in PART_FUNCTIONS if fn.targets[0][0] == category]
        instances = [i for i, o in enumerate(scene.objects) if o.category == category]
        if not functions or len(instances) > MAX_TARGETS:
            continue
        fn = functions[int(rng.integers(len(functions)))]
        part = fn.targets[0][1]
        objects = [(i, "") for i in instances]
        parts = [(i, part) for i in instances]
        text = compose(rng, OBJECT_FORMS, "", fn.action)
        out.append(Question("object", text, _answer(rng, OBJECT_ANSWERS, _labels(scene, objects)), objects,
                            "modal", fn.key))
        text = compose(rng, PART_FORMS, _pick(rng, CATEGORIES[category].spoken), fn.action)
        out.append(Question("part", text, _answer(rng, fn.answers, _labels(scene, parts)), parts, "modal", fn.key))
    return out
