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

"""An answer naming no target is read as an absence, with the missing thing's words when it says them."""

from __future__ import annotations

from m2sa_core.inference.absence import absence_of, absent_answer, ABSENT_ANSWERS
from m2sa_core.prompt import SEG_TOKEN
from m2sa_core.types import Absence
import pytest

WORDS = ["microwave", "mug_1's handle", "third mug", "purple mug", "TV set"]


@pytest.mark.parametrize("template_index", range(len(ABSENT_ANSWERS)))
@pytest.mark.parametrize("words", WORDS)
def test_every_taught_sentence_gives_back_its_words(words, template_index):
    answer = absent_answer(words, template_index)
    assert SEG_TOKEN not in answer and words in answer
    assert absence_of(answer) == Absence(words)
    # As generation writes it: the end token, spacing, another case.
    assert absence_of(f" {answer.upper()}</s>") == Absence(words.upper())


def test_an_answer_with_a_seg_names_a_target_and_is_no_absence():
    assert absence_of(f"Press the television_set_1's button {SEG_TOKEN}.") is None
    # Even when its words sound like a refusal: the [SEG] is what the node segments.
    assert absence_of(f"There is no microwave here, but the oven {SEG_TOKEN}.") is None


def test_an_answer_without_a_seg_in_no_taught_sentence_is_an_absence_naming_nothing():
    assert absence_of("The kitchen is bright.") == Absence("")
    assert absence_of("") == Absence("")
