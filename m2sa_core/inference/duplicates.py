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
Merge the instances an answer names twice: one object seen as two.

Visible masks of two objects never share pixels (a pixel shows one surface), nor do the
same part of two objects. So when an answer names ``bottle_1`` and ``bottle_2`` and their
visible masks overlap by IoU >= a threshold, the scene holds one bottle the language model
counted twice, and a grasp planner would get two targets on one object. A model that counts
instances from a coarse CLIP grid does this: the shipped tiny model named an instance that
is not in the scene in 20 of 353 held-out answers, and in 15 of them the extra instance's
mask lay on the one already named (IoU 0.50-0.98; ``models/m2sa-tiny-synth/README.md``).

The later-named instance is the duplicate: it goes from the targets and from the answer
text (``"the bottle_1 and the bottle_2."`` -> ``"the bottle_1."``); an object instance that
goes takes its parts with it. ``Result.raw_answer`` keeps the text as generated and
``Result.merged`` the labels that went.

The threshold is the model's (``M2SAConfig.duplicate_instance_iou``, 0 = off, as in the
authors' code) unless the caller gives one.
"""

from __future__ import annotations

from collections.abc import Sequence
import re

from m2sa_core.evaluation.metrics import intersection_union
from m2sa_core.labels import ITS_PART_RE, LABEL_RE
from m2sa_core.prompt import SEG_TOKEN
from m2sa_core.types import Target
import numpy as np

# The words that join one list item to the one before it: ", the ", " and the ", " and its ".
_LIST_JOINT_RE = re.compile(r"^\s*(?:,\s*)?(?:(?P<conj>and|or)\s+)?(?:(?:the|its)\s+)?$", re.IGNORECASE)
_LEADING_COMMA_RE = re.compile(r"^\s*,\s*")
_TRAILING_ARTICLE_RE = re.compile(r"\s+(?:the|its|a|an)\s*$", re.IGNORECASE)


def _overlap(a: np.ndarray, b: np.ndarray) -> float:
    """Return the IoU of two visible masks; 0 when both are empty (two empty masks show no one object)."""
    intersection, union = intersection_union(a, b)
    return intersection / union if union else 0.0


def duplicate_targets(targets: Sequence[Target], iou_threshold: float) -> list[int]:
    """
    Return the indices of the targets that repeat an earlier-named instance, in order.

    A target repeats target ``j`` (named before it) when both name the same object
    category and part (or both the whole object), different instance numbers, and their
    visible masks overlap by IoU >= ``iou_threshold``. The parts of a repeated object
    instance go with it. ``iou_threshold`` <= 0 finds none.
    """
    if iou_threshold <= 0:
        return []
    dropped: set[int] = set()
    for i, target in enumerate(targets):
        for j in range(i):
            earlier = targets[j]
            if j in dropped or earlier.object_name != target.object_name or earlier.part_name != target.part_name:
                continue
            if earlier.instance != target.instance and _overlap(earlier.mask, target.mask) >= iou_threshold:
                dropped.add(i)
                break
    gone_objects = {(targets[i].object_name, targets[i].instance) for i in dropped if not targets[i].part_name}
    dropped |= {i for i, t in enumerate(targets) if t.part_name and (t.object_name, t.instance) in gone_objects}
    return sorted(dropped)


def _mention_start(span: str) -> int | None:
    """Where the target's name starts in the text before its [SEG], or None if it has none."""
    text = span.rstrip()
    match = LABEL_RE.search(text) or ITS_PART_RE.search(text)
    return match.start() if match else None


def remove_from_answer(raw_answer: str, indices: Sequence[int]) -> str:
    """
    ``raw_answer`` without the targets at ``indices`` (0-based [SEG] positions).

    A target is removed with the list words that joined it (", the", " and the"); when
    the list's last item goes, its "and" moves to the item that is now last
    ("A, B and C" without C is "A and B"). Words other than list joints stay.
    """
    spans = raw_answer.split(SEG_TOKEN)
    tail = spans.pop()
    drop = set(indices)
    if not drop:
        return raw_answer
    # Each span: (joint, mention); the first item's "joint" is the sentence before it.
    items: list[list[str]] = []
    for span in spans:
        start = _mention_start(span)
        start = len(span) if start is None else start
        items.append([span[:start], span[start:]])
    pending_conj: str | None = None  # the "and" of a removed last item, waiting for the item before it
    later_kept = False
    for i in range(len(items) - 1, -1, -1):
        joint, mention = items[i]
        list_joint = _LIST_JOINT_RE.match(joint) if i > 0 else None
        if i in drop:
            if list_joint is None:  # not a plain list: keep the words, lose the name and its article
                items[i] = [_TRAILING_ARTICLE_RE.sub("", joint), ""]
            else:
                if list_joint["conj"] and not later_kept:
                    pending_conj = list_joint["conj"]
                items[i] = ["", ""]
            continue
        if pending_conj and list_joint is not None and _LEADING_COMMA_RE.match(joint):
            items[i][0] = _LEADING_COMMA_RE.sub(f" {pending_conj} ", joint)
        pending_conj = None
        later_kept = True
    text = "".join(joint + mention + (SEG_TOKEN if i not in drop else "") for i, (joint, mention) in enumerate(items))
    return text + tail
