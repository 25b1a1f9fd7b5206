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
The synthetic world's pretraining sets: masks without text, and text without masks.

The real M2SA starts from a SAM pretrained on promptable segmentation and a LLaVA
pretrained on image-text data; the tiny model has to earn both from this world first
(docs/TRAINING.md, staged training):

* :func:`mask_annotation_entry` lists every object and every part of an image with its
  visible and complete mask (the ``mask_annotations`` layout), for SAM's stage;
* :func:`conversation_entry` asks and answers questions about the image in words (the
  ``image_conversations`` layout): what is in it, counts, parts, left and right, what is
  hidden, and what each thing is for (the train paraphrases only). For the language
  model's stage: the world's names and instance labels before it must reason with them.

Both are written for the train images only, so nothing of val/test leaks.
"""

from __future__ import annotations

from typing import Any

from m2sa_core.data.rle import encode_mask
from m2sa_core.data.synthetic.scene import Scene, SceneObject
from m2sa_core.data.synthetic.shapes import CATEGORIES
from m2sa_core.labels import category_of, make_label
from m2sa_core.types import mask_bbox
import numpy as np

DESCRIBE = ("What is in this image?", "Describe the objects you see.", "List everything on the table.",
            "What objects are in the scene?")
COUNT = ("How many {name} objects are there?", "Count the {name} objects.")
PARTS = ("What parts does the {label} have?", "Name the parts of the {label}.")
LEFTMOST = ("Which object is furthest to the left?", "What is on the far left?")
RIGHTMOST = ("Which object is furthest to the right?", "What is on the far right?")
HIDDEN = ("Is anything partly hidden?", "Which objects are partly covered by others?")
WHAT_IS = ("What is the {label}?", "What kind of thing is the {label}?")


def _centre_x(obj: SceneObject) -> float:
    return float(np.flatnonzero(obj.amodal.any(axis=0)).mean())


def _label(obj: SceneObject, part: str = "") -> str:
    return make_label(obj.category, obj.instance, part)


def _listing(labels: list[str], article: str = "the") -> str:
    items = [f"{article} {lab}" for lab in labels]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _capital(text: str) -> str:
    return text[0].upper() + text[1:]


def _region(obj: SceneObject, part: str) -> dict[str, Any]:
    visible = obj.parts_visible[part] if part else obj.visible
    amodal = obj.parts_amodal[part] if part else obj.amodal
    return {"category_name": category_of(obj.category, part), "label": _label(obj, part),
            "segmentation": encode_mask(visible), "amodal_segmentation": encode_mask(amodal),
            "bbox": [float(v) for v in mask_bbox(visible)]}


def mask_annotation_entry(scene: Scene, image_id: int, file_name: str) -> dict[str, Any]:
    """Every object and part of ``scene`` with its visible and complete masks."""
    h, w = scene.image.shape[:2]
    annotations = [_region(obj, part) for obj in scene.objects for part in ("", *CATEGORIES[obj.category].parts)]
    return {"image_id": image_id, "file_name": file_name, "height": h, "width": w, "annotations": annotations}


def _pick(rng: np.random.Generator, options: tuple[str, ...]) -> str:
    return options[int(rng.integers(len(options)))]


def scene_conversations(scene: Scene, rng: np.random.Generator, function_answers: list[tuple[str, str]]
                        ) -> list[dict[str, str]]:
    """
    Questions about ``scene`` answered in words.

    ``function_answers`` are (question, answer without masks) pairs of the scene's
    functional questions.
    """
    objects = sorted(scene.objects, key=_centre_x)
    labels = [_label(o) for o in objects]
    out = [{"question": _pick(rng, DESCRIBE), "answer": f"I see {_listing(labels)}."}]
    for category in scene.categories():
        spec = CATEGORIES[category]
        same = [_label(o) for o in scene.instances(category)]
        spoken = _pick(rng, spec.spoken)
        answer = f"There is 1: the {same[0]}." if len(same) == 1 else f"There are {len(same)}: {_listing(same)}."
        out.append({"question": _pick(rng, COUNT).format(name=spoken), "answer": answer})
    obj = objects[int(rng.integers(len(objects)))]
    parts = CATEGORIES[obj.category].parts
    out.append({"question": _pick(rng, PARTS).format(label=_label(obj)),
                "answer": f"The {_label(obj)} has {_listing([p.replace('_', ' ') for p in parts], 'a')}."})
    out.append({"question": _pick(rng, WHAT_IS).format(label=_label(obj)),
                "answer": f"It is a {CATEGORIES[obj.category].spoken[0]}."})
    out.append({"question": _pick(rng, LEFTMOST), "answer": f"The {labels[0]}."})
    out.append({"question": _pick(rng, RIGHTMOST), "answer": f"The {labels[-1]}."})
    hidden = [_label(o) for o in objects if o.occluded]
    out.append({"question": _pick(rng, HIDDEN),
                "answer": f"Yes: {_listing(hidden)}." if hidden else "No, everything is fully visible."})
    out.extend({"question": q, "answer": a} for q, a in function_answers)
    return out


def conversation_entry(scene: Scene, rng: np.random.Generator, image_id: int, file_name: str,
                       function_answers: list[tuple[str, str]]) -> dict[str, Any]:
    h, w = scene.image.shape[:2]
    return {"image_id": image_id, "file_name": file_name, "height": h, "width": w,
            "conversations": scene_conversations(scene, rng, function_answers)}


def text_answer(answer_template: str) -> str:
    """Return a functional answer without its masks: "Press the tv_1's button {seg}." -> "Press the tv_1's button."."""
    return _capital(answer_template.replace(" {seg}", ""))
