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
World knowledge about the synthetic world's things, asked and answered about an image.

A real LLaVA knows from its text pretraining that cocoa is drunk from a mug and that a
mouse moves the pointer; M2SA's reasoning leans on that knowledge. The tiny model's
language model starts from nothing, and the functional questions alone pair each
object with only the few words of its train paraphrases, so a held-out paraphrase
("Where could I serve a cup of cocoa?") names things it has never linked to anything.

This module is the tiny model's stand-in for that knowledge: for every category, part
and group of the world, a broad list of words and phrases people associate with it
(uses, contents, actions, places), and short facts using them. They describe the world,
not the questions: the question templates below are generic ("Which thing here goes with
cocoa?"), never a functional question's sentence. Entries are grounded in the image
(the answer names the instance, "the mug_1"), so stage 2 links the words to what is in
view, the way stage 3 will have to. Written for the train images only, twice: in words
(``knowledge_train.json``, the ``image_conversations`` layout, for stage 2) and with
masks (``knowledge_seg_train.json``, the MMR layout, for stage 3), where questions for
an object together with one of its parts join them.
"""

from __future__ import annotations

from typing import Any

from m2sa_core.data.synthetic.pretraining import text_answer
from m2sa_core.data.synthetic.questions import join_targets, MAX_TARGETS, Question
from m2sa_core.data.synthetic.scene import Scene
from m2sa_core.data.synthetic.shapes import CATEGORIES
from m2sa_core.labels import make_label
import numpy as np

OBJECT_WORDS: dict[str, tuple[str, ...]] = {
    "television_set": ("watching films", "a movie", "a series", "the evening news", "TV programmes", "a show",
                       "the football match", "a documentary", "cartoons", "sitting in front of a screen",
                       "the living room", "broadcasts", "a device for watching", "channels"),
    "remote_control": ("changing the channel", "the volume", "zapping", "the sofa", "batteries",
                       "infrared signals", "pointing at the TV", "switching programmes", "muting the sound",
                       "controlling from a distance", "not getting up", "buttons in the hand"),
    "mug": ("coffee", "tea", "hot chocolate", "cocoa", "a latte", "breakfast", "the morning", "a warm drink",
            "serving a hot drink", "a cup", "pouring hot coffee", "sipping tea", "ceramic", "herbal tea"),
    "bottle": ("water", "juice", "a hike", "staying hydrated", "a screw cap", "refilling", "a cold drink",
               "pouring into a glass", "lemonade", "a picnic", "thirst", "carrying a drink", "plastic"),
    "knife": ("slicing bread", "cutting", "vegetables", "an apple", "spreading butter", "chopping onions",
              "something sharp", "a tool for the kitchen", "carving", "a blade", "peeling fruit", "dicing"),
    "laptop_computer": ("writing an email", "slides for a meeting", "browsing the internet", "working in a cafe",
                        "homework", "documents", "typing", "studying", "a video call", "programming",
                        "a device to open and work on", "the web", "spreadsheets"),
    "lamp": ("light", "reading at night", "a dark room", "the desk", "the evening", "brightness", "a book",
             "a bulb", "seeing better", "lighting up the page", "switching on when it is dark", "illumination"),
    "pan_(for_cooking)": ("frying an egg", "pancakes", "the stove", "cooking vegetables", "searing a steak",
                          "an omelette", "oil", "a utensil for frying", "sauteing", "dinner on the hob",
                          "browning meat", "a hot kitchen"),
    "mouse_(computer_equipment)": ("the cursor", "clicking", "selecting things on a computer",
                                   "sliding on the desk", "an alternative to a touchpad", "the pointer",
                                   "the monitor", "a gadget next to a computer", "scrolling", "dragging files",
                                   "steering on screen", "double-clicking"),
}

PART_WORDS: dict[tuple[str, str], tuple[str, ...]] = {
    ("television_set", "button"): ("switching on", "turning it on", "powering up", "starting it", "pressing",
                                   "pushing", "switching off"),
    ("television_set", "screen"): ("the picture", "moving images", "the programme", "lighting up",
                                   "the film", "watching", "where the show appears"),
    ("remote_control", "button"): ("the channel", "the volume", "pushing with the thumb", "switching programmes",
                                   "pressing", "little bits to push"),
    ("remote_control", "body"): ("the palm", "holding", "gripping", "the hand", "sitting in the hand",
                                 "zapping while holding"),
    ("mug", "handle"): ("gripping", "not burning the fingers", "carrying", "staying cool", "picking it up",
                        "the fingers", "holding a hot drink"),
    ("mug", "body"): ("the coffee", "the tea", "milk", "the drink", "the liquid", "filling", "keeping the drink"),
    ("bottle", "cap"): ("twisting", "unscrewing", "opening", "keeping it closed", "sealing", "coming off first"),
    ("bottle", "label"): ("reading", "the brand", "printed information", "the contents", "the ingredients",
                          "what is written"),
    ("bottle", "body"): ("pouring", "grabbing", "the water", "wrapping the hand around", "squeezing",
                         "holding to pour"),
    ("knife", "blade"): ("cutting", "touching the bread", "being sharp", "keeping away from fingers",
                         "slicing a tomato", "the cutting edge"),
    ("knife", "handle"): ("holding safely", "gripping", "not cutting myself", "the hand", "being safe to grab",
                          "picking it up"),
    ("laptop_computer", "keyboard"): ("typing", "writing an email", "the keys", "a password", "keystrokes",
                                      "letters", "entering text"),
    ("laptop_computer", "touchpad"): ("the cursor", "replacing a mouse", "tapping", "clicking without a mouse",
                                      "the pointer", "swiping", "scrolling"),
    ("laptop_computer", "screen"): ("documents", "a video call", "looking while working", "windows",
                                    "a web page", "displaying"),
    ("lamp", "shade"): ("where the light comes out", "glowing", "softening the bulb's light", "tilting",
                        "aiming the light", "covering the bulb"),
    ("lamp", "base"): ("standing on the desk", "not tipping over", "touching the table", "being heavy",
                       "the bottom", "staying upright"),
    ("lamp", "pipe"): ("connecting base and shade", "holding the shade up", "being thin", "running upward",
                       "carrying the cable", "the stem"),
    ("pan_(for_cooking)", "handle"): ("holding while cooking", "flipping a pancake", "lifting off the stove",
                                      "staying out of the heat", "taking it", "moving it"),
    ("pan_(for_cooking)", "bottom"): ("the eggs", "getting hot", "the food", "oiling", "frying",
                                      "sizzling onions"),
    ("mouse_(computer_equipment)", "left_button"): ("opening a file", "selecting an icon", "double-clicking",
                                                    "the main click", "following a link"),
    ("mouse_(computer_equipment)", "right_button"): ("the context menu", "more options", "right-clicking",
                                                     "copy and paste", "the extra menu"),
    ("mouse_(computer_equipment)", "body"): ("the palm", "moving it", "pushing across the desk",
                                             "the hand lying on it", "dragging", "grabbing"),
}

# Groups of targets and the words that fit all of them; asked when two or more categories
# of a group are in view.
GROUP_WORDS: tuple[tuple[tuple[tuple[str, str], ...], tuple[str, ...]], ...] = (
    ((("mug", ""), ("bottle", "")), ("drinking", "quenching thirst", "holding drinks", "beverages",
                                     "filling with water", "a sip")),
    ((("knife", ""), ("pan_(for_cooking)", "")), ("the kitchen", "a chef", "cooking dinner", "preparing food",
                                                  "a stir-fry", "a recipe")),
    ((("television_set", ""), ("remote_control", ""), ("laptop_computer", ""), ("mouse_(computer_equipment)", ""),
      ("lamp", "")), ("electricity", "a power cut", "plugs and batteries", "going dark without power",
                      "electrical devices", "the power switch")),
    ((("television_set", "screen"), ("laptop_computer", "screen")), ("pictures", "videos", "displays",
                                                                     "images", "lighting up with pictures")),
    ((("mug", "handle"), ("knife", "handle"), ("pan_(for_cooking)", "handle")), ("holding", "gripping",
                                                                                 "the hand", "being made for hands")),
    ((("television_set", "button"), ("remote_control", "button"), ("mouse_(computer_equipment)", "left_button"),
      ("mouse_(computer_equipment)", "right_button")), ("pressing", "pushing with a finger", "clicking",
                                                        "being pressed")),
)

# The words of the R2SM intents: what "complete" and "visible" mean.
VIEW_WORDS: dict[str, tuple[str, ...]] = {
    "hidden": ("hidden", "occluded", "covered", "obscured", "behind something", "out of view"),
    "visible": ("visible", "in view", "as it appears", "what can be seen", "not hidden", "in sight"),
    "complete": ("whole", "complete", "entire", "full shape", "all of it", "including the hidden part"),
}

OBJECT_QUESTIONS = ("Which thing here goes with {kw}?", "What here has to do with {kw}?",
                    "Which object here do you think of for {kw}?", "Name what in this picture fits {kw}.")
PART_QUESTIONS = ("Which part of the {label} goes with {kw}?", "What part of the {label} has to do with {kw}?",
                  "Name the part of the {label} that fits {kw}.")
GROUP_QUESTIONS = ("Which things here go with {kw}?", "What here has to do with {kw}?")
# An object together with one of its parts, joined the many ways people do, and never by
# the word "part": the functional mixed questions of the train split all say "part", so
# without these the model ties a two-target answer to that one word.
OBJECT_AND_PART_QUESTIONS = ("Show me the {name} and what on it goes with {kw}.",
                             "Find the {name}, plus the bit of it for {kw}.",
                             "Mark the {name} together with the spot for {kw}.",
                             "I'd like the {name} as well as whatever on it fits {kw}.",
                             "Outline the {name}, and the piece of it that has to do with {kw}.",
                             "Where is the {name}? And on it, what is for {kw}?")
FACT_QUESTIONS = ("What is the {label} for?", "Tell me about the {label}.", "What do people do with the {label}?")
VIEW_QUESTIONS = ("What does {kw} mean?", "Explain the word {kw}.")
VIEW_MEANINGS = {"hidden": "Something in front covers it, so part of it cannot be seen.",
                 "visible": "Only the part that can be seen, without what is covered.",
                 "complete": "The entire shape, the covered part included."}


def _pick(rng: np.random.Generator, options: tuple[str, ...]) -> str:
    return options[int(rng.integers(len(options)))]


def _answer(targets_text: str) -> str:
    """Return "The mug_1 {seg}." from "the mug_1 {seg}"."""
    return _capital(targets_text) + "."


def _capital(text: str) -> str:
    return text[0].upper() + text[1:]


def _fact(rng: np.random.Generator, category: str, label: str) -> str:
    words = OBJECT_WORDS[category]
    a, b = rng.choice(len(words), size=2, replace=False)
    return f"The {label} is a {CATEGORIES[category].spoken[0]}. It goes with {words[int(a)]} and {words[int(b)]}."


def _indices(scene: Scene, category: str) -> list[int]:
    """Object indices of every instance of ``category`` in view."""
    return [i for i, o in enumerate(scene.objects) if o.category == category]


def _question(scene: Scene, text: str, targets: list[tuple[int, str]]) -> Question:
    """Return a knowledge question whose answer names ``targets``, one ``{seg}`` each."""
    labels = [make_label(scene.objects[i].category, scene.objects[i].instance, p) for i, p in targets]
    return Question("knowledge", text, _answer(join_targets(labels)), targets, "modal", "knowledge")


def knowledge_questions(scene: Scene, rng: np.random.Generator) -> list[Question | dict[str, str]]:
    """
    Questions tying the world's words to what ``scene`` shows, in asking order.

    A question whose answer names things in view is a :class:`Question` (one ``{seg}``
    per named target, as every M2SA answer); a fact is a question/answer dict in words.
    Stage 2 reads both as text (:func:`knowledge_entry`); stage 3 reads the first with
    their masks (``knowledge_seg_train.json``), so that the words are tied to
    masks in the answer style of segmentation, not to a text-only listing.
    """
    items: list[Question | dict[str, str]] = []

    def add(question: str, targets: list[tuple[int, str]]) -> None:
        items.append(_question(scene, question, targets))

    present = scene.categories()
    for category in present:
        kw = _pick(rng, OBJECT_WORDS[category])
        same = _indices(scene, category)
        add(_pick(rng, OBJECT_QUESTIONS).format(kw=kw), [(i, "") for i in same])
        owner = same[int(rng.integers(len(same)))]
        obj = scene.objects[owner]
        part = _pick(rng, CATEGORIES[category].parts)
        # Half the time by its spoken name, as the functional questions say it ("the TV").
        named = (make_label(obj.category, obj.instance) if rng.random() < 0.5
                 else _pick(rng, CATEGORIES[category].spoken))
        add(_pick(rng, PART_QUESTIONS).format(label=named, kw=_pick(rng, PART_WORDS[category, part])),
            [(owner, part)])
    category = _pick(rng, tuple(present))
    label = _pick(rng, tuple(make_label(category, o.instance) for o in scene.instances(category)))
    items.append({"question": _pick(rng, FACT_QUESTIONS).format(label=label), "answer": _fact(rng, category, label)})
    for members, words in GROUP_WORDS:
        if len({cat for cat, _ in members if cat in present}) >= 2:
            targets = [(i, part) for cat, part in members if cat in present for i in _indices(scene, cat)]
            add(_pick(rng, GROUP_QUESTIONS).format(kw=_pick(rng, words)), targets)
    meaning = _pick(rng, tuple(VIEW_WORDS))
    items.append({"question": _pick(rng, VIEW_QUESTIONS).format(kw=f'"{_pick(rng, VIEW_WORDS[meaning])}"'),
                  "answer": VIEW_MEANINGS[meaning]})
    return items


def object_and_part_questions(scene: Scene, rng: np.random.Generator) -> list[Question]:
    """
    One question per category in view asking for an object and one of its parts.

    Targets are laid out as the functional mixed questions lay them out: named by
    instance ("the mug_1"), that object and its part; named by category ("the mug"),
    every instance of it, each followed by its part. Written with masks only
    (``knowledge_seg_train.json``, stage 3): they teach the answer's shape, not words.
    """
    questions = []
    for category in scene.categories():
        same = _indices(scene, category)
        part = _pick(rng, CATEGORIES[category].parts)
        if rng.random() < 0.5:
            owner = same[int(rng.integers(len(same)))]
            name, owners = make_label(category, scene.objects[owner].instance), [owner]
        else:
            name, owners = _pick(rng, CATEGORIES[category].spoken), same
        targets = [t for i in owners for t in ((i, ""), (i, part))][:MAX_TARGETS]
        question = _pick(rng, OBJECT_AND_PART_QUESTIONS).format(name=name, kw=_pick(rng, PART_WORDS[category, part]))
        questions.append(_question(scene, question, targets))
    return questions


def knowledge_entry(scene: Scene, image_id: int, file_name: str,
                    items: list[Question | dict[str, str]]) -> dict[str, Any]:
    """Return the ``image_conversations`` entry of one image: every knowledge item in words."""
    h, w = scene.image.shape[:2]
    words = [{"question": it.question, "answer": text_answer(it.answer)} if isinstance(it, Question) else it
             for it in items]
    return {"image_id": image_id, "file_name": file_name, "height": h, "width": w, "conversations": words}
