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

"""The answer parser and the dataset readers share one label grammar (m2sa_core.labels)."""

from __future__ import annotations

from m2sa_core.inference.answer import parse_targets
from m2sa_core.labels import parse_label_before
from m2sa_core.prompt import SEG_TOKEN
import pytest

LABELS = [
    "mug_2",
    "television_set_1's button",
    "mouse_(computer_equipment)_1's left_button",
    "hair-dryer_3's nozzle",
    "bottle_12",
    "a_1_23",
]


@pytest.mark.parametrize("label", LABELS)
@pytest.mark.parametrize("prefix", ["", "The target is ", "First the "])
def test_answer_parser_and_dataset_reader_agree_on_lower_case_labels(label, prefix):
    text = prefix + label
    from_data = parse_label_before(text + " ")
    [from_answer] = parse_targets(text + " " + SEG_TOKEN)
    assert from_data is not None
    assert from_answer.label == from_data.label == label
    assert (from_answer.object_name, from_answer.instance, from_answer.part_name) == (
        from_data.object_name, from_data.instance, from_data.part_name)
    assert from_answer.granularity == from_data.granularity


@pytest.mark.parametrize("text", ["Mug_2", "Television_set_1's Button"])
def test_case_rule_capitalised_labels_match_both_ways(text):
    """
    Both match without regard to case.

    The dataset keeps the text as written, the answer parser folds it to lower case.
    """
    from_data = parse_label_before(text)
    [from_answer] = parse_targets(text + " " + SEG_TOKEN)
    assert from_data is not None and from_data.label == text
    assert from_answer.label == text.lower()
    assert from_answer.object_name == from_data.object_name.lower()
    assert from_answer.part_name == from_data.part_name.lower()


@pytest.mark.parametrize("text", ["It is ", "the mug_1, and then ", "mug"])
def test_neither_finds_a_label_where_there_is_none(text):
    assert parse_label_before(text) is None
    [from_answer] = parse_targets(text + SEG_TOKEN)
    assert from_answer.instance == 0
