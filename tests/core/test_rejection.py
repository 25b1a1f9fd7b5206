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

"""Rejections of commands about what is not there: the counts, the shares and the teacher-forced rule."""

from __future__ import annotations

from m2sa_core.evaluation.rejection import (
    ABSENT_KINDS,
    markdown,
    RejectionCounter,
    same_words,
    teacher_forced_first_token,
    teacher_forced_rejects,
)
from m2sa_core.prompt import IGNORE_INDEX
import numpy as np
import pytest

SEG = 7
VOCAB = 10


def _logits(argmax: list[int], extra_front: int = 0) -> np.ndarray:
    """Logits [extra_front + len(argmax), VOCAB] whose argmax at each position is given."""
    out = np.zeros((extra_front + len(argmax), VOCAB))
    for t, token in enumerate(argmax):
        out[extra_front + t, token] = 5.0
    return out


def test_per_split_shares_and_counts_of_hand_made_decisions():
    counter = RejectionCounter("generative", splits=["test_obj_only", "test_part_only"])
    for rejected in (False, False, False, True):  # one present command of four wrongly rejected
        counter.add_present(rejected, split="test_obj_only")
    counter.add_absent("category", rejected=True, named=True, split="test_obj_only")
    counter.add_absent("instance", rejected=True, named=False, split="test_obj_only")
    counter.add_absent("property", rejected=False, named=False, split="test_obj_only")
    counter.add_present(False, split="test_part_only")
    counter.add_absent("part", rejected=True, named=True, split="test_part_only")
    report = counter.report()
    obj = report["test_obj_only"]
    assert (obj["present_commands"], obj["present_rejected_count"], obj["present_rejected"]) == (4, 1, 0.25)
    assert (obj["absent_commands"], obj["absent_rejected_count"]) == (3, 2)
    assert obj["absent_rejected"] == pytest.approx(2 / 3)
    assert (obj["absent_named_count"], obj["absent_named"]) == (1, 0.5)  # of the rejected ones
    assert obj["absent_by_kind"]["category"] == {"commands": 1, "rejected": 1.0, "rejected_count": 1}
    assert obj["absent_by_kind"]["property"] == {"commands": 1, "rejected": 0.0, "rejected_count": 0}
    assert obj["absent_by_kind"]["part"] == {"commands": 0, "rejected": None, "rejected_count": 0}
    part = report["test_part_only"]
    assert (part["present_rejected"], part["absent_rejected"], part["absent_named"]) == (0.0, 1.0, 1.0)
    # Over both splits: 5 present (1 rejected), 4 absent (3 rejected, 2 of them naming the words).
    total = report["all"]
    assert (total["present_commands"], total["present_rejected"]) == (5, 0.2)
    assert (total["absent_commands"], total["absent_rejected"], total["absent_named"]) == (4, 0.75, 2 / 3)
    assert set(total["absent_by_kind"]) == set(ABSENT_KINDS)


def test_without_absent_commands_the_absent_figures_are_null_not_zero():
    counter = RejectionCounter("generative")
    counter.add_present(False, split="val")
    (val,) = counter.report().values()
    assert val["absent_commands"] == 0
    assert val["absent_rejected"] is None and val["absent_named"] is None
    assert all(kind["rejected"] is None for kind in val["absent_by_kind"].values())
    assert val["present_rejected"] == 0.0
    assert "| n/a |" in markdown(counter.report())


def test_teacher_forced_reports_no_naming_since_the_words_are_fed_but_how_often_the_refusal_begins():
    counter = RejectionCounter("teacher_forced")
    counter.add_absent("part", rejected=True, named=True, first_token=True, split="val")
    counter.add_absent("category", rejected=True, named=True, first_token=False, split="val")
    val = counter.report()["val"]
    assert val["absent_rejected"] == 1.0 and val["absent_named"] is None and val["absent_named_count"] is None
    assert (val["absent_first_token"], val["absent_first_token_count"]) == (0.5, 1)
    generative = RejectionCounter("generative")
    generative.add_absent("part", rejected=True, first_token=True, split="val")
    assert generative.report()["val"]["absent_first_token"] is None


def test_an_unknown_kind_or_split_is_refused():
    counter = RejectionCounter("generative", splits=["val"])
    with pytest.raises(ValueError, match="kind 'colour'"):
        counter.add_absent("colour", rejected=True)
    with pytest.raises(KeyError, match="test_mixed"):
        counter.add_present(False, split="test_mixed")


def test_the_state_sums_across_ranks_to_one_process_figures():
    one = RejectionCounter("generative", splits=["a", "b"])
    ranks = [RejectionCounter("generative", splits=["a", "b"]) for _ in range(2)]
    decisions = [("a", None, True), ("a", "part", True), ("b", "category", False), ("b", None, False),
                 ("a", "instance", True)]
    for i, (split, kind, rejected) in enumerate(decisions):
        for counter in (one, ranks[i % 2]):
            if kind is None:
                counter.add_present(rejected, split=split)
            else:
                counter.add_absent(kind, rejected, named=True, split=split)
    summed = ranks[0].state() + ranks[1].state()
    merged = RejectionCounter("generative", splits=["a", "b"])
    merged.load_state(summed)
    assert merged.report() == one.report()


def test_named_words_compare_without_case_or_spacing_and_never_empty():
    assert same_words("Mug_1's  handle", "mug_1's handle")
    assert not same_words("mug", "mug_1's handle")
    assert not same_words("", "")


def test_teacher_forced_present_rejected_when_the_first_seg_position_predicts_another_token():
    # labels: prompt (ignored) then "a [SEG] b [SEG] </s>"; logits t predict label t + 1.
    labels = np.array([IGNORE_INDEX, IGNORE_INDEX, 3, SEG, 4, SEG, 2])
    # Position 2 predicts label 3 (the first [SEG]).
    assert not teacher_forced_rejects(_logits([0, 3, SEG, 4, 1, 2, 0]), labels, SEG, absent=False)
    assert teacher_forced_rejects(_logits([0, 3, 4, 4, SEG, 2, 0]), labels, SEG, absent=False)
    # Image tokens spliced before the answer lengthen the logits; the answer ends both.
    assert not teacher_forced_rejects(_logits([0, 3, SEG, 4, 1, 2, 0], extra_front=5), labels, SEG, absent=False)
    assert teacher_forced_rejects(_logits([0, 3, 4, 4, SEG, 2, 0], extra_front=5), labels, SEG, absent=False)


def test_teacher_forced_absent_rejected_unless_seg_is_argmax_at_some_answer_position():
    labels = np.array([IGNORE_INDEX, IGNORE_INDEX, 3, 4, 5, 2])  # "There is no mug here" </s>, no [SEG]
    assert teacher_forced_rejects(_logits([0, 3, 4, 5, 2, 0]), labels, SEG, absent=True)
    assert not teacher_forced_rejects(_logits([0, 3, 4, SEG, 2, 0]), labels, SEG, absent=True)
    # At the end token too: the model would have gone on to name a target.
    assert not teacher_forced_rejects(_logits([0, 3, 4, 5, SEG, 0]), labels, SEG, absent=True)
    # The prompt is not the answer: [SEG] predicted inside it does not count.
    assert teacher_forced_rejects(_logits([SEG, 3, 4, 5, 2, 0]), labels, SEG, absent=True)


def test_teacher_forced_first_token_compares_the_first_answer_position_with_the_gold_token():
    labels = np.array([IGNORE_INDEX, IGNORE_INDEX, 3, 4, 5, 2])
    assert teacher_forced_first_token(_logits([0, 3, 0, 0, 0, 0], extra_front=4), labels)
    assert not teacher_forced_first_token(_logits([0, 4, 4, 5, 2, 0], extra_front=4), labels)
    assert not teacher_forced_first_token(_logits([3, 0, 4, 5, 2, 0]), labels)  # one position early


def test_teacher_forced_rule_needs_an_answer_and_a_seg_for_a_present_command():
    with pytest.raises(ValueError, match="no answer token"):
        teacher_forced_rejects(_logits([0, 0]), np.array([IGNORE_INDEX, IGNORE_INDEX]), SEG, absent=True)
    with pytest.raises(ValueError, match="holds no \\[SEG\\]"):
        teacher_forced_rejects(_logits([0, 0, 0]), np.array([IGNORE_INDEX, 3, 2]), SEG, absent=False)
