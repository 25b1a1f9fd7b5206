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
Visible/complete questions worded from the view lexicon, for training only.

The view family has five fixed phrasings per kind, and the held-out one is left out
of training (``questions.phrasings_for``). With four sentences a side, the tiny model
learns which sentence means which mask instead of which words do: the train side
says "hidden" in both kinds ("including what is hidden", "not hidden"), so the
held-out "..., without the hidden part" got the complete mask. These questions word
the same requests from ``knowledge.VIEW_WORDS`` and the negations people use ("only",
"without", "excluding", "minus", "not just", "even where it is"), so what decides the
mask kind is the meaning of the words around the name. Each hidden word meets negations
(visible) about as often as inclusions (complete), though the held-out clauses take some
pairings out: with "hidden" said mostly in complete requests, a model trained on them
still read "without the hidden part" as complete.

No composed sentence carries a clause of a held-out phrasing (:data:`HELD_OUT_CLAUSES`,
checked at composition): the held-out test still measures generalisation.
"""

from __future__ import annotations

from m2sa_core.data.synthetic.knowledge import _pick, VIEW_WORDS
from m2sa_core.data.synthetic.questions import (
    _labels,
    AMODAL_PHRASINGS,
    name_instance,
    phrasings_for,
    Question,
    reask_view,
    VIEW_ANSWERS,
    VISIBLE_PHRASINGS,
)
from m2sa_core.data.synthetic.scene import Scene
from m2sa_core.data.synthetic.shapes import CATEGORIES
from m2sa_core.data.synthetic.wording import lexicon
from m2sa_core.data.synthetic.wording.lexicon import held_out_clauses
import numpy as np

VERBS = ("Segment", "Show me", "Outline", "Mark", "Find", "Highlight", "Give me")
ONE_WORD_HIDDEN = tuple(w for w in VIEW_WORDS["hidden"] if " " not in w)  # hidden, occluded, covered, obscured
COMPLETE_ADJECTIVES = ("whole", "complete", "entire", "full")
SEEN_CLAUSES = ("as it is seen", "in view", "in sight", "as far as it can be seen", "as you see it")

# "{v}" a verb, "{name}" the spoken name, "{h}" a one-word hidden synonym, "{hp}" any
# hidden phrase, "{a}" a complete adjective, "{s}" a seen clause.
AMODAL_FORMS = (
    "{v} the {a} {name}.",
    "{v} the {name}, including the {h} part.",
    "{v} the {name} with its {h} part.",
    "{v} all of the {name}, even where it is {hp}.",
    "{v} the {name}, not just the visible part.",
    "{v} the {name}, not only what can be seen.",
    "What is the {a} shape of the {name}?",
    "{v} the full shape of the {name}, {h} parts too.",
    "{v} the {name} together with the part that is {h}.",
    "{v} the {name}, plus whatever is {hp}.",
    "{v} the {name}, {h} part and all.",
)
VISIBLE_FORMS = (
    "{v} only the visible part of the {name}.",
    "{v} the {name} {s}.",
    "{v} the {name}, without the {h} part.",
    "{v} the {name}, leaving out what is {hp}.",
    "{v} the {name} but not the {h} part.",
    "{v} just what can be seen of the {name}.",
    "Which part of the {name} can be seen?",
    "{v} the {name} only where it is not {h}.",
    "{v} the {name}, excluding the {h} part.",
    "{v} the {name}, minus the part that is {h}.",
    "{v} the {name} without what is {hp}.",
)
FORMS = {"amodal": AMODAL_FORMS, "visible": VISIBLE_FORMS}


HELD_OUT_CLAUSES = held_out_clauses(phrasings_for(AMODAL_PHRASINGS, held_out=True)
                                    + phrasings_for(VISIBLE_PHRASINGS, held_out=True))


def compose(rng: np.random.Generator, kind: str, name: str) -> str:
    """One request for the ``kind`` ("amodal" | "visible") mask of ``name``, from the lexicon."""
    slots = {"{v}": VERBS, "{a}": COMPLETE_ADJECTIVES, "{hp}": VIEW_WORDS["hidden"], "{h}": ONE_WORD_HIDDEN,
             "{s}": SEEN_CLAUSES, "{name}": name}
    return lexicon.compose(rng, FORMS[kind], slots, HELD_OUT_CLAUSES, f"the {kind} mask of {name!r}")


def worded_view_questions(scene: Scene, question: Question, rng: np.random.Generator) -> list[Question]:
    """
    Return the view ``question`` worded afresh, and once per instance by name when it has several.

    Same targets, masks and mask type as ``question``; other families give nothing.
    """
    if question.family not in VIEW_ANSWERS:
        return []
    name = _pick(rng, CATEGORIES[scene.objects[question.targets[0][0]].category].spoken)
    labels = _labels(scene, question.targets)
    out = [reask_view(question, compose(rng, question.family, name), labels, list(question.targets), rng)]
    if len(question.targets) > 1:
        for target, label in zip(question.targets, labels):
            text = name_instance(compose(rng, question.family, name), label)
            out.append(reask_view(question, text, [label], [target], rng))
    return out
