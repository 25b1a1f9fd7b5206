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
Bags with commands about something not in view: the ground truth says so, m2sa-bag-eval counts it.

The figures come from a model double (fake_models.AbsentBoxes) whose every answer is known:
it rejects the commands it is told to (one absent, one present: a wrong rejection) and
answers every other with a box, so the report's arithmetic is checked against the choices
made here, never against what a trained model happens to do. First on result messages
built as the node builds them, then through the node over DDS, replayed from a bag.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from fake_models import AbsentBoxes
from m2sa_core.data.readers import read_dataset
from m2sa_ros.bag.absence_scoring import score_absence
from m2sa_ros.bag.bag_io import decode, iter_messages, plan_from_records, RESULT_TOPIC, write_bag
from m2sa_ros.bag.demo import absent_records, results_table
from m2sa_ros.bag.ground_truth import BagError, GroundTruth, write_sidecar_json
from m2sa_ros.bag.report import build_report, json_default, render_markdown, summary_text
from m2sa_ros.bag.scoring import prediction_from_msg, score_predictions
import numpy as np
import pytest

pytestmark = pytest.mark.integration

TEST_FILES = ("MMR_test_obj_only.json", "MMR_test_part_only.json", "MMR_test_mixed.json")
PRESENT, ABSENT = 6, 3


@pytest.fixture(scope="module")
def plan(synth):
    """Six present commands of the held-out scenes and three about something not in them."""
    records = [r for name in TEST_FILES for r in read_dataset(synth / name).records]
    present = [r for r in records if "missing" not in r.meta][:PRESENT]
    absent = absent_records(records, ABSENT)
    assert len(absent) == ABSENT and all(not r.targets and r.meta["missing"]["words"] for r in absent)
    return plan_from_records(present + absent, rate_hz=5.0)


def _expected(truth: GroundTruth, refused: set[int]) -> dict[str, dict[str, int]]:
    """Per split, and in all: absent commands, those refused; present ones, those refused."""
    out: dict[str, dict[str, int]] = {}
    for command in truth.commands:
        for split in (command.split, "all"):
            counts = out.setdefault(split, {"absent": 0, "rejected": 0, "present": 0, "wrongly_rejected": 0})
            if command.absent:
                counts["absent"] += 1
                counts["rejected"] += command.index in refused
            else:
                counts["present"] += 1
                counts["wrongly_rejected"] += command.index in refused
    return out


def _double(truth: GroundTruth) -> tuple[AbsentBoxes, set[int]]:
    """Return a double that rejects the first absent and the first present command, and their indices."""
    absent = next(c for c in truth.commands if c.absent)
    present = next(c for c in truth.commands if not c.absent)
    seg = AbsentBoxes("microwave", refuse=(absent.command, present.command))
    refused = {c.index for c in truth.commands if any(word in c.command for word in seg.refuse)}
    assert refused == {absent.index, present.index}, "another command holds one of the two commands' words"
    return seg, refused


def test_the_sidecar_says_which_commands_are_absent_and_stays_version_1_without_any(plan, tmp_path):
    truth = plan.ground_truth
    absent = [c for c in truth.commands if c.absent]
    assert len(absent) == ABSENT and all(c.targets == [] and c.missing["words"] for c in absent)
    assert all(c.missing is None for c in truth.commands if not c.absent)
    data = truth.to_json()
    assert data["version"] == 2 and GroundTruth.from_json(data).to_json() == data
    # A bag without absent commands is written as before, for readers that refuse unknown keys.
    present = GroundTruth(commands=[dataclasses.replace(c, index=i) for i, c in
                                    enumerate(c for c in truth.commands if not c.absent)], frames=truth.frames)
    old = present.to_json()
    assert old["version"] == 1 and all("missing" not in c for c in old["commands"])
    assert [c.absent for c in GroundTruth.from_json(old).commands] == [False] * PRESENT
    with pytest.raises(BagError, match=r"command 0 has 'missing', which needs version 2"):
        GroundTruth.load(write_sidecar_json(tmp_path / "v1.json", dict(data, version=1)))
    broken = json.loads(json.dumps(data))
    index = absent[0].index
    broken["commands"][index]["targets"] = broken["commands"][0]["targets"]
    with pytest.raises(BagError, match=rf"command {index} names what is missing and has targets"):
        GroundTruth.from_json(broken)


def test_report_counts_rejections_per_split_and_scores_masks_on_present_commands_only(plan):
    from m2sa_ros.bag.replay import Outcome
    from m2sa_ros.messages.result_conversion import error_result, result_to_msg, ResultOrigin

    truth = plan.ground_truth
    seg, refused = _double(truth)
    failed = [c for c in truth.commands if c.absent][-1].index  # a failure is no rejection
    outcomes = []
    for c in truth.commands:
        if c.index == failed:
            msg = error_result("model failure: injected", ResultOrigin(f"bag-{c.index}", c.command))
        else:
            result = seg.segment(np.zeros((c.height, c.width, 3), np.uint8), c.command)
            msg = result_to_msg(result, ResultOrigin(f"bag-{c.index}", c.command, None, c.height, c.width), 5.0)
        outcomes.append(Outcome(c.index, c.command, c.time_ns, c.image_stamp_ns, True, msg.request_id, 0.0, 0.01,
                                msg))
    predictions = {o.index: prediction_from_msg(o.result) for o in outcomes}
    assert [predictions[c.index].outcome for c in truth.commands] == [
        "failed" if c.index == failed else "absent" if c.index in refused else "targets" for c in truth.commands]

    absence = score_absence(truth, predictions)
    expected = _expected(truth, refused)
    assert {k: {n: v for n, v in c.as_dict().items() if not n.endswith("share")} for k, c in absence.items()} \
        == expected
    assert (absence["all"].absent, absence["all"].rejected, absence["all"].present,
            absence["all"].wrongly_rejected) == (ABSENT, 1, PRESENT, 1)
    assert absence["all"].rejected_share == pytest.approx(1 / 3)
    assert absence["all"].wrongly_rejected_share == pytest.approx(1 / 6)

    # gIoU and cIoU as before absent commands existed: on the present commands alone (the
    # double's boxes on absent commands would otherwise count as unmatched masks).
    scores = score_predictions(truth, predictions)
    present_only = GroundTruth(commands=[c for c in truth.commands if not c.absent], frames=truth.frames)
    alone = score_predictions(present_only, predictions)
    assert {k: r.as_dict() for k, r in scores.reports.items()} == {k: r.as_dict() for k, r in alone.reports.items()}
    boxed = next(c.index for c in truth.commands if c.absent and c.index not in refused and c.index != failed)
    assert scores.commands[boxed].target_ious == [0.0] and scores.commands[boxed].entry_ious == []

    report = build_report(Path("bag"), truth, outcomes, scores, {"rate_factor": 1.0, "namespace": "/t"}, 0, absence)
    report = json.loads(json.dumps(report, default=json_default))  # what report.json holds
    assert report["absence"]["all"] == {**expected["all"], "rejected_share": pytest.approx(1 / 3),
                                        "wrongly_rejected_share": pytest.approx(1 / 6)}
    rows = {c["index"]: c for c in report["commands"]}
    first_absent = min(i for i in refused if truth.commands[i].absent)
    assert rows[first_absent]["outcome"] == "absent" and rows[first_absent]["missing"] == "microwave"
    assert rows[first_absent]["expected_absent"] and rows[first_absent]["expected_missing"]
    assert rows[boxed]["outcome"] == "targets" and rows[boxed]["expected_absent"]

    markdown = render_markdown(report, [])
    assert "## Commands about something not in view" in markdown
    assert f"| all | {ABSENT} | 1 (33.3 %) | {PRESENT} | 1 (16.7 %) |" in markdown
    assert "expected absent: " + truth.commands[boxed].missing["words"] in markdown
    summary = summary_text(report)
    assert "absent rejected 1/3 (33.3 %), present wrongly rejected 1/6 (16.7 %)" in summary
    table = results_table(report)
    assert "-> ABSENT (no microwave in view): There is no microwave here." in table
    assert f"expected: nothing (no {truth.commands[boxed].missing['words']} in view): NOT rejected" in table
    assert f"expected: nothing (no {truth.commands[first_absent].missing['words']} in view): rejected" in table


def test_a_report_without_absent_commands_has_no_such_section(plan):
    report = {"bag": "b", "settings": {}, "counts": dict.fromkeys((
        "commands", "results", "commands_without_result", "failed_results", "commands_without_image",
        "answered_on_another_frame"), 0), "metrics": {}, "absence": {}, "latency_ms": {}, "inference_ms": {},
        "commands": []}
    assert "not in view" not in render_markdown(report, []) and "absent" not in summary_text(report)


@pytest.mark.ros
def test_m2sa_bag_eval_through_the_node_over_dds_counts_what_the_double_answered(plan, ros_context, tmp_path):
    from m2sa_ros.bag.evaluate import evaluate_bag
    from m2sa_ros.perception_node import PerceptionNode
    from node_harness import spinning, wait_until
    from rclpy.parameter import Parameter

    truth = plan.ground_truth
    bag = write_bag(plan, tmp_path / "bag", "sqlite3")
    seg, refused = _double(truth)
    # The node m2sa-bag-eval would start (reliable images, the bag's clock), over the double, in this process.
    params = {"image_reliability": "reliable", "use_sim_time": True, "max_image_age": 0.0, "wait_for_image": 2.0}
    node = PerceptionNode(context=ros_context, namespace="/absent_eval", segmenter_factory=lambda _p, _s: seg,
                          parameter_overrides=[Parameter(k, value=v) for k, v in params.items()])
    try:
        with spinning(ros_context, node):
            wait_until(lambda: node.lifecycle_state() == "active", 30, "the node to activate")
            evaluation = evaluate_bag(bag, tmp_path / "eval", start_node=False, namespace="/absent_eval",
                                      rate_factor=5.0, progress=False, result_timeout_s=60, startup_timeout_s=60,
                                      overlays=False)
    finally:
        node.close()
    report = evaluation.report
    assert report["counts"]["commands_without_result"] == 0 and report["counts"]["failed_results"] == 0
    assert {k: {n: v for n, v in c.items() if not n.endswith("share")} for k, c in report["absence"].items()} \
        == _expected(truth, refused)
    assert [c["outcome"] for c in report["commands"]] == [
        "absent" if c.index in refused else "targets" for c in truth.commands]
    # The results bag keeps the v6 fields (the bag tools read msg/*.msg as it is now).
    messages = iter_messages(tmp_path / "eval" / "results_bag", [RESULT_TOPIC])
    recorded = {msg.request_id: msg for msg in map(decode, messages)}
    rejected = recorded[f"bag-{min(refused)}"]
    assert (rejected.outcome, rejected.missing) == (2, "microwave")
    assert all(m.outcome == 1 and m.missing == "" for rid, m in recorded.items()
               if int(rid.split("-")[1]) not in refused)
    assert "## Commands about something not in view" in (tmp_path / "eval" / "report.md").read_text()
