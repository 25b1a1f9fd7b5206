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
Question families of the synthetic world and the answers that ground them.

Functional questions in the style of MMR ("what would you press to switch the TV on?")
with several paraphrases each. The last paraphrase of every function is held out: the
train split never sees it, val and test use only it, so evaluation measures whether the
model understood the function rather than memorised the sentence. Answers follow the
project's convention: every target is named right before its ``{seg}``
("the television_set_1's button {seg}").

Families: ``object`` (one category, object level), ``part`` (one category, one part),
``multi`` (several categories, 2-6 targets), ``mixed`` (objects and their parts), and
the R2SM-style ``amodal`` (complete masks, hidden parts included) and ``visible``.
Commands about things the scene does not hold (family ``absent``) are drawn in
:mod:`m2sa_core.data.synthetic.absent`.
"""

from __future__ import annotations

from dataclasses import dataclass

from m2sa_core.data.synthetic.scene import Scene
from m2sa_core.data.synthetic.shapes import CATEGORIES
from m2sa_core.labels import make_label
import numpy as np

MAX_TARGETS = 6
FAMILIES = ("object", "part", "multi", "mixed", "amodal", "visible")


@dataclass(frozen=True)
class Function:
    """
    A use of one or more categories: which targets serve it and how to ask about it.

    ``targets`` lists (category, part) pairs, part "" for object level. ``{name}`` in a
    phrasing is replaced by a spoken name of the (single) category.
    """

    key: str
    family: str
    targets: tuple[tuple[str, str], ...]
    phrasings: tuple[str, ...]  # the last one is held out for val/test
    answers: tuple[str, ...]  # "{targets}" is replaced by the named targets
    action: str = ""  # for mixed questions: "press to switch it on"


def _part(key: str, cat: str, part: str, action: str, phrasings, answers) -> Function:
    return Function(key, "part", ((cat, part),), tuple(phrasings), tuple(answers), action)


PART_FUNCTIONS: tuple[Function, ...] = (
    _part("tv_on", "television_set", "button", "press to switch it on", (
        "What would you press to switch the {name} on?",
        "Which part of the {name} do I push to turn it on?",
        "I want to watch the news. What should I press on the {name}?",
        "The {name} is off. Where do I press to start it?",
        "How do I power up the {name}?"), ("You can press {targets}.", "Press {targets} to turn it on.")),
    _part("tv_watch", "television_set", "screen", "look at to see the picture", (
        "Where does the {name} show the picture?",
        "Which part of the {name} should I look at during a film?",
        "Where on the {name} will the show appear?",
        "What part of the {name} lights up with the programme?",
        "Where do the moving images of the {name} appear?"), ("Look at {targets}.", "The picture is on {targets}.")),
    _part("remote_press", "remote_control", "button", "press to change the channel", (
        "What do I press on the {name} to change the channel?",
        "Which part of the {name} do my thumbs push?",
        "Where on the {name} do I press to turn up the volume?",
        "I want another channel. What should I press on the {name}?",
        "Which bits of the {name} switch programmes when pushed?"), ("You can press {targets}.", "Press {targets}.")),
    _part("remote_hold", "remote_control", "body", "hold in my hand", (
        "Which part of the {name} rests in my palm?",
        "Where do I hold the {name}?",
        "What part of the {name} do I grip while zapping?",
        "Where should my hand go on the {name}?",
        "Which part of the {name} sits in the hand while using it?"), ("Hold {targets}.", "You can hold {targets}.")),
    _part("mug_hold", "mug", "handle", "hold so I do not burn my fingers", (
        "Where should I grip the {name} so I don't burn my fingers?",
        "Which part of the {name} do I hold when the coffee is hot?",
        "How do I pick up the {name} of hot tea safely?",
        "Where do my fingers go on the {name}?",
        "Which part of the {name} stays cool enough to carry it?"), ("Hold {targets}.", "You can grip {targets}.")),
    _part("mug_fill", "mug", "body", "pour the coffee into", (
        "Which part of the {name} holds the coffee?",
        "Where does the tea go in the {name}?",
        "What part of the {name} would I fill with milk?",
        "Which part of the {name} contains the drink?",
        "Where is the liquid kept in the {name}?"), ("It goes into {targets}.", "Fill {targets}.")),
    _part("bottle_open", "bottle", "cap", "twist to open it", (
        "What do I twist to open the {name}?",
        "Which part of the {name} comes off before drinking?",
        "I am thirsty. What should I unscrew on the {name}?",
        "What keeps the {name} closed?",
        "Which part of the {name} seals the drink inside?"), ("Twist {targets}.", "You can unscrew {targets}.")),
    _part("bottle_read", "bottle", "label", "read to know what is inside", (
        "Where can I read what is inside the {name}?",
        "Which part of the {name} shows the brand?",
        "Where is the printed information on the {name}?",
        "What part of the {name} tells me the contents?",
        "Where would the ingredients of the {name} be written?"), ("Read {targets}.", "It is written on {targets}.")),
    _part("bottle_hold", "bottle", "body", "hold to pour", (
        "Which part of the {name} do I hold to pour?",
        "Where do I grab the {name}?",
        "What part of the {name} holds the water?",
        "Where should my hand wrap around the {name}?",
        "Which part of the {name} do I squeeze while pouring?"), ("Hold {targets}.", "You can grab {targets}.")),
    _part("knife_cut", "knife", "blade", "cut with", (
        "Which part of the {name} does the cutting?",
        "What part of the {name} should touch the bread?",
        "Which part of the {name} is sharp?",
        "What part of the {name} must I keep away from my fingers?",
        "Which part of the {name} slices the tomato?"), ("It cuts with {targets}.", "Use {targets}.")),
    _part("knife_hold", "knife", "handle", "hold safely", (
        "Where should I hold the {name} safely?",
        "Which part of the {name} do I grip?",
        "How do I pick up the {name} without cutting myself?",
        "Where does my hand go on the {name}?",
        "Which part of the {name} is safe to grab?"), ("Hold {targets}.", "You can grip {targets}.")),
    _part("laptop_type", "laptop_computer", "keyboard", "type on", (
        "Where do I type on the {name}?",
        "Which part of the {name} do I use to write an email?",
        "What part of the {name} has the keys?",
        "I want to enter my password. What do I press on the {name}?",
        "Which part of the {name} turns keystrokes into letters?"), ("Type on {targets}.", "You can use {targets}.")),
    _part("laptop_point", "laptop_computer", "touchpad", "slide my finger on", (
        "What do I slide my finger on to move the cursor of the {name}?",
        "Which part of the {name} replaces a mouse?",
        "Where do I tap on the {name} to click without a mouse?",
        "Which part of the {name} moves the pointer?",
        "Where would I swipe to scroll on the {name}?"), ("Use {targets}.", "Slide your finger on {targets}.")),
    _part("laptop_look", "laptop_computer", "screen", "look at while working", (
        "Where does the {name} show my documents?",
        "Which part of the {name} displays the video call?",
        "What part of the {name} should I look at while working?",
        "Where do the windows appear on the {name}?",
        "Which part of the {name} shows the web page?"), ("Look at {targets}.", "It is shown on {targets}.")),
    _part("lamp_light", "lamp", "shade", "see the light come from", (
        "Where does the light of the {name} come out?",
        "Which part of the {name} glows when it is on?",
        "Which part of the {name} softens the bulb's light?",
        "What part of the {name} should I tilt to aim the light?",
        "Which part of the {name} covers the bulb?"), ("The light comes from {targets}.", "Look at {targets}.")),
    _part("lamp_base", "lamp", "base", "put on the desk", (
        "Which part of the {name} stands on the desk?",
        "What keeps the {name} from tipping over?",
        "Where does the {name} touch the table?",
        "Which heavy part of the {name} rests at the bottom?",
        "Which part of the {name} keeps it upright?"), ("It stands on {targets}.", "That is {targets}.")),
    _part("lamp_pipe", "lamp", "pipe", "follow from the base to the shade", (
        "Which part of the {name} connects the base and the shade?",
        "What holds the shade of the {name} up?",
        "Which thin part of the {name} runs upward?",
        "What part of the {name} carries the cable to the bulb?",
        "Which part of the {name} is the stem?"), ("It is {targets}.", "That is {targets}.")),
    _part("pan_hold", "pan_(for_cooking)", "handle", "hold while cooking", (
        "Where should I hold the {name} while cooking?",
        "Which part of the {name} do I grab to flip the pancake?",
        "How do I lift the {name} off the stove?",
        "Which part of the {name} stays out of the heat?",
        "Where do I take the {name} to move it?"), ("Hold {targets}.", "You can grab {targets}.")),
    _part("pan_cook", "pan_(for_cooking)", "bottom", "put the food on", (
        "Where do I put the eggs in the {name}?",
        "Which part of the {name} gets hot on the stove?",
        "Where does the food go in the {name}?",
        "Which part of the {name} should I oil before frying?",
        "Where do the onions sizzle in the {name}?"), ("Put it on {targets}.", "Use {targets}.")),
    _part("mouse_click", "mouse_(computer_equipment)", "left_button", "click to open a file", (
        "Which button of the {name} do I click to open a file?",
        "What do I press on the {name} to select an icon?",
        "Where do I double-click on the {name}?",
        "Which part of the {name} does the main click?",
        "Which button of the {name} follows a link?"), ("Click {targets}.", "Press {targets}.")),
    _part("mouse_menu", "mouse_(computer_equipment)", "right_button", "press to open the context menu", (
        "Which button of the {name} opens the context menu?",
        "What do I press on the {name} to see more options?",
        "Where do I right-click on the {name}?",
        "Which part of the {name} brings up the copy and paste menu?",
        "Which button of the {name} shows the extra menu?"), ("Click {targets}.", "Press {targets}.")),
    _part("mouse_hold", "mouse_(computer_equipment)", "body", "rest my palm on", (
        "Which part of the {name} does my palm rest on?",
        "Where do I hold the {name} to move it?",
        "What part of the {name} do I push across the desk?",
        "Where does my hand lie on the {name}?",
        "Which part of the {name} do I grab to drag it?"), ("Hold {targets}.", "Rest your palm on {targets}.")),
)


def _obj(key: str, cat: str, phrasings, answers=("You can use {targets}.", "Try {targets}.")) -> Function:
    return Function(key, "object", ((cat, ""),), tuple(phrasings), tuple(answers))


OBJECT_FUNCTIONS: tuple[Function, ...] = (
    _obj("watch", "television_set", (
        "I want to watch a film. What should I look at?", "What in this room shows TV programmes?",
        "Where would the evening news be on?", "What could I switch on to see the football match?",
        "Which device would I sit in front of to watch a series?")),
    _obj("zap", "remote_control", (
        "What do I use to change the channel from the sofa?", "What controls the TV from a distance?",
        "What could I grab to turn the volume down without getting up?", "Which thing sends signals to the TV?",
        "What would I point at the TV to switch programmes?")),
    _obj("drink_hot", "mug", (
        "What could I pour hot coffee into?", "What would I drink my tea from?",
        "Which thing holds a hot chocolate?", "What can I use for my morning coffee?",
        "Where could I serve a cup of cocoa?")),
    _obj("drink_cold", "bottle", (
        "What holds the water I could drink later?", "What could I take on a hike to stay hydrated?",
        "Which container has a screw cap?", "What could I refill with juice?",
        "Which thing holds a drink that I could pour into a glass?")),
    _obj("cut", "knife", (
        "What would I use to slice bread?", "What can I cut the vegetables with?",
        "Which thing is sharp enough to cut an apple?", "What should I use to spread butter?",
        "Which tool would I need to chop onions?")),
    _obj("work", "laptop_computer", (
        "What could I use to write an email?", "What would I take to a meeting to show slides?",
        "Which thing can I use to browse the internet?", "What could I bring to a cafe to work?",
        "Which device would I open to do my homework?")),
    _obj("light", "lamp", (
        "What would give me light to read at night?", "What can I switch on when the room is dark?",
        "Which thing brightens the desk?", "What could I turn on to see better in the evening?",
        "Which object would light up my book?")),
    _obj("cook", "pan_(for_cooking)", (
        "What would I fry an egg in?", "What do I need to make pancakes?",
        "Which thing goes on the stove?", "What could I cook the vegetables in?",
        "Which utensil would I use to sear a steak?")),
    _obj("point", "mouse_(computer_equipment)", (
        "What do I move around to steer the cursor on a computer?", "What do I click to select things on the computer?",
        "Which thing slides on the desk next to a computer?", "What could I use instead of a touchpad?",
        "Which gadget moves the pointer on the monitor?")),
)


def _multi(key: str, targets, phrasings, answers) -> Function:
    return Function(key, "multi", tuple(targets), tuple(phrasings), tuple(answers))


MULTI_FUNCTIONS: tuple[Function, ...] = (
    _multi("press_all", [("television_set", "button"), ("remote_control", "button"),
                         ("mouse_(computer_equipment)", "left_button"),
                         ("mouse_(computer_equipment)", "right_button")], (
        "Which things here could I press?", "Show me every button I could push.",
        "Point out all the buttons in this scene.", "What can I push with a finger here?",
        "What around here can be pressed?"), ("You can press {targets}.", "These can be pressed: {targets}.")),
    _multi("grab_handles", [("mug", "handle"), ("knife", "handle"), ("pan_(for_cooking)", "handle")], (
        "Where could I grab each of these things by its handle?", "Show me all the handles.",
        "Which parts here are made for holding?", "Where would I hold these things safely?",
        "Which parts are designed for my hand?"), ("You can hold {targets}.", "Grab {targets}.")),
    _multi("screens", [("television_set", "screen"), ("laptop_computer", "screen")], (
        "Where could I watch a video?", "Show me every screen here.",
        "Which parts here display pictures?", "Where can images be shown in this room?",
        "Which surfaces here light up with pictures?"), ("You can watch on {targets}.", "Look at {targets}.")),
    _multi("drinks", [("mug", ""), ("bottle", "")], (
        "What could I drink from?", "Which things here hold drinks?",
        "What could I fill with water?", "Show me the drink containers.",
        "Which objects here would quench my thirst?"), ("You can drink from {targets}.", "Try {targets}.")),
    _multi("kitchen", [("knife", ""), ("pan_(for_cooking)", "")], (
        "Which things would I need to cook dinner?", "What here belongs in the kitchen?",
        "Which utensils are for preparing food?", "What could I use to make a stir-fry?",
        "Which objects would a chef pick up?"), ("You can use {targets}.", "Take {targets}.")),
    _multi("electronics", [("television_set", ""), ("remote_control", ""), ("laptop_computer", ""),
                           ("mouse_(computer_equipment)", ""), ("lamp", "")], (
        "Which objects here use electricity?", "What would stop working in a power cut?",
        "Show me the electrical devices.", "Which things here need batteries or a plug?",
        "Which objects here would go dark without power?"), ("These use power: {targets}.", "{targets}.")),
)

MIXED_PHRASINGS: tuple[str, ...] = (
    "Show me the {name} and the part I would {action}.",
    "Where is the {name}, and which part of it do I {action}?",
    "Find the {name} and the part to {action}.",
    "I need the {name}. Which part would I {action}?",
    "Point out the {name} and also where I {action}.",
)
MIXED_ANSWERS: tuple[str, ...] = ("Here is {targets}.", "You need {targets}.")

AMODAL_PHRASINGS: tuple[str, ...] = (
    "Show me the whole {name}, including what is hidden.",
    "Segment the complete {name}, even the parts covered by other things.",
    "Outline the entire {name} as if nothing were in front of it.",
    "Give me the full shape of the {name}, hidden parts included.",
    "What is the complete outline of the {name}, including the occluded part?",
)
AMODAL_ANSWERS: tuple[str, ...] = ("Here is the whole of {targets}.", "The complete shape is {targets}.")

VISIBLE_PHRASINGS: tuple[str, ...] = (
    "Segment only the visible part of the {name}.",
    "Show me just what can be seen of the {name}.",
    "Mark the part of the {name} that is in view.",
    "Which pixels of the {name} are not hidden?",
    "Outline the {name} as it appears, without the hidden part.",
)
VISIBLE_ANSWERS: tuple[str, ...] = ("Here is what is visible of {targets}.", "The visible part is {targets}.")


@dataclass
class Question:
    """A question about one scene, its answer template and its targets in answer order."""

    family: str
    question: str
    answer: str  # one "{seg}" per target
    targets: list[tuple[int, str]]  # (object index in scene.objects, part or "")
    mask_type: str  # "modal" | "amodal"
    function: str
    # Absent commands only (``absent.py``): {"kind": ..., "words": ...}, with no targets.
    missing: dict[str, str] | None = None


def phrasings_for(phrasings: tuple[str, ...], held_out: bool) -> tuple[str, ...]:
    """Train uses all but the last paraphrase; val/test use only the last."""
    return phrasings[-1:] if held_out else phrasings[:-1]


def join_targets(labels: list[str]) -> str:
    """Return "the a {seg}", "the a {seg} and the b {seg}", "the a {seg}, the b {seg} and the c {seg}"."""
    items = [f"the {lab} {{seg}}" for lab in labels]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _answer(rng: np.random.Generator, templates: tuple[str, ...], labels: list[str]) -> str:
    text = templates[int(rng.integers(len(templates)))].replace("{targets}", join_targets(labels))
    return text[0].upper() + text[1:]


def _targets(scene: Scene, pairs) -> list[tuple[int, str]]:
    out = []
    for cat, part in pairs:
        out.extend((i, part) for i, o in enumerate(scene.objects) if o.category == cat)
    return out


def _labels(scene: Scene, targets: list[tuple[int, str]]) -> list[str]:
    return [make_label(scene.objects[i].category, scene.objects[i].instance, part) for i, part in targets]


def name_instance(question: str, label: str) -> str:
    """Return a view question narrowed to one instance, the way R2SM asks for a single target."""
    return f"{question} I mean the {label}."


VIEW_ANSWERS = {"amodal": AMODAL_ANSWERS, "visible": VISIBLE_ANSWERS}


def named_view_questions(scene: Scene, question: Question, rng: np.random.Generator) -> list[Question]:
    """
    One single-target question per instance of a visible/complete question about several.

    R2SM asks for one instance at a time ("... I mean the bottle_2."); the view family asks
    for every instance of the category, so without these the model has never seen an
    instance named after the question, and answers such a query with every instance.
    """
    if question.family not in VIEW_ANSWERS or len(question.targets) < 2:
        return []
    return [reask_view(question, name_instance(question.question, label), [label], [target], rng)
            for target, label in zip(question.targets, _labels(scene, question.targets))]


def reask_view(question: Question, text: str, labels: list[str], targets: list[tuple[int, str]],
               rng: np.random.Generator) -> Question:
    """
    ``question`` (visible/complete) asked as ``text`` about ``targets``.

    Its mask type kept, the answer drawn afresh for ``labels``.
    """
    return Question(question.family, text, _answer(rng, VIEW_ANSWERS[question.family], labels), targets,
                    question.mask_type, question.function)


def candidate_questions(scene: Scene, rng: np.random.Generator, held_out: bool) -> dict[str, list[Question]]:
    """Every question that fits the scene, grouped by family."""
    out: dict[str, list[Question]] = {f: [] for f in FAMILIES}
    present = set(scene.categories())

    def add(family: str, fn_key: str, phrasing: str, name_cat: str | None, answers, targets, mask_type="modal"):
        if not targets or len(targets) > MAX_TARGETS:
            return
        if name_cat is not None:
            spoken = CATEGORIES[name_cat].spoken
            phrasing = phrasing.replace("{name}", spoken[int(rng.integers(len(spoken)))])
        out[family].append(Question(family, phrasing, _answer(rng, answers, _labels(scene, targets)),
                                    targets, mask_type, fn_key))

    def pick(phrasings: tuple[str, ...]) -> str:
        options = phrasings_for(phrasings, held_out)
        return options[int(rng.integers(len(options)))]

    for fn in OBJECT_FUNCTIONS + PART_FUNCTIONS:
        cat = fn.targets[0][0]
        if cat in present:
            add(fn.family, fn.key, pick(fn.phrasings), cat, fn.answers, _targets(scene, fn.targets))
    for fn in MULTI_FUNCTIONS:
        targets = _targets(scene, fn.targets)
        if len({scene.objects[i].category for i, _ in targets}) >= 2:
            add("multi", fn.key, pick(fn.phrasings), None, fn.answers, targets)
    for fn in PART_FUNCTIONS:
        cat, part = fn.targets[0]
        if cat in present:
            targets = [t for i, _ in _targets(scene, [(cat, "")]) for t in ((i, ""), (i, part))]
            add("mixed", fn.key, pick(MIXED_PHRASINGS).replace("{action}", fn.action), cat, MIXED_ANSWERS, targets)
    for cat in sorted(present):
        targets = _targets(scene, [(cat, "")])
        if any(scene.objects[i].occluded for i, _ in targets):
            add("amodal", "whole", pick(AMODAL_PHRASINGS), cat, AMODAL_ANSWERS, targets, "amodal")
            add("visible", "visible", pick(VISIBLE_PHRASINGS), cat, VISIBLE_ANSWERS, targets, "modal")
    return out


def sample_questions(scene: Scene, rng: np.random.Generator, held_out: bool, per_family: int = 1,
                     families: tuple[str, ...] = FAMILIES) -> list[Question]:
    """Up to ``per_family`` questions of each family, in a fixed family order."""
    candidates = candidate_questions(scene, rng, held_out)
    chosen = []
    for family in families:
        options = candidates[family]
        if options:
            idx = rng.choice(len(options), size=min(per_family, len(options)), replace=False)
            chosen.extend(options[int(i)] for i in sorted(idx))
    return chosen
