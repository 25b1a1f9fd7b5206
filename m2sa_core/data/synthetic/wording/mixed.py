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
Object-and-part requests worded without the word "part", for training only.

The mixed family asks for an object together with the part that serves an action. Its
four train phrasings all say "part" ("Show me the mug and the part I would pour the
coffee into."); the held-out one does not ("Point out the mug and also where I pour the
coffee into."). Trained on the four alone, the tiny model answered that phrasing with the
objects alone or the parts alone for nearly all held-out questions: a two-target answer
hung on that one word. The knowledge questions with masks join an object and a
part by a keyword ("..., plus the bit of it for cocoa."), never by the action. These
join the object and the spot of the action in many ways ("plus the spot I pour the
coffee into", "together with what I cut with"), so that what asks for both is the join.

No wording carries a clause of the held-out phrasing (:data:`HELD_OUT_CLAUSES`, checked
at composition), and none says "where I": the held-out test still measures whether the
model reads "where I" as the spot of the action when it comes with an object.
"""

from __future__ import annotations

from m2sa_core.data.synthetic.knowledge import _pick
from m2sa_core.data.synthetic.questions import (
    _answer,
    _labels,
    MAX_TARGETS,
    MIXED_ANSWERS,
    MIXED_PHRASINGS,
    PART_FUNCTIONS,
    phrasings_for,
    Question,
)
from m2sa_core.data.synthetic.scene import Scene
from m2sa_core.data.synthetic.shapes import CATEGORIES
from m2sa_core.data.synthetic.wording import lexicon
from m2sa_core.data.synthetic.wording.lexicon import held_out_clauses
import numpy as np

VERBS = ("Show me", "Find", "Mark", "Outline", "Highlight", "Segment", "Give me", "Locate")
JOINS = ("and", "plus", "as well as", "together with", "along with", "and also")
SPOTS = ("the spot I", "the place I", "the bit I", "the area I", "the piece I", "what I", "the side I")
# "{v}" a verb, "{name}" the spoken name, "{j}" a join, "{s}" a spot, "{action}" the action.
FORMS = (
    "{v} the {name} {j} {s} {action}.",
    "{v} the {name}, {j} {s} {action}.",
    "I need the {name}, {j} {s} {action}.",
    "{v} the {name}. Then {s} {action}.",
    "Which is the {name}, and what do I {action}?",
    "{v} both the {name} and {s} {action}.",
)


HELD_OUT_CLAUSES = held_out_clauses(phrasings_for(MIXED_PHRASINGS, held_out=True))
FORBIDDEN = (*HELD_OUT_CLAUSES, "where i", "part")


def compose(rng: np.random.Generator, name: str, action: str) -> str:
    """One request for ``name`` and the spot where one does ``action``, from the lexicon."""
    slots = {"{v}": VERBS, "{j}": JOINS, "{s}": SPOTS, "{name}": name, "{action}": action}
    return lexicon.compose(rng, FORMS, slots, FORBIDDEN, f"{name!r} / {action!r}")


def worded_mixed_questions(scene: Scene, rng: np.random.Generator) -> list[Question]:
    """
    One object-and-part request per category in view, for one of its part functions.

    Targets are laid out as the mixed family lays them out: every instance of the
    category, each followed by its part; a category with too many instances gives none.
    """
    out = []
    for category in scene.categories():
        functions = [fn for fn in PART_FUNCTIONS if fn.targets[0][0] == category]
        if not functions:
            continue
        fn = functions[int(rng.integers(len(functions)))]
        part = fn.targets[0][1]
        targets = [t for i, o in enumerate(scene.objects) if o.category == category for t in ((i, ""), (i, part))]
        if len(targets) > MAX_TARGETS:
            continue
        text = compose(rng, _pick(rng, CATEGORIES[category].spoken), fn.action)
        out.append(Question("mixed", text, _answer(rng, MIXED_ANSWERS, _labels(scene, targets)), targets,
                            "modal", fn.key))
    return out
