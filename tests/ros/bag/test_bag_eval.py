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
m2sa-bag-eval: scoring, and replay through the live node over DDS.

The replay tests start the real perception node as a subprocess (the way a team
evaluates on its recordings) on a tiny model whose answers are forced to contain
[SEG] tokens, so every command yields masks and the scores are not trivially zero.
"""

from __future__ import annotations

import json
import math

from m2sa_core.data.readers import read_dataset
from m2sa_ros.bag.bag_io import (
    bag_info,
    iter_messages,
    make_bag,
    plan_from_records,
    read_frames,
    RESULT_TOPIC,
    write_bag,
)
from m2sa_ros.bag.ground_truth import GroundTruth, load_ground_truth
from m2sa_ros.bag.report import contact_sheet
from m2sa_ros.bag.scoring import (
    percentiles,
    Prediction,
    prediction_from_result,
    score_predictions,
)
import numpy as np
import pytest

pytestmark = pytest.mark.integration

TEST_FILES = ("MMR_test_obj_only.json", "MMR_test_part_only.json", "MMR_test_mixed.json")
MAX_NEW_TOKENS = 3


@pytest.fixture(scope="module")
def truth_bag(synth, tmp_path_factory):
    """Return a 3-command bag of held-out synthetic scenes."""
    out = tmp_path_factory.mktemp("bags") / "three"
    return make_bag([synth / name for name in TEST_FILES], out, storage="mcap", rate_hz=5.0, limit=3)


# --------------------------------------------------------------------------- scoring (no ROS)
def _pred(masks):
    masks = np.asarray(masks, dtype=bool)
    return Prediction(answer="", masks=masks, labels=[f"t{i}" for i in range(len(masks))], scores=[1.0] * len(masks))


def test_scoring_matches_by_iou_and_penalises_missing_results(truth_bag):
    truth = load_ground_truth(truth_bag)
    perfect = {c.index: _pred(c.masks()[::-1]) for c in truth.commands}  # order must not matter
    scores = score_predictions(truth, perfect)
    for report in scores.reports.values():
        assert report.giou == 1.0 and report.ciou == 1.0 and report.count_accuracy == 1.0
    first = truth.commands[0]
    assert scores.commands[0].matched_gt == list(range(len(first.targets)))[::-1]

    missing = dict(perfect)
    missing[0] = None  # no result: every ground truth of command 0 is missed
    scores = score_predictions(truth, missing)
    assert scores.commands[0].missed_gt == list(range(len(first.targets)))
    assert scores.commands[0].entry_ious == [0.0] * len(first.targets)
    assert scores.reports[first.split].count_accuracy < 1.0

    excluded = score_predictions(truth, missing, exclude=[0])
    assert 0 not in excluded.commands
    assert all(r.giou == 1.0 for r in excluded.reports.values())


def test_percentiles_and_contact_sheet():
    stats = percentiles([10.0, 20.0, 30.0, 40.0])
    assert stats["p50"] == 25.0 and stats["max"] == 40.0 and stats["mean"] == 25.0
    assert all(math.isnan(v) for v in percentiles([]).values())
    tiles = [(f"#{i}", np.zeros((50, 100, 3), np.uint8)) for i in range(5)]
    sheet = contact_sheet(tiles, columns=4, tile_width=80)
    assert sheet.ndim == 3 and sheet.shape[1] == 4 * 84
    with pytest.raises(ValueError, match="no tiles"):
        contact_sheet([])


# --------------------------------------------------------------------------- replay through the node
@pytest.fixture(scope="module")
def seg_model(tmp_path_factory, truth_bag):
    """
    Return a tiny checkpoint whose LM head always prefers [SEG]: every answer carries masks.

    The [SEG] row of the head is the mean last-layer state of one prompt, so its score
    is positive on this model's (strongly correlated) hidden states and every command
    gets MAX_NEW_TOKENS targets.
    """
    from m2sa_core.inference import Segmenter
    from m2sa_core.model.checkpoint import save_pretrained
    import torch

    truth = load_ground_truth(truth_bag)
    frame = read_frames(truth_bag)[truth.commands[0].image_stamp_ns]
    segmenter = Segmenter.from_pretrained("tiny")
    with torch.inference_mode():
        entry = segmenter.stages.encode_frame(frame, None, {})
        ids = torch.tensor([segmenter.prompt_ids(truth.commands[0].command)])
        embeds = segmenter.model.merge_image_embeddings(ids, entry.features.clip_embeds)[0]
        hidden = segmenter.model.llm.model(inputs_embeds=embeds).last_hidden_state[0]
    with torch.no_grad():
        head = segmenter.model.llm.lm_head.weight
        head.zero_()
        head[segmenter.seg_token_id] = hidden.mean(0)
    return save_pretrained(segmenter.model, segmenter.tokenizer, tmp_path_factory.mktemp("model") / "seg_tiny")


@pytest.mark.ros
def test_replay_through_node_scores_what_a_direct_segmenter_scores(truth_bag, seg_model, tmp_path):
    from m2sa_core.inference import Segmenter
    from m2sa_ros.bag.evaluate import evaluate_bag

    out = tmp_path / "eval"
    # max_image_age 2 s: the bag's frames were stamped in 2023, so only a node on the
    # bag's clock (/clock, use_sim_time) can find them young enough.
    evaluation = evaluate_bag(truth_bag, out, node_args=["-p", f"model_path:={seg_model}",
                                                         "-p", f"max_new_tokens:={MAX_NEW_TOKENS}",
                                                         "-p", "max_image_age:=2.0"],
                              rate_factor=5.0, progress=False, result_timeout_s=120, startup_timeout_s=120)
    report = evaluation.report
    assert report["counts"]["commands"] == 3
    assert report["counts"]["commands_without_result"] == 0, (out / "node.log").read_text()
    assert report["counts"]["answered_on_another_frame"] == 0
    assert all(c["success"] and len(c["targets"]) == MAX_NEW_TOKENS for c in report["commands"]), \
        [c["error"] for c in report["commands"]]
    # Results matched by the request ids the replayer gave the commands, not by text.
    assert [c["request_id"] for c in report["commands"]] == ["bag-0", "bag-1", "bag-2"]

    # The same model, run directly on the bag's own frames, must score exactly the same.
    truth = load_ground_truth(truth_bag)
    frames = read_frames(truth_bag)
    segmenter = Segmenter.from_pretrained(seg_model, max_new_tokens=MAX_NEW_TOKENS)
    direct = {}
    for command in truth.commands:
        result = segmenter.segment(frames[command.image_stamp_ns], command.command)
        direct[command.index] = prediction_from_result(result, command.height, command.width)
    expected = score_predictions(truth, direct)
    for index, pred in evaluation.predictions.items():
        assert np.array_equal(pred.masks, direct[index].masks), f"command {index}: masks differ"
        assert pred.answer == direct[index].answer
        assert evaluation.scores.commands[index].entry_ious == expected.commands[index].entry_ious
    assert {k: r.as_dict() for k, r in evaluation.scores.reports.items()} == \
        {k: r.as_dict() for k, r in expected.reports.items()}
    assert any(r.giou > 0 for r in expected.reports.values()), "masks should overlap the ground truth somewhere"

    # What the run leaves behind: a results bag, the reports and the overlays.
    results = list(iter_messages(out / "results_bag", [RESULT_TOPIC]))
    assert len(results) == 3
    # Stamped in bag time: between the first frame and a few seconds after the last command.
    bag_times = [m.time_ns for m in iter_messages(truth_bag)]
    assert all(bag_times[0] <= m.time_ns <= bag_times[-1] + 5 * 10**9 for m in results), \
        [m.time_ns for m in results]
    assert bag_info(out / "results_bag")["topics"][RESULT_TOPIC]["type"] == "m2sa_ros/msg/SegmentationResult"
    saved = json.loads((out / "report.json").read_text())
    assert saved["metrics"] == json.loads(json.dumps(report["metrics"]))
    assert set(saved["latency_ms"]) == {"p50", "p90", "p95", "p99", "mean", "max"}
    assert saved["latency_ms"]["p50"] > 0
    markdown = (out / "report.md").read_text()
    assert "without result" in markdown and truth.commands[0].command in markdown
    overlays = sorted(p.name for p in (out / "overlays").iterdir())
    assert overlays == ["cmd_000.png", "cmd_001.png", "cmd_002.png", "contact_sheet.png"]


@pytest.mark.ros
def test_command_without_image_in_bag_is_reported_not_lost(synth, tmp_path):
    from m2sa_ros.bag.evaluate import evaluate_bag

    records = []
    for name in TEST_FILES:
        records.extend(read_dataset(synth / name).records)
    plan = plan_from_records(records, rate_hz=5.0)
    dropped = plan.frames.pop(0)  # the first scene's image never made it into the recording
    orphans = [c.index for c in plan.ground_truth.commands if c.image_stamp_ns == dropped.stamp_ns]
    assert orphans and len(orphans) < len(plan.ground_truth.commands)
    bag = write_bag(plan, tmp_path / "bag", "sqlite3")

    out = tmp_path / "eval"
    evaluation = evaluate_bag(bag, out, node_args=["-p", "preset:=tiny", "-p", "max_new_tokens:=1",
                                                   "-p", "wait_for_image:=0.0"],
                              rate_factor=5.0, progress=False, result_timeout_s=120, startup_timeout_s=120)
    report = evaluation.report
    counts = report["counts"]
    assert counts["commands"] == len(plan.ground_truth.commands)
    assert counts["commands_without_image"] == len(orphans)
    assert counts["commands_without_result"] == 0
    for index in orphans:
        entry = report["commands"][index]
        assert not entry["image_in_bag"] and entry["has_result"] and not entry["scored"]
        assert any("is not in the bag" in p for p in entry["problems"])
    # The node had no image for the first orphan at all: it answered with a clear error.
    first = report["commands"][orphans[0]]
    assert not first["success"] and "no image yet" in first["error"]
    assert counts["scored"] == len(plan.ground_truth.commands) - len(orphans)
    markdown = (out / "report.md").read_text()
    assert "## Problems" in markdown and f"command {orphans[0]}: its image" in markdown
    assert isinstance(GroundTruth.load(bag / "ground_truth.json"), GroundTruth)


def test_each_target_is_scored_on_the_shape_its_mask_type_asks_for(truth_bag):
    truth = load_ground_truth(truth_bag)
    command = truth.commands[0]
    gt = command.masks()
    assert len(gt) >= 1
    wrong = ~gt
    n = len(gt)

    def prediction(types, amodal):
        return Prediction(answer="", masks=wrong, labels=["a"] * n, scores=[1.0] * n,
                          amodal_masks=amodal, mask_types=types)

    subset = GroundTruth(frames=truth.frames, commands=[command])
    score = lambda pred: score_predictions(subset, {0: pred}).commands[0].entry_ious  # noqa: E731
    assert score(prediction(["amodal"] * n, list(gt.copy()))) == [1.0] * n
    # Asked for the visible shape: the (here wrong) visible mask is scored, not the amodal one.
    assert score(prediction(["modal"] * n, list(gt.copy()))) != [1.0] * n
    # Asked for the complete shape but none sent: the visible mask stands in.
    assert score(prediction(["amodal"] * n, [None] * n)) != [1.0] * n
    # Per target, not all-or-nothing: only the first target is an amodal one.
    mixed = prediction(["amodal"] + ["modal"] * (n - 1), [gt[0].copy()] + [None] * (n - 1))
    np.testing.assert_array_equal(mixed.requested_masks()[0], gt[0])
    if n > 1:
        np.testing.assert_array_equal(mixed.requested_masks()[1:], wrong[1:])


def test_cli_rejects_bad_input_before_starting_a_node(truth_bag, tmp_path, capsys):
    import shutil

    from m2sa_ros.bag.evaluate import main

    assert main(["--bag", str(tmp_path / "nope"), "--out", str(tmp_path / "a")]) == 2
    assert "not a rosbag2 directory" in capsys.readouterr().err

    bag = tmp_path / "short_truth"
    shutil.copytree(truth_bag, bag)
    data = json.loads((bag / "ground_truth.json").read_text())
    data["commands"] = data["commands"][:-1]
    (bag / "ground_truth.json").write_text(json.dumps(data))
    assert main(["--bag", str(bag), "--out", str(tmp_path / "b")]) == 2
    assert "3 command messages but the ground truth lists 2" in capsys.readouterr().err
    assert not (tmp_path / "b" / "node.log").exists(), "no node is started for a bag that cannot be scored"

    with pytest.raises(SystemExit):
        main(["--bag", str(truth_bag), "--out", str(tmp_path / "c"), "--no-start"])
    assert "--no-start needs --namespace" in capsys.readouterr().err
