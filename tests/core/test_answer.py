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

"""Answer parsing: one labelled target per [SEG], following the project's naming convention."""

from m2sa_core.inference.answer import clean_answer, parse_targets
from m2sa_core.labels import ParsedLabel
from m2sa_core.types import Granularity


def test_part_level_target():
    (t,) = parse_targets("Press the television_set_1's button [SEG].")
    assert t == ParsedLabel("television_set_1's button", "television_set", 1, "button")
    assert t.granularity == Granularity.PART


def test_object_level_target():
    (t,) = parse_targets("It is mug_2 [SEG].")
    assert (t.label, t.object_name, t.instance, t.part_name, t.granularity) == (
        "mug_2", "mug", 2, "", Granularity.OBJECT,
    )


def test_names_with_parentheses_and_underscores():
    (t,) = parse_targets("Click the mouse_(computer_equipment)_1's left_button [SEG]")
    assert t.object_name == "mouse_(computer_equipment)"
    assert t.instance == 1
    assert t.part_name == "left_button"
    assert t.label == "mouse_(computer_equipment)_1's left_button"


def test_multi_target_answer_in_order():
    raw = "You can press the remote_control_1's button [SEG] or the television_set_1's button [SEG]."
    targets = parse_targets(raw)
    assert [t.label for t in targets] == ["remote_control_1's button", "television_set_1's button"]
    assert [t.object_name for t in targets] == ["remote_control", "television_set"]


def test_its_refers_to_previous_object():
    targets = parse_targets("Use the laptop_computer_1's keyboard [SEG] and its touchpad [SEG].")
    assert targets[1] == ParsedLabel("laptop_computer_1's touchpad", "laptop_computer", 1, "touchpad")


def test_unparsable_span_still_yields_a_target():
    targets = parse_targets("Sure, the red thing [SEG] and [SEG]")
    assert len(targets) == 2
    assert targets[0].label == "red thing"
    assert (targets[0].instance, targets[0].granularity, targets[0].part_name) == (0, Granularity.OBJECT, "")
    assert targets[1].label == "target_2"


def test_its_without_previous_object_falls_back():
    (t,) = parse_targets("Grab its handle [SEG]")
    assert t.instance == 0 and t.granularity == Granularity.OBJECT


def test_no_seg_no_targets():
    assert parse_targets("There is nothing to press here.") == []


def test_clean_answer_removes_markers_and_tidies_whitespace():
    raw = "You can press the remote_control_1's button [SEG]  or the  television_set_1's button [SEG].</s>"
    assert clean_answer(raw) == "You can press the remote_control_1's button or the television_set_1's button."
