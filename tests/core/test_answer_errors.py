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

"""Kinds of answer mistakes: what m2sa-eval reports beside gIoU to say why an answer missed."""

from __future__ import annotations

from m2sa_core.evaluation.answer_errors import (
    answer_error,
    AnswerErrorCounter,
    KINDS,
    markdown,
    markdown_by_number,
    markdown_by_question,
    number_group,
    report_by_question,
)
from m2sa_core.labels import parse_label_before
import pytest


def targets(*labels: str):
    return [parse_label_before(label) for label in labels]


@pytest.mark.parametrize("predicted, truth, kind", [
    (("mug_2", "mug_1"), ("mug_1", "mug_2"), "exact"),
    (("Mug_1",), ("mug_1",), "exact"),  # generated text may capitalise a label
    (("mug_1",), ("mug_1", "mug_2"), "too few instances"),
    (("bottle_1", "bottle_2"), ("bottle_1",), "too many instances"),
    (("knife_2",), ("knife_1",), "other instances"),
    # "Point out the mug and also where I pour the coffee into." answered with objects only
    (("mug_1", "mug_2"), ("mug_1", "mug_1's body"), "wrong level"),
    (("mug_1's handle",), ("mug_1's body",), "wrong level"),
    (("mug_1", "lamp_1"), ("mug_1", "bottle_1"), "some category wrong"),
    (("lamp_1",), ("mug_1", "bottle_1"), "no category right"),
    ((), ("mug_1",), "no category right"),
])
def test_an_answer_gets_the_first_kind_that_describes_its_targets(predicted, truth, kind):
    assert answer_error(targets(*predicted), targets(*truth)) == kind


def test_instances_count_only_where_the_truth_numbers_them():
    """A ReasonSeg truth names targets by category (instance 0): any instance of it is right."""
    truth = targets("mug_1")
    unnumbered = [type(truth[0])(label="mug", object_name="mug", instance=0, part_name="")]
    assert answer_error(targets("mug_3"), unnumbered) == "exact"
    assert answer_error(targets("mug_3", "mug_4"), unnumbered) == "too many instances"


def test_the_report_counts_every_kind_per_split_and_in_all():
    counter = AnswerErrorCounter()
    counter.add(targets("mug_1"), targets("mug_1"), split="test_obj_only")
    counter.add(targets("mug_1"), targets("mug_1", "mug_2"), split="test_obj_only")
    counter.add(targets("mug_1"), targets("mug_1", "mug_1's body"), split="test_mixed")
    report = counter.report()
    assert list(report) == ["test_mixed", "test_obj_only", "all"]
    assert all(list(row) == list(KINDS) for row in report.values())
    assert report["test_obj_only"]["exact"] == 1 and report["test_obj_only"]["too few instances"] == 1
    assert report["all"]["exact"] == 1 and sum(report["all"].values()) == 3
    table = markdown(report)
    assert "| test_obj_only (2) | 50.0 % | 50.0 % |" in table
    assert counter.all_reduce(["test_mixed", "test_obj_only"]) is None and counter.report() == report  # one process


def test_answers_are_also_counted_by_how_many_targets_were_asked():
    # Two instances asked, the first named and the second missed: the count fails on the
    # two-target questions only, which the split's count accuracy would average away.
    counter = AnswerErrorCounter()
    counter.add(targets("mug_1"), targets("mug_1"), split="a")
    counter.add(targets("mug_2"), targets("mug_1"), split="a")  # right number, other instance
    counter.add(targets("mug_1"), targets("mug_1", "mug_2"), split="a")
    counter.add(targets("mug_1", "mug_2", "mug_3"), targets("mug_1", "mug_2"), split="b")
    for n in (4, 5):
        counter.add(targets("lamp_1"), targets(*(f"lamp_{i}" for i in range(1, n + 1))), split="b")
    report = counter.report_by_number()
    assert list(report) == ["1", "2", "4+"]
    assert report["1"] == {"answers": 2, "right number": 2, "fewer": 0, "more": 0, "exact": 1}
    assert report["2"] == {"answers": 2, "right number": 0, "fewer": 1, "more": 1, "exact": 0}
    assert report["4+"] == {"answers": 2, "right number": 0, "fewer": 2, "more": 0, "exact": 0}
    assert "| 1 | 2 | 100.0 % | 0.0 % | 0.0 % | 50.0 % |" in markdown_by_number(report)
    assert counter.all_reduce(["a", "b"]) is None and counter.report_by_number() == report  # one process
    with pytest.raises(ValueError, match="at least 0"):
        number_group(-1)


def test_the_question_sentences_that_miss_the_number_most_often_come_first():
    # One sentence asked often and missed half the time costs the count more than one
    # asked once and missed: it leads the report, as on the held-out splits (RUNS.md, run 28).
    log = []
    for predicted, truth in [(["mug_1"], ["mug_1"]), (["mug_1"], ["mug_1", "mug_2"]),
                             (["mug_1's handle"], ["mug_1"]), (["mug_1", "lamp_1"], ["mug_1"])]:
        log.append({"question": "Where could I serve a | cup of cocoa?", "predicted": predicted, "truth": truth,
                    "kind": answer_error(targets(*predicted), targets(*truth))})
    log.append({"question": "What gives light?", "predicted": [], "truth": ["lamp_1"], "kind": "no category right"})
    log.append({"question": "What holds tea?", "predicted": ["mug_1"], "truth": ["mug_1"], "kind": "exact"})
    report = report_by_question(log)
    assert [row["question"] for row in report] == ["Where could I serve a | cup of cocoa?", "What gives light?",
                                                   "What holds tea?"]
    assert report[0] == {"question": "Where could I serve a | cup of cocoa?", "answers": 4, "right number": 2,
                         "exact": 1, "most frequent mistake": "too few instances"}
    assert report[2]["most frequent mistake"] == ""
    table = markdown_by_question(report, limit=2)
    assert "| Where could I serve a \\| cup of cocoa? | 4 | 2 | 1 | too few instances |" in table
    assert "What holds tea?" not in table and table.count("\n") == 3
