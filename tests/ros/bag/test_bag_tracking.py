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
Tracking bags: ``m2sa-bag make --sequences`` and ``m2sa-bag-eval`` through the node's ``track`` action.

The recording tests read the files back with rosbags; the replay tests start the real
perception node on the shipped tiny model, and the per-frame gIoU of the report is
recomputed here from the results bag alone (its SegmentationResult messages matched to
frames by header stamp, with a brute-force matching of our own), not from the
evaluator's objects.
"""

from __future__ import annotations

from collections import defaultdict
import itertools
import json
from pathlib import Path

from m2sa_core.data.rle import decode_rle
from m2sa_core.shipped_model import SHIPPED_MODEL
from m2sa_core.types import MaskType
from m2sa_ros.bag.bag_io import (
    bag_info,
    decode,
    iter_messages,
    read_frames,
    RESULT_TOPIC,
    stamp_ns,
)
from m2sa_ros.bag.cli import main as bag_main
from m2sa_ros.bag.depth_recording import DepthOptions
from m2sa_ros.bag.geometry_truth import CAMERA_INFO_TOPIC, DEPTH_TOPIC, load_geometry_ground_truth
from m2sa_ros.bag.ground_truth import (
    COMMAND_TOPIC,
    GroundTruth,
    IMAGE_TOPIC,
    TRACKING_GROUND_TRUTH_FILE,
    TrackingGroundTruth,
)
from m2sa_ros.bag.sequences import make_sequence_bag, render_sequence_k
import numpy as np
import pytest

MODEL = SHIPPED_MODEL
SEQUENCES, FRAMES, SIZE, SEED = 2, 3, 128, 4242


@pytest.fixture(scope="module")
def track_bag(tmp_path_factory) -> Path:
    """Two sequences with clean registered depth (the 3-D truth and the node measure the same surface)."""
    out = tmp_path_factory.mktemp("tracking") / "bag"
    return make_sequence_bag(out, SEQUENCES, n_frames=FRAMES, motion="mixed", seed=SEED, size=SIZE, rate_hz=5.0,
                             depth=DepthOptions("32FC1", "none"))


# --------------------------------------------------------------------------- recording (no DDS)
def test_sequence_bag_holds_every_frame_one_command_per_sequence_and_per_frame_ground_truth(track_bag):
    info = bag_info(track_bag)
    assert info["topics"][IMAGE_TOPIC]["count"] == SEQUENCES * FRAMES
    assert info["topics"][COMMAND_TOPIC]["count"] == SEQUENCES
    assert info["tracking_ground_truth"] == {"sequences": SEQUENCES, "frames_per_sequence": FRAMES,
                                             "motion": "mixed", "frames": SEQUENCES * FRAMES}
    tracking = TrackingGroundTruth.load(track_bag / TRACKING_GROUND_TRUTH_FILE)
    assert tracking.generator["seed"] == SEED and len(tracking.sequences) == SEQUENCES

    # Bag order: each sequence's frames in turn, its command after its first frame only.
    order = []
    for message in iter_messages(track_bag, [IMAGE_TOPIC, COMMAND_TOPIC]):
        order.append(("frame", stamp_ns(decode(message).header)) if message.topic == IMAGE_TOPIC
                     else ("command", decode(message).data, message.time_ns))
    expected = []
    for sequence in tracking.sequences:
        stamps = [f.image_stamp_ns for f in sequence.frames]
        assert stamps[0] < sequence.time_ns < stamps[1]
        expected += [("frame", stamps[0]), ("command", sequence.command, sequence.time_ns)]
        expected += [("frame", s) for s in stamps[1:]]
    assert order == expected

    # Pixels and masks are the rendered sequence's, frame by frame (the m2sa-eval stream rule).
    frames = read_frames(track_bag)
    for sequence in tracking.sequences:
        rendered = render_sequence_k(SEED, sequence.index, FRAMES, "mixed", SIZE)
        question = rendered.questions[sequence.index % len(rendered.questions)]
        assert (sequence.command, sequence.mask_type, sequence.split) == \
            (question.question, question.mask_type, question.family)
        for t, frame in enumerate(sequence.frames):
            np.testing.assert_array_equal(frames[frame.image_stamp_ns], rendered.frames[t].image)
            assert len(frame.targets) == len(question.targets)
            for target, key in zip(frame.targets, question.targets):
                np.testing.assert_array_equal(decode_rle(target.segmentation, SIZE, SIZE),
                                              rendered.target_mask(t, key, question.mask_type))
                np.testing.assert_array_equal(decode_rle(target.amodal_segmentation, SIZE, SIZE),
                                              rendered.target_mask(t, key, MaskType.AMODAL))
    # The ordinary sidecar (version 1) still reads: each command on its sequence's first frame.
    truth = GroundTruth.load(track_bag / "ground_truth.json")
    assert [c.image_stamp_ns for c in truth.commands] == [s.frames[0].image_stamp_ns for s in tracking.sequences]
    assert [c.targets for c in truth.commands] == [s.frames[0].targets for s in tracking.sequences]


def test_sequence_bag_records_each_frames_depth_and_its_targets_3d_truth(track_bag):
    from m2sa_core.data.synthetic.dataset_depth import DEPTH_STREAM
    from m2sa_core.data.synthetic.sequence_depth import sequence_depths
    from m2sa_ros.messages.image_conversion import depth_to_metres

    tracking = TrackingGroundTruth.load(track_bag / TRACKING_GROUND_TRUTH_FILE)
    geometry = load_geometry_ground_truth(track_bag)
    assert geometry is not None and geometry.artefacts == {"level": "none"} and geometry.problems == []
    images = {stamp_ns(decode(m).header): (m.time_ns, decode(m)) for m in iter_messages(track_bag, [IMAGE_TOPIC])}
    depths = {stamp_ns(decode(m).header): (m.time_ns, decode(m)) for m in iter_messages(track_bag, [DEPTH_TOPIC])}
    infos = {stamp_ns(decode(m).header): decode(m) for m in iter_messages(track_bag, [CAMERA_INFO_TOPIC])}
    assert set(depths) == set(infos) == set(images) and len(images) == SEQUENCES * FRAMES
    truth = GroundTruth.load(track_bag / "ground_truth.json")
    moved = 0
    for sequence in tracking.sequences:
        rendered = render_sequence_k(SEED, sequence.index, FRAMES, "mixed", SIZE)
        question = rendered.questions[sequence.index % len(rendered.questions)]
        expected = sequence_depths(rendered, (SEED, sequence.index, DEPTH_STREAM))
        frames = geometry.sequences[sequence.index]
        assert len(frames) == FRAMES
        for t, (frame, sd) in enumerate(zip(sequence.frames, expected)):
            stamp = frame.image_stamp_ns
            (depth_time, depth), (image_time, image) = depths[stamp], images[stamp]
            assert depth_time == image_time and depth.header.frame_id == image.header.frame_id
            assert np.array_equal(depth_to_metres(depth), sd.depth), "clean depth: the rendered one"
            assert infos[stamp].k.tolist() == sd.camera.k == geometry.frames[stamp].k
            assert len(frames[t]) == len(question.targets)
            for got, (index, part) in zip(frames[t], question.targets):
                want = sd.truth(index, part or None)
                if want is None:
                    assert got is None
                    continue
                np.testing.assert_allclose(got.centroid, want.centroid, atol=5e-7)
                np.testing.assert_allclose(got.normal, want.normal, atol=5e-7)
                assert got.pixels == want.pixels
            if t and frames[t][0] is not None and frames[t - 1][0] is not None:
                moved += not np.allclose(frames[t][0].centroid, frames[t - 1][0].centroid)
        # The command's own frame: the ordinary sidecar's command is scored with frame 0's truth.
        (command,) = [c for c in truth.commands if c.image_stamp_ns == sequence.frames[0].image_stamp_ns]
        assert [None if g is None else g.pixels for g in geometry.commands[command.index]] == \
            [None if g is None else g.pixels for g in frames[0]]
    assert moved, "the targets move in 3-D across a sequence"


def test_make_cli_records_sequences_and_refuses_bad_options_in_one_line(tmp_path, capsys):
    out = tmp_path / "cli_bag"
    assert bag_main(["make", "--sequences", "1", "--frames", "2", "--size", "64", "--motion", "pan",
                     "--out", str(out), "--storage", "sqlite3", "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "1 sequences of 2 frames (pan)" in printed and "; depth (32FC1, artefacts mild) on 2 frames" in printed
    assert bag_info(out)["storage"] == "sqlite3"
    assert bag_info(out)["geometry_ground_truth"]["sequences"] == 1
    assert bag_main(["make", "--sequences", "1", "--frames", "2", "--size", "64", "--no-depth",
                     "--out", str(tmp_path / "plain"), "--quiet"]) == 0
    assert capsys.readouterr().out.rstrip().endswith("; no depth")
    assert DEPTH_TOPIC not in bag_info(tmp_path / "plain")["topics"]

    assert bag_main(["make", "--sequences", "1", "--frames", "1", "--out", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err
    assert err.strip() == ("m2sa-bag: error: --frames must be >= 2 (the answered frame and at least one "
                           "tracked frame), got 1")
    assert bag_main(["make", "--sequences", "1", "--motion", "spin", "--out", str(tmp_path / "b")]) == 2
    assert "--motion must be one of pan, zoom, nudge, occluder, mixed" in capsys.readouterr().err
    assert bag_main(["make", "--sequences", "1", "--out", str(out)]) == 2
    assert "already exists" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bag_main(["make", "--data", "x.json", "--frames", "4", "--out", str(tmp_path / "c")])
    assert "--frames only apply with --sequences" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bag_main(["make", "--out", str(tmp_path / "d")])
    assert "make needs --data FILE" in capsys.readouterr().err
    assert not any((tmp_path / n).exists() for n in "abcd")


def test_tracking_eval_refuses_bad_input_before_starting_a_node(track_bag, tmp_path, capsys):
    import shutil

    from m2sa_ros.bag.evaluate import main

    plain = tmp_path / "plain"  # an ordinary bag: no tracking sidecar
    shutil.copytree(track_bag, plain)
    (plain / TRACKING_GROUND_TRUTH_FILE).unlink()
    assert main(["--bag", str(plain), "--out", str(tmp_path / "a"), "--protocol", "tracking"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("m2sa-bag-eval: error: ") and "has no tracking ground truth" in err
    assert len(err.strip().splitlines()) == 1

    short = tmp_path / "short"
    shutil.copytree(track_bag, short)
    data = json.loads((short / TRACKING_GROUND_TRUTH_FILE).read_text())
    data["sequences"] = data["sequences"][:1]
    (short / TRACKING_GROUND_TRUTH_FILE).write_text(json.dumps(data))
    assert main(["--bag", str(short), "--out", str(tmp_path / "b")]) == 2  # auto: tracking
    assert "2 command messages on /m2sa/command but the tracking ground truth lists 1 sequences" in \
        capsys.readouterr().err
    data["version"] = 2
    (short / TRACKING_GROUND_TRUTH_FILE).write_text(json.dumps(data))
    assert main(["--bag", str(short), "--out", str(tmp_path / "c")]) == 2
    assert "version 2 is not supported" in capsys.readouterr().err
    assert main(["--bag", str(track_bag), "--out", str(tmp_path / "d"), "--lost-frames", "-1"]) == 2
    assert "--lost-frames must be >= 0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--bag", str(plain), "--out", str(tmp_path / "e"), "--use-previous-mask"])
    assert "only apply to --protocol tracking" in capsys.readouterr().err
    assert not any((tmp_path / n / "node.log").exists() for n in "abcde"), "no node for a bag that cannot be scored"


# --------------------------------------------------------------------------- through the node
def _requested_masks(result) -> list[np.ndarray]:
    """Per target of a rosbags SegmentationResult, the shape its mask_type asks for, as a client decodes it."""
    from m2sa_ros.messages.mask_encoding import requested_mask

    return [requested_mask(target, result.height, result.width) for target in result.targets]


def _entries(preds: list[np.ndarray], gts: list[np.ndarray]) -> list[float]:
    """Return the IoUs entering gIoU: the best one-to-one pairing (tried exhaustively), 0 for the unpaired."""
    def iou(a, b) -> float:
        union = np.logical_or(a, b).sum()
        return 1.0 if union == 0 else float(np.logical_and(a, b).sum() / union)

    if not preds or not gts:
        return [0.0] * (len(preds) + len(gts))
    small, large = (preds, gts) if len(preds) <= len(gts) else (gts, preds)
    best = max((sum(iou(small[i], large[j]) for i, j in enumerate(perm)), perm)
               for perm in itertools.permutations(range(len(large)), len(small)))
    pairs = [iou(small[i], large[j]) for i, j in enumerate(best[1])]
    return pairs + [0.0] * (len(large) - len(small))


def _losing_goal_traffic(monkeypatch) -> list[tuple[str, bytes]]:
    """
    Lose the middleware's way the first goal exchange of each sequence: track-0's response, track-1's request.

    track-0's goal reaches the node, which accepts and runs it, but its response never
    comes back (rmw_fastrtps drops it, ros2/ros2 issue 1253); track-1's first request never
    leaves. Returns every send, as (request id, goal id), in order.
    """
    from m2sa_ros.bag import tracking
    from rclpy.action import ActionClient
    from rclpy.task import Future

    real = ActionClient.send_goal_async
    sends: list[tuple[str, bytes]] = []

    def send_goal_async(self, goal, feedback_callback=None, goal_uuid=None):
        sends.append((goal.request_id, bytes(goal_uuid.uuid)))
        first = [r for r, _ in sends].count(goal.request_id) == 1
        if first and goal.request_id == "track-0":
            real(self, goal, feedback_callback, goal_uuid)
            return Future()
        if first and goal.request_id == "track-1":
            return Future()
        return real(self, goal, feedback_callback, goal_uuid)

    monkeypatch.setattr(ActionClient, "send_goal_async", send_goal_async)
    monkeypatch.setattr(tracking, "GOAL_RESPONSE_TIMEOUT_S", 1.0)
    return sends


@pytest.mark.integration
@pytest.mark.ros
def test_tracking_replay_through_the_node_scores_every_frame_as_the_results_bag_says(track_bag, tmp_path,
                                                                                     monkeypatch):
    """Also when the middleware loses a goal's response or its request: the goal runs once, under its one id."""
    from m2sa_ros.bag.evaluate import evaluate_tracking_bag

    sends = _losing_goal_traffic(monkeypatch)
    out = tmp_path / "eval"
    evaluation = evaluate_tracking_bag(track_bag, out, node_args=["-p", f"model_path:={MODEL}",
                                                                  "-p", "max_image_age:=2.0"],
                                       rate_factor=5.0, progress=False, result_timeout_s=120,
                                       startup_timeout_s=120)
    report = evaluation.report
    counts = report["counts"]
    log = (out / "node.log").read_text() if (out / "node.log").exists() else ""
    assert counts["goals_accepted"] == SEQUENCES and counts["final_results"] == SEQUENCES, log
    # Every send of a goal carried its one goal id; track-1 went again (track-0's feedback may
    # have proved it running before its resend); one result per frame below proves one track each.
    assert all(len({goal_id for r, goal_id in sends if r == request_id}) == 1 for request_id in ("track-0", "track-1"))
    assert [r for r, _ in sends].count("track-1") >= 2, sends
    assert counts["goals_without_final_result"] == 0 and counts["frames_without_result"] == 0, report["sequences"]
    # Both answers name a target (the tiny model on these seeds), so both tracks run to their cancel.
    assert all(s["frames"][0]["targets"] for s in report["sequences"]), [s["answer"] for s in report["sequences"]]
    assert report["end_reasons"] == {"cancelled": SEQUENCES}
    assert all(s["status"] == "canceled" for s in report["sequences"])
    for seq in report["sequences"]:
        assert seq["request_id"] == f"track-{seq['index']}" and seq["final_result"]
        got = [f for f in seq["frames"] if f["has_result"]]
        assert [f["frame_seq"] for f in got] == list(range(len(got)))
        assert all(f["result_stamp_ns"] == f["image_stamp_ns"] for f in got)  # each on its own frame
        assert seq["final_frames"] == len(got) - 1
    assert counts["tracked_on_another_frame"] == 0
    assert counts["frames_with_result"] == sum(len([f for f in s["frames"][1:] if f["has_result"]])
                                               for s in report["sequences"])
    assert report["ms_per_tracked_frame"]["p50"] > 0 and report["answer_inference_ms"]["p50"] > 0

    # Recompute gIoU per frame from the results bag and the ground truth alone.
    tracking = TrackingGroundTruth.load(track_bag / TRACKING_GROUND_TRUTH_FILE)
    where = tracking.frame_index()
    results = {}
    for message in iter_messages(out / "results_bag", [RESULT_TOPIC]):
        msg = decode(message)
        key = (msg.request_id, stamp_ns(msg.header))
        assert key not in results, f"two results for {key}"
        results[key] = msg
    entries = defaultdict(list)
    for sequence in tracking.sequences:
        for t, frame in enumerate(sequence.frames):
            gts = [decode_rle(target.segmentation, SIZE, SIZE) for target in frame.targets]
            result = results.get((f"track-{sequence.index}", frame.image_stamp_ns))
            preds = _requested_masks(result) if result is not None else []
            mine = _entries(preds, gts)
            assert sorted(mine) == pytest.approx(sorted(report["sequences"][sequence.index]["frames"][t]["entry_ious"]))
            entries[t] += mine
            if t:
                entries["after_first"] += mine
    assert len(results) == sum(1 for s in report["sequences"] for f in s["frames"] if f["has_result"])
    assert set(where) >= {stamp for _, stamp in results}
    for t in range(FRAMES):
        assert report["per_frame"][t]["giou"] == pytest.approx(np.mean(entries[t])), t
    assert report["overall"]["giou"] == pytest.approx(np.mean(entries["after_first"]))
    assert any(v > 0 for v in entries["after_first"]), "tracked masks should overlap the ground truth somewhere"

    saved = json.loads((out / "report.json").read_text())
    assert saved["protocol"] == "tracking" and saved["per_frame"] == json.loads(json.dumps(report["per_frame"]))
    markdown = (out / "report.md").read_text()
    assert "## gIoU per frame" in markdown and "tracked frames (1..)" in markdown and "## How the tracks ended" \
        in markdown
    assert sorted(p.name for p in (out / "overlays").iterdir()) == [f"seq_{k:03d}.png" for k in range(SEQUENCES)]

    # 3-D: the bag's depth went to the node with every frame, tracked ones included, and every
    # matched target of every frame is scored against that frame's truth.
    geometry = report["geometry"]
    assert geometry["scored"] and geometry["problems"] == [], geometry
    splits = geometry["splits"]
    assert set(splits) <= {f"frame_{t}" for t in range(FRAMES)} | {"after_first"} and "after_first" in splits
    with_pose = defaultdict(int)
    for seq in report["sequences"]:
        for f in seq["frames"]:
            with_pose[f["frame"]] += sum(1 for target in f["targets"] if target["has_pose"])
    assert all(with_pose[t] for t in range(FRAMES)), f"every frame's targets have poses: {dict(with_pose)}"
    tracked = splits["after_first"]
    assert tracked["pairs"] == sum(splits[k]["pairs"] for k in splits if k not in ("frame_0", "after_first"))
    assert tracked["pose_share"] > 0.5 and tracked["median_normal_deg"] < 10.0, tracked
    assert "## 3-D geometry" in markdown and "| after_first |" in markdown


@pytest.mark.integration
@pytest.mark.ros
def test_a_lost_track_ends_once_and_its_later_frames_are_scored_as_missed(track_bag, tmp_path, capsys):
    from m2sa_ros.bag.evaluate import main

    out = tmp_path / "lost"
    # min_score 1: every target is low on every frame; lost_frames 1: the track gives up after one.
    status = main(["--bag", str(track_bag), "--out", str(out), "--model-path", str(MODEL), "--rate-factor", "5",
                   "--min-score", "1.0", "--lost-frames", "1", "--no-overlays", "--quiet",
                   "--result-timeout", "120", "--startup-timeout", "120"])
    printed = capsys.readouterr().out
    assert status == 0, printed
    report = json.loads((out / "report.json").read_text())
    counts = report["counts"]
    assert report["end_reasons"] == {"lost": SEQUENCES}
    assert counts["final_results"] == SEQUENCES and counts["frames_without_result"] == 0
    assert counts["frames_with_result"] == SEQUENCES  # frame 1 of each sequence, then the track gives up
    assert counts["frames_after_track_end"] == SEQUENCES * (FRAMES - 1) - counts["frames_with_result"]
    for seq in report["sequences"]:
        assert seq["status"] == "succeeded" and seq["reason"] == "lost"
        last = seq["frames"][-1]
        assert not last["has_result"] and last["scored"] and set(last["entry_ious"]) <= {0.0}
        # Either the end was known before the frame went out, or it came while the frame waited.
        assert len(last["problems"]) == 1 and "track had ended (lost)" in last["problems"][0] or \
            last["problems"] == ["the track ended (lost) before this frame had a result"], last["problems"]
    assert "ended: lost 2" in printed
