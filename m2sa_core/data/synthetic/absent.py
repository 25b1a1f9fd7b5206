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
Commands about what is not in the scene, answered in words with no target.

A planner that is handed a mask of something else when it asked for a missing thing
will press or grasp the wrong object, so the world asks about absent things too, of four
kinds (:data:`KINDS`):

* ``category``: one of the world's categories the scene does not hold, asked with the
  functional phrasings of that category (``questions.OBJECT_FUNCTIONS`` and
  ``PART_FUNCTIONS``: "What would you press to switch the TV on?" with no TV), or in the
  mixed family's form (``MIXED_PHRASINGS``: the object and one of its parts);
* ``part``: a part the named object does not have ("the blade of the bottle", "the
  screen of the second mug"): a part of another category, never one the object has or
  one it has under another name;
* ``instance``: one instance more than the scene holds ("the third mug" with two;
  instances count from the left, as the labels do);
* ``property``: a colour that no instance of the named category shows ("the purple mug").
  The scenes carry no colour attribute, so it is measured on the rendered pixels
  (:func:`colour_share`): a colour is absent when under one pixel in a hundred of every
  instance's visible mask is of that colour.

Every question is answered with :func:`m2sa_core.inference.absence.absent_answer`, which
names the missing thing's words (``missing``); :func:`m2sa_core.inference.absence.absence_of`
reads them back. As for the present families the last phrasing of each set is held out:
the train split never sees it and val/test use only it; the category kind uses the held-out
phrasing of the very functions the present questions use, so a held-out command is the
same sentence whether its target is there or not, and only the image tells them apart.
The train phrasings of the other kinds carry no clause of a present held-out phrasing
(checked at import), so that no present held-out command reads like an absent one.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
from m2sa_core.data.mmr import MISSING_KINDS
from m2sa_core.data.synthetic.knowledge import _pick
from m2sa_core.data.synthetic.questions import (
    AMODAL_PHRASINGS,
    Function,
    MIXED_PHRASINGS,
    MULTI_FUNCTIONS,
    OBJECT_FUNCTIONS,
    PART_FUNCTIONS,
    phrasings_for,
    Question,
    VISIBLE_PHRASINGS,
)
from m2sa_core.data.synthetic.scene import Scene, SceneObject
from m2sa_core.data.synthetic.shapes import CATEGORIES
from m2sa_core.data.synthetic.wording.lexicon import held_out_clauses
from m2sa_core.inference.absence import absent_answer, ABSENT_ANSWERS
from m2sa_core.labels import make_label
import numpy as np

FAMILY = "absent"
KINDS = MISSING_KINDS  # the reader's: category, part, instance, property
# How a command is put, which decides its test split as granularity does for the present
# families: an object, a part, or an object and its part (mixed).
FORMS = ("object", "part", "mixed")
TEST_SPLIT = {"object": "test_obj_only", "part": "test_part_only", "mixed": "test_mixed"}

# Parts an object may be asked for and lack. "body", "bottom" and "base" are left out:
# every thing has a body and a bottom, and a TV's stand or a laptop's lower half is a base.
ASKABLE_PARTS = ("screen", "button", "handle", "cap", "label", "blade", "keyboard", "touchpad", "shade", "pipe")
# Parts a category has under another name: a mouse's and a laptop's keys are buttons, a
# remote's buttons are a keypad.
LOOKS_LIKE: dict[str, tuple[str, ...]] = {
    "mouse_(computer_equipment)": ("button",),
    "laptop_computer": ("button",),
    "remote_control": ("keyboard", "touchpad"),
}

PART_PHRASINGS: tuple[str, ...] = (
    "Show me the {part} of the {name}.",
    "Where is the {part} on the {name}?",
    "Find the {name}'s {part}.",
    "Point at the {part} of the {name}.",
    "Mark the {part} that belongs to the {name}.",
)
ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth")
INSTANCE_PHRASINGS: tuple[str, ...] = (
    "Show me the {ordinal} {name}.",
    "Where is the {ordinal} {name}?",
    "Hand me the {ordinal} {name}.",
    "Which one is the {ordinal} {name}?",
    "Find the {ordinal} {name}, counting from the left.",
)
PROPERTY_PHRASINGS: tuple[str, ...] = (
    "Show me the {colour} {name}.",
    "Where is the {colour} {name}?",
    "Hand me the {colour} {name}.",
    "Which thing here is the {colour} {name}?",
    "I am looking for the {colour} {name}.",
)

# Colour names and how a pixel is of that colour: (hue in degrees, or None for white and
# black). A chromatic pixel has saturation >= 100 and value >= 80 (of 255): darker or
# greyer pixels have no reliable hue under the renderer's noise.
COLOURS: dict[str, float | None] = {
    "red": 0.0, "orange": 30.0, "yellow": 60.0, "green": 120.0, "blue": 225.0, "purple": 285.0,
    "white": None, "black": None,
}
HUE_WINDOW = 35.0  # degrees either side of a colour's hue
ABSENT_SHARE = 0.01  # under this share of an instance's visible pixels: the instance is not of that colour

# Present held-out clauses that no absent train phrasing may carry.
PRESENT_HELD_OUT_CLAUSES = held_out_clauses(
    [phrasings_for(fn.phrasings, held_out=True)[0] for fn in OBJECT_FUNCTIONS + PART_FUNCTIONS + MULTI_FUNCTIONS]
    + [phrasings_for(p, held_out=True)[0] for p in (MIXED_PHRASINGS, AMODAL_PHRASINGS, VISIBLE_PHRASINGS)])
OWN_PHRASINGS = (PART_PHRASINGS, INSTANCE_PHRASINGS, PROPERTY_PHRASINGS)
for _phrasings in OWN_PHRASINGS:
    for _phrasing in phrasings_for(_phrasings, held_out=False):
        _clash = [c for c in PRESENT_HELD_OUT_CLAUSES if c in _phrasing.lower()]
        if _clash:
            raise AssertionError(f"absent train phrasing {_phrasing!r} carries present held-out clauses {_clash}")


@dataclass(frozen=True)
class Missing:
    """What an absent command asks for that is not there: its kind and the words the answer names."""

    kind: str
    words: str

    def as_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "words": self.words}


def spoken_part(part: str) -> str:
    """Return how a person says a part's name: "left button" for "left_button"."""
    return part.replace("_", " ")


def colour_share(image: np.ndarray, obj: SceneObject, colour: str, window: float = HUE_WINDOW) -> float:
    """
    Return the share of ``obj``'s visible pixels that are of ``colour`` (a key of :data:`COLOURS`).

    A chromatic pixel is of the colour within ``window`` degrees of its hue: wide to call a
    colour absent, narrow to call it an object's own.
    """
    return mask_colour_share(image, obj.visible, colour, window)


def mask_colour_share(image: np.ndarray, mask: np.ndarray, colour: str, window: float = HUE_WINDOW) -> float:
    """:func:`colour_share` of any bool ``mask``: a model's mask is scored as the world's objects are."""
    pixels = image[mask]
    if not len(pixels):
        return 0.0
    hsv = cv2.cvtColor(pixels.reshape(-1, 1, 3), cv2.COLOR_RGB2HSV).reshape(-1, 3).astype(np.float32)
    hue, sat, val = hsv[:, 0] * 2.0, hsv[:, 1], hsv[:, 2]
    centre = COLOURS[colour]
    if colour == "white":
        of_colour = (sat < 50) & (val > 180)
    elif colour == "black":
        of_colour = val < 70
    else:
        distance = np.abs((hue - centre + 180.0) % 360.0 - 180.0)
        of_colour = (sat >= 100) & (val >= 80) & (distance <= window)
    return float(of_colour.mean())


def absent_colours(scene: Scene, category: str) -> list[str]:
    """Colours no instance of ``category`` in ``scene`` shows (empty when the category is not there)."""
    instances = scene.instances(category)
    if not instances:
        return []
    return [c for c in COLOURS if all(colour_share(scene.image, o, c) < ABSENT_SHARE for o in instances)]


def lacking_parts(category: str) -> list[str]:
    """Parts of other categories that ``category`` neither has nor has under another name."""
    have = set(CATEGORIES[category].parts) | set(LOOKS_LIKE.get(category, ()))
    return [p for p in ASKABLE_PARTS if p not in have]


def _sentence(text: str) -> str:
    return text[0].upper() + text[1:]


class AbsentAsker:
    """Draws absent commands about one scene from one random stream, for one split."""

    def __init__(self, scene: Scene, rng: np.random.Generator, held_out: bool) -> None:
        self.scene = scene
        self.rng = rng
        self.held_out = held_out

    def _phrasing(self, phrasings: tuple[str, ...]) -> str:
        return _pick(self.rng, phrasings_for(phrasings, self.held_out))

    def _answer(self, words: str) -> str:
        # The last sentence is held out of the train split.
        index = len(ABSENT_ANSWERS) - 1 if self.held_out else int(self.rng.integers(len(ABSENT_ANSWERS) - 1))
        return absent_answer(words, index)

    def _question(self, kind: str, form: str, text: str, words: str) -> Question:
        return Question(FAMILY, _sentence(text), self._answer(words), [], "modal", form,
                        missing=Missing(kind, words).as_dict())

    def _absent_categories(self) -> list[str]:
        present = set(self.scene.categories())
        return [c for c in CATEGORIES if c not in present]

    def category(self, form: str) -> Question | None:
        """
        Ask for a category the scene does not hold, with one of its functions' phrasings.

        ``form`` "object": an object function ("What would I use to slice bread?"); "part":
        a part function ("What would you press to switch the TV on?"); "mixed": the mixed
        family's phrasing for one of its part functions. The words are the spoken name the
        question uses, or the category's first spoken name when the question uses none.
        """
        absent = self._absent_categories()
        if not absent:
            return None
        category = _pick(self.rng, tuple(absent))
        name = _pick(self.rng, CATEGORIES[category].spoken)
        functions: tuple[Function, ...] = OBJECT_FUNCTIONS if form == "object" else PART_FUNCTIONS
        mine = tuple(fn for fn in functions if fn.targets[0][0] == category)
        fn = mine[int(self.rng.integers(len(mine)))]
        if form == "mixed":
            text = self._phrasing(MIXED_PHRASINGS).replace("{action}", fn.action)
        else:
            text = self._phrasing(fn.phrasings)
        words = name if "{name}" in text else CATEGORIES[category].spoken[0]
        return self._question("category", form, text.replace("{name}", name), words)

    def part(self) -> Question | None:
        """
        Ask for a part the named object lacks.

        One of several instances is named by its place from the left ("the second mug"),
        as the labels number them, so the words name the one object that lacks the part.
        """
        categories = [c for c in self.scene.categories() if lacking_parts(c)]
        if not categories:
            return None
        category = _pick(self.rng, tuple(categories))
        part = _pick(self.rng, tuple(lacking_parts(category)))
        instances = self.scene.instances(category)
        obj = instances[int(self.rng.integers(len(instances)))]
        name = _pick(self.rng, CATEGORIES[category].spoken)
        if len(instances) > 1:
            name = f"{ORDINALS[obj.instance - 1]} {name}"
        text = self._phrasing(PART_PHRASINGS).replace("{part}", spoken_part(part)).replace("{name}", name)
        return self._question("part", "part", text, make_label(category, obj.instance, part))

    def instance(self) -> Question | None:
        """Ask for one or two instances beyond those the scene holds of a category in view."""
        category = _pick(self.rng, tuple(self.scene.categories()))
        count = len(self.scene.instances(category))
        beyond = min(count + 1 + int(self.rng.integers(2)), len(ORDINALS))
        if beyond <= count:
            return None
        ordinal = ORDINALS[beyond - 1]
        name = _pick(self.rng, CATEGORIES[category].spoken)
        text = self._phrasing(INSTANCE_PHRASINGS).replace("{ordinal}", ordinal).replace("{name}", name)
        return self._question("instance", "object", text, f"{ordinal} {name}")

    def colour(self) -> Question | None:
        """Ask for a colour no instance of a category in view shows."""
        options = [(c, colour) for c in self.scene.categories() for colour in absent_colours(self.scene, c)]
        if not options:
            return None
        category, colour = options[int(self.rng.integers(len(options)))]
        name = _pick(self.rng, CATEGORIES[category].spoken)
        text = self._phrasing(PROPERTY_PHRASINGS).replace("{colour}", colour).replace("{name}", name)
        return self._question("property", "object", text, f"{colour} {name}")

    def ask(self, kind: str, form: str = "") -> Question | None:
        """One command of ``kind`` (a category in ``form``, drawn when ""), or None when the scene allows none."""
        if kind == "category":
            return self.category(form or _pick(self.rng, FORMS))
        return {"part": self.part, "instance": self.instance, "property": self.colour}[kind]()


# What the train split asks of every image: each kind, the category in each of its forms.
TRAIN_ASKS: tuple[tuple[str, str], ...] = (
    ("category", "object"), ("category", "part"), ("category", "mixed"), ("part", "part"),
    ("instance", "object"), ("property", "object"),
)
# Val asks one of these per image, the first the scene allows from the image's turn on
# (a category in a form drawn at random).
VAL_ASKS: tuple[tuple[str, str], ...] = (("category", ""), ("part", "part"), ("instance", "object"),
                                         ("property", "object"))
# Each test file's asks, in the order the image's turn starts from.
TEST_ASKS: dict[str, tuple[tuple[str, str], ...]] = {
    "test_obj_only": (("category", "object"), ("instance", "object"), ("property", "object")),
    "test_part_only": (("part", "part"),),
    "test_mixed": (("category", "mixed"),),
}


def _in_turn(asker: AbsentAsker, asks: tuple[tuple[str, str], ...], turn: int, n: int) -> list[Question]:
    """Return up to ``n`` commands, one per ask from ``asks[turn % len(asks)]`` on, skipping those ruled out."""
    out = []
    for k in range(len(asks)):
        if len(out) == n:
            break
        q = asker.ask(*asks[(turn + k) % len(asks)])
        if q is not None:
            out.append(q)
    return out


def absent_questions(scene: Scene, rng: np.random.Generator, split: str, index: int,
                     per_image: int = 1) -> dict[str, list[Question]]:
    """
    Return the absent commands of one image, by the MMR file they go to.

    Train: ``per_image`` rounds of :data:`TRAIN_ASKS` (every kind, the category in each
    form), so a training mixture can draw them at any rate. Val: ``per_image`` commands
    taken in turn from :data:`VAL_ASKS`, starting at the image's index so that a few images
    hold every kind. Test: ``per_image`` per file of :data:`TEST_ASKS`. Val and test use
    the held-out phrasings and answer sentence only.
    """
    if per_image <= 0:
        return {}
    asker = AbsentAsker(scene, rng, held_out=split != "train")
    if split == "train":
        qs = [q for _ in range(per_image) for kind, form in TRAIN_ASKS if (q := asker.ask(kind, form)) is not None]
        return {"train": qs} if qs else {}
    if split == "val":
        qs = _in_turn(asker, VAL_ASKS, index, per_image)
        return {"val": qs} if qs else {}
    out = {}
    for name, asks in TEST_ASKS.items():
        qs = _in_turn(asker, asks, index, per_image)
        if qs:
            out[name] = qs
    return out


def absent_texts(max_instances: int = 4) -> list[str]:
    """
    Return every absent command and answer the world can write (labels up to ``max_instances``).

    For the tokenizer's corpus (:func:`m2sa_core.data.synthetic.text_corpus`): held-out
    phrasings and the held-out answer sentence included, and the same phrasings about the
    category's own parts (:mod:`~m2sa_core.data.synthetic.wording.absent_twins`). The
    category kind's commands are the functions' and the mixed family's phrasings, which
    the corpus holds already.
    """
    texts: list[str] = []
    for category, spec in CATEGORIES.items():
        lacking = lacking_parts(category)
        labels = [make_label(category, k, part) for k in range(1, max_instances + 1) for part in lacking]
        for name in spec.spoken:
            words = [name]
            for part in dict.fromkeys(lacking + list(spec.parts)):  # its own parts: wording.absent_twins
                for named in [name] + [f"{ordinal} {name}" for ordinal in ORDINALS[:max_instances]]:
                    texts.extend(p.replace("{part}", spoken_part(part)).replace("{name}", named)
                                 for p in PART_PHRASINGS)
            for ordinal in ORDINALS:  # "first": wording.absent_twins
                texts.extend(p.replace("{ordinal}", ordinal).replace("{name}", name) for p in INSTANCE_PHRASINGS)
                words.append(f"{ordinal} {name}")
            for colour in COLOURS:
                texts.extend(p.replace("{colour}", colour).replace("{name}", name) for p in PROPERTY_PHRASINGS)
                words.append(f"{colour} {name}")
            texts.extend(absent_answer(w, i) for w in words for i in range(len(ABSENT_ANSWERS)))
        texts.extend(absent_answer(label, i) for label in labels for i in range(len(ABSENT_ANSWERS)))
    return texts
