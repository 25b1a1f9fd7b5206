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
Bags with depth, their 3-D ground truth and the 3-D errors scored from them.

The recorder's depth and camera_info, the 3-D ground truth sidecar, and the 3-D errors
``m2sa-bag-eval`` scores from the node's targets.

No DDS here: bags are read back with rosbags, results are constructed.
"""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

from m2sa_core.data.readers import read_dataset
from m2sa_core.data.rle import encode_mask
from m2sa_core.data.synthetic.dataset_depth import find_generator, scene_depth
from m2sa_core.evaluation.geometry_errors import size_error_mm
from m2sa_ros.bag.bag_io import decode, iter_messages, make_bag, message_typestore, plan_from_records
from m2sa_ros.bag.cli import main
from m2sa_ros.bag.depth_recording import DepthOptions, plan_depth, scene_target
from m2sa_ros.bag.geometry_report import geometry_markdown, geometry_report, geometry_summary_line
from m2sa_ros.bag.geometry_scoring import score_geometry
from m2sa_ros.bag.geometry_truth import (
    CAMERA_INFO_TOPIC,
    DEPTH_TOPIC,
    GeometryGroundTruth,
    load_geometry_ground_truth,
    TargetGeometryTruth,
)
from m2sa_ros.bag.ground_truth import (
    ground_truth_path,
    GroundTruth,
    GroundTruthCommand,
    GroundTruthTarget,
    IMAGE_TOPIC,
)
from m2sa_ros.bag.scoring import PredictedPose, Prediction, score_predictions
from m2sa_ros.messages.image_conversion import depth_to_metres
import numpy as np
import pytest

TEST_FILES = ("MMR_test_obj_only.json", "MMR_test_part_only.json", "MMR_test_mixed.json")


def _messages(bag):
    out: dict[str, list] = {}
    for message in iter_messages(bag):
        out.setdefault(message.topic, []).append((message, decode(message)))
    return out


@pytest.mark.parametrize("encoding", ["32FC1", "16UC1"])
def test_recorder_writes_depth_and_camera_info_with_each_frames_stamp_and_frame(synth, tmp_path, encoding):
    data = [synth / name for name in TEST_FILES]
    out = make_bag(data, tmp_path / "bag", storage="sqlite3", frame_id="cam_optical",
                   depth=DepthOptions(encoding, "none"))
    topics = _messages(out)
    images = {m.time_ns: msg for m, msg in topics[IMAGE_TOPIC]}
    depths, infos = topics[DEPTH_TOPIC], topics[CAMERA_INFO_TOPIC]
    assert len(depths) == len(infos) == len(images) >= 2
    generator = find_generator(synth)
    geometry = load_geometry_ground_truth(out)
    truth = GroundTruth.load(ground_truth_path(out))
    for (dm, depth), (im, info) in zip(depths, infos):
        image = images[dm.time_ns]
        assert dm.time_ns == im.time_ns, "depth, camera_info and the colour image share their bag time"
        for msg in (depth, info):
            assert (msg.header.stamp.sec, msg.header.stamp.nanosec) == (image.header.stamp.sec,
                                                                        image.header.stamp.nanosec)
            assert msg.header.frame_id == image.header.frame_id == "cam_optical"
        assert depth.encoding == encoding and (depth.height, depth.width) == (image.height, image.width)
        assert (info.height, info.width) == (image.height, image.width)
        index = int(truth.frames[dm.time_ns].file_name[:6])
        _, sd = scene_depth(generator, index)
        assert info.k.tolist() == sd.camera.k and info.distortion_model == "plumb_bob"
        assert info.p.tolist() == [sd.camera.fx, 0, sd.camera.cx, 0, 0, sd.camera.fy, sd.camera.cy, 0, 0, 0, 1, 0]
        metres = depth_to_metres(depth)
        if encoding == "32FC1":  # clean ("none"): exactly the rendered depth
            assert np.array_equal(metres, sd.depth)
        else:
            assert np.abs(metres - sd.depth).max() <= 0.0005 + 1e-6
        assert geometry.frames[dm.time_ns].k == sd.camera.k
    assert geometry.encoding == encoding and geometry.artefacts == {"level": "none"}


def test_sidecar_holds_each_targets_visible_surface_truth(synth, tmp_path):
    records = [r for name in TEST_FILES for r in read_dataset(synth / name).records]
    plan = plan_from_records(records)
    assert plan_depth(plan, records, DepthOptions(), data_dirs=[synth]) == []
    generator = find_generator(synth)
    checked = parts = 0
    for command in plan.ground_truth.commands:
        file_name = plan.ground_truth.frames[command.image_stamp_ns].file_name
        scene, sd = scene_depth(generator, int(file_name[:6]))
        truths = plan.geometry.commands[command.index]
        assert len(truths) == len(command.targets)
        for target, got in zip(command.targets, truths):
            index, part = scene_target(scene, target)
            expected = sd.truth(index, part)
            assert np.array_equal(scene.objects[index].parts_visible[part] if part else scene.objects[index].visible,
                                  target.mask(command.height, command.width)) or command.mask_type == "amodal"
            assert got is not None and got.pixels == expected.pixels
            for name in ("centroid", "normal", "box_centre", "box_axes", "extents"):
                np.testing.assert_allclose(getattr(got, name), getattr(expected, name), atol=0)
            # The support points bound the true points along any axis: same size error.
            axes = np.linalg.qr(np.random.default_rng(checked).normal(size=(3, 3)))[0]
            assert size_error_mm(axes, [0.05, 0.05, 0], got.support) == pytest.approx(
                size_error_mm(axes, [0.05, 0.05, 0], expected.points), abs=1e-9)
            checked += 1
            parts += bool(part)
    assert checked >= 6 and parts >= 1
    # Round trip through JSON (micrometres).
    back = GeometryGroundTruth.from_json(json.loads(json.dumps(plan.geometry.to_json())))
    assert back.problems == [] and back.commands.keys() == plan.geometry.commands.keys()
    first = next(t for ts in plan.geometry.commands.values() for t in ts if t is not None)
    again = next(t for ts in back.commands.values() for t in ts if t is not None)
    np.testing.assert_allclose(again.centroid, first.centroid, atol=5e-7)


def test_depth_leaves_the_rgb_and_masks_byte_identical(synth, tmp_path):
    data = [str(synth / name) for name in TEST_FILES]
    data_args = [arg for d in data for arg in ("--data", d)]
    assert main(["make", *data_args, "--out", str(tmp_path / "with"), "--quiet"]) == 0
    assert main(["make", *data_args, "--out", str(tmp_path / "without"), "--no-depth", "--quiet"]) == 0
    assert ground_truth_path(tmp_path / "with").read_bytes() == ground_truth_path(tmp_path / "without").read_bytes()

    def raw(bag, topics):
        return [(m.topic, m.time_ns, m.raw) for m in iter_messages(bag, topics)]

    kept = [IMAGE_TOPIC, "/m2sa/command"]
    assert raw(tmp_path / "with", kept) == raw(tmp_path / "without", kept)
    assert load_geometry_ground_truth(tmp_path / "without") is None
    assert {m.topic for m in iter_messages(tmp_path / "without")} == set(kept)
    mild = load_geometry_ground_truth(tmp_path / "with")
    assert mild.artefacts["level"] == "mild" and mild.encoding == "32FC1"
    depth = depth_to_metres(decode(next(iter_messages(tmp_path / "with", [DEPTH_TOPIC]))))
    assert 0.005 < np.isnan(depth).mean() < 0.05, "mild: about 2 % holes"


def test_data_without_a_synthetic_generator_gets_no_depth_and_one_note(synth, tmp_path, capsys):
    import shutil

    copy = tmp_path / "real"
    shutil.copytree(synth / "images", copy / "images")
    shutil.copy(synth / "MMR_test_mixed.json", copy)  # no r2sm/masks header: not the synthetic world's
    assert main(["make", "--data", str(copy / "MMR_test_mixed.json"), "--out", str(tmp_path / "bag"), "--quiet"]) == 0
    captured = capsys.readouterr()
    notes = [line for line in captured.err.splitlines() if "no depth" in line]
    assert len(notes) == 1 and "generator" in notes[0]
    assert captured.out.rstrip().endswith("; no depth")
    assert load_geometry_ground_truth(tmp_path / "bag") is None


# --------------------------------------------------------------------------- scoring
H = W = 40


def _square(x0, y0, side=10):
    mask = np.zeros((H, W), bool)
    mask[y0:y0 + side, x0:x0 + side] = True
    return mask


def _gt_target(label, mask):
    return GroundTruthTarget(label=label, category_name=label, object_name=label, instance=1, part_name="",
                             granularity=0, segmentation=encode_mask(mask))


def _flat_truth(centre, half=0.05):
    """Return a 10 cm square facing the camera (normal -z) centred on ``centre``."""
    centre = np.asarray(centre, float)
    corners = np.array([[sx * half, sy * half, 0.0] for sx in (-1, 1) for sy in (-1, 1)]) + centre
    axes = np.array([[1.0, 0, 0], [0, -1.0, 0], [0, 0, -1.0]]).T  # x right, y up the face, z to the camera
    return TargetGeometryTruth(centre, np.array([0, 0, -1.0]), centre, axes, np.array([2 * half, 2 * half, 0]),
                               corners, 100)


def _pose(centroid, centre, rotation, extents, has_pose=True):
    return PredictedPose(True, np.asarray(centroid, float), has_pose, np.asarray(centre, float),
                         np.asarray(rotation, float), np.asarray(extents, float))


def _rot_x(deg):
    a = math.radians(deg)
    return np.array([[1, 0, 0], [0, math.cos(a), -math.sin(a)], [0, math.sin(a), math.cos(a)]])


def _constructed():
    """Two commands: one with a good and a tilted target, one whose target has no pose."""
    a, b, c = _square(2, 2), _square(20, 2), _square(5, 25)
    truth = GroundTruth(commands=[
        GroundTruthCommand(0, 10, 1, "a and b", "test_obj_only", "", "r0", H, W,
                           [_gt_target("a", a), _gt_target("b", b)]),
        GroundTruthCommand(1, 20, 1, "c", "test_part_only", "", "r1", H, W, [_gt_target("c", c)])])
    base = np.array([[1.0, 0, 0], [0, -1.0, 0], [0, 0, -1.0]]).T
    geometry = GeometryGroundTruth(commands={0: [_flat_truth([0, 0, 1.0]), _flat_truth([0.2, 0, 1.0])],
                                             1: [_flat_truth([0, 0.1, 0.8])]})
    predictions = {
        # b first: matching pairs by IoU, not by order. b: 3-4-0 mm off, tilted 10 deg, 103 x 100 mm.
        0: Prediction("", np.stack([b, a]), ["b", "a"], [0.9, 0.9], poses=[
            _pose([0.203, 0.004, 1.0], [0.2, 0.0, 1.012], base @ _rot_x(10), [0.103, 0.100, 0.004]),
            _pose([0.0, 0.0, 1.001], [0.0, 0.0, 1.0], base, [0.1, 0.1, 0.0])]),
        1: Prediction("", c[None], ["c"], [0.9], poses=[_pose([0, 0.1, 0.8], [0, 0, 0], np.eye(3), [0, 0, 0],
                                                              has_pose=False)]),
    }
    return truth, geometry, predictions


def test_3d_errors_of_constructed_results_are_exact():
    truth, geometry, predictions = _constructed()
    scores = score_predictions(truth, predictions)
    result = score_geometry(geometry, truth, predictions, scores)
    pairs = {(p.index, p.target): p for p in result.pairs}
    assert set(pairs) == {(0, 0), (0, 1), (1, 0)} and pairs[(0, 0)].gt == 1 and pairs[(0, 1)].gt == 0
    tilted = pairs[(0, 0)]
    assert tilted.centroid_mm == pytest.approx(5.0, abs=1e-9)
    assert tilted.centre_mm == pytest.approx(12.0, abs=1e-9)
    assert tilted.normal_deg == pytest.approx(10.0, abs=1e-9)
    # x: 103 vs 100 mm; y (tilted 10 deg out of the face): 100 vs 100 cos 10 = 98.48 mm -> 3 mm.
    assert tilted.size_mm == pytest.approx(3.0, abs=1e-9)
    good = pairs[(0, 1)]
    assert (good.centroid_mm, good.centre_mm, good.normal_deg, good.size_mm) == pytest.approx((1.0, 0, 0, 0),
                                                                                              abs=1e-9)
    no_pose = pairs[(1, 0)]
    assert not no_pose.has_pose and no_pose.centroid_mm == pytest.approx(0, abs=1e-9)
    assert math.isnan(no_pose.normal_deg) and math.isnan(no_pose.size_mm)
    obj, part, overall = result.splits["test_obj_only"], result.splits["test_part_only"], result.splits["all"]
    assert (obj["pairs"], obj["with_pose"], obj["pose_share"]) == (2, 2, 1.0)
    assert obj["median_centroid_mm"] == pytest.approx(3.0) and obj["median_normal_deg"] == pytest.approx(5.0)
    assert obj["median_size_mm"] == pytest.approx(1.5) and obj["median_centre_mm"] == pytest.approx(6.0)
    assert (part["pairs"], part["pose_share"]) == (1, 0.0) and math.isnan(part["median_normal_deg"])
    assert overall["pairs"] == 3 and overall["pose_share"] == pytest.approx(2 / 3)
    assert overall["median_centroid_mm"] == pytest.approx(1.0)

    section = geometry_report(geometry, result, None, {})
    md = "\n".join(geometry_markdown(section))
    assert "| test_obj_only | 2 | 100 % | 3.0 | 6.0 | 5.0 | 1.5 |" in md
    assert "| test_part_only | 1 | 0 % | 0.0 | n/a | n/a | n/a |" in md
    assert geometry_summary_line(section).startswith("3-D (3 targets, 67 % with pose): centroid 1.0 mm")


def test_unmatched_and_non_overlapping_predictions_are_not_scored_in_3d():
    truth, geometry, predictions = _constructed()
    elsewhere = _square(28, 28)  # overlaps nothing: matched with IoU 0 to c, left out of the 3-D errors
    predictions[1] = Prediction("", elsewhere[None], ["c"], [0.9],
                                poses=[_pose([0, 0, 1], [0, 0, 1], np.eye(3), [0.1, 0.1, 0])])
    result = score_geometry(geometry, truth, predictions, score_predictions(truth, predictions))
    assert {p.index for p in result.pairs} == {0} and "test_part_only" not in result.splits


def test_a_bag_without_depth_truth_reports_3d_as_not_available():
    section = geometry_report(None, None, "no 3-D ground truth (the bag has no geometry_ground_truth.json)", {})
    assert section == {"scored": False, "note": "no 3-D ground truth (the bag has no geometry_ground_truth.json)",
                       "problems": []}
    assert geometry_markdown(section)[:3] == ["## 3-D geometry", "",
                                              "n/a: no 3-D ground truth (the bag has no geometry_ground_truth.json)."]
    assert geometry_summary_line(section).startswith("3-D: n/a")


def test_a_malformed_geometry_entry_is_one_line_and_the_rest_is_scored():
    truth, geometry, predictions = _constructed()
    data = json.loads(json.dumps(geometry.to_json()))
    del data["commands"][0]["targets"][1]["normal"]  # b's entry
    data["commands"][1]["targets"][0]["support_points"] = [[0, 0]]
    loaded = GeometryGroundTruth.from_json(data, "gt.json")
    assert loaded.problems == [
        "gt.json: command 0 target 1: malformed (missing 'normal'); not scored in 3-D",
        "gt.json: command 1 target 0: malformed ('support_points' has shape (1, 2), expected (N, 3)); "
        "not scored in 3-D"]
    result = score_geometry(loaded, truth, predictions, score_predictions(truth, predictions))
    assert [(p.index, p.gt) for p in result.pairs] == [(0, 0)], "a's pair is still scored"
    assert result.problems == loaded.problems
    md = "\n".join(geometry_markdown(geometry_report(loaded, result, None, {})))
    assert "- gt.json: command 0 target 1: malformed (missing 'normal'); not scored in 3-D" in md


def test_a_malformed_sidecar_file_costs_the_3d_scores_only(tmp_path, capsys):
    from m2sa_ros.bag.evaluate import _geometry_truth

    (tmp_path / "geometry_ground_truth.json").write_text("{not json")
    geometry, note = _geometry_truth(tmp_path, None)
    assert geometry is None and note.startswith("3-D errors not scored: geometry ground truth")
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("m2sa-bag-eval: warning: geometry ground truth")


def test_a_malformed_depth_message_is_not_replayed_and_said_in_one_line():
    """
    The replayer checks each depth image before sending it.

    One that cannot be read is left out with one line (its commands are then left out
    of the 3-D errors).
    """
    from m2sa_ros.bag.bag_io import _header, BagMessage
    from m2sa_ros.bag.replay import Replayer

    store = message_typestore()
    Image = store.types["sensor_msgs/msg/Image"]
    short = Image(header=_header(store, 5_000_000_007, "cam"), height=4, width=4, encoding="32FC1", is_bigendian=0,
                  step=16, data=np.zeros(10, np.uint8))
    good = Image(header=_header(store, 6_000_000_000, "cam"), height=1, width=1, encoding="32FC1", is_bigendian=0,
                 step=4, data=np.zeros(4, np.uint8))
    sent = []
    fake = SimpleNamespace(bad_depth={}, depth_pub=SimpleNamespace(publish=sent.append))
    for stamp, msg in ((5_000_000_000, short), (6_000_000_000, good)):
        message = BagMessage(DEPTH_TOPIC, "sensor_msgs/msg/Image", stamp,
                             bytes(store.serialize_cdr(msg, "sensor_msgs/msg/Image")))
        Replayer._publish_depth(fake, message, True)
    assert len(sent) == 1
    assert list(fake.bad_depth) == [5_000_000_007]
    line = fake.bad_depth[5_000_000_007]
    assert "\n" not in line and line.startswith("depth at 5000000000 ns not replayed: ")


# --------------------------------------------------------------------------- tracking bags
def _tracking_case():
    """
    One sequence of three frames, its target sliding 1 cm a frame.

    The node's poses exact on frame 0, 3 mm off on frame 1, and frame 2's depth was
    not replayable.
    """
    from m2sa_ros.bag.ground_truth import GroundTruthSequence, GroundTruthSequenceFrame, TrackingGroundTruth
    from m2sa_ros.bag.tracking_report import frame_split

    masks = [_square(2 + 5 * t, 2) for t in range(3)]
    sequence = GroundTruthSequence(index=0, time_ns=150, command="the box", split="test_obj_only", motion="pan",
                                   answer="{seg}", record_id="seq000", height=H, width=W,
                                   frames=[GroundTruthSequenceFrame(100 * (t + 1), [_gt_target("box_1", m)])
                                           for t, m in enumerate(masks)])
    truth = TrackingGroundTruth(sequences=[sequence])
    geometry = GeometryGroundTruth(sequences={0: [[_flat_truth([0.01 * t, 0, 1.0])] for t in range(3)]})
    base = np.array([[1.0, 0, 0], [0, -1.0, 0], [0, 0, -1.0]]).T
    offsets = [0.0, 0.003, 0.0]
    predictions = {t: Prediction("", masks[t][None], ["box_1"], [0.9], poses=[
        _pose([0.01 * t + offsets[t], 0, 1.0], [0.01 * t + offsets[t], 0, 1.0], base, [0.1, 0.1, 0.0])])
        for t in range(3)}
    flat = GroundTruth(commands=[sequence.command_at(t, index=t, split=frame_split(t)) for t in range(3)])
    scores = SimpleNamespace(keys={(0, t): t for t in range(3)}, flat=flat, predictions=predictions,
                             scores=score_predictions(flat, predictions))
    return truth, geometry, scores


def test_tracked_frames_are_scored_in_3d_per_frame_and_over_the_tracked_ones():
    from m2sa_ros.bag.tracking_report import score_tracked_geometry

    truth, geometry, scores = _tracking_case()
    result = score_tracked_geometry(geometry, scores, truth, bad_depth={300: "depth at 300 ns not replayed: x"})
    assert [(p.index, p.split) for p in result.pairs] == [(0, "frame_0"), (1, "frame_1")]
    assert list(result.splits) == ["frame_0", "frame_1", "after_first"]
    assert result.splits["frame_0"]["median_centroid_mm"] == pytest.approx(0.0, abs=1e-9)
    assert result.splits["frame_1"]["median_centroid_mm"] == pytest.approx(3.0, abs=1e-9)
    assert result.splits["frame_1"]["median_centre_mm"] == pytest.approx(3.0, abs=1e-9)
    after = result.splits["after_first"]
    assert (after["pairs"], after["pose_share"]) == (1, 1.0) and after["median_normal_deg"] == pytest.approx(0)
    section = geometry_report(geometry, result, None, {300: "depth at 300 ns not replayed: x"})
    assert geometry_summary_line(section, "after_first").startswith("3-D (1 targets, 100 % with pose): centroid 3.0")
    assert "| after_first | 1 | 100 % | 3.0 | 3.0 | 0.0 | 0.0 |" in "\n".join(geometry_markdown(section))

    # A sequence whose truth lacks a frame, or is missing, is one line and not scored in 3-D.
    short = GeometryGroundTruth(sequences={0: geometry.sequences[0][:2]})
    assert score_tracked_geometry(short, scores, truth, {}).pairs == []
    assert score_tracked_geometry(short, scores, truth, {}).problems == [
        "sequence 0: the geometry ground truth has 2 frames, the tracking ground truth 3; not scored in 3-D"]
    assert score_tracked_geometry(GeometryGroundTruth(), scores, truth, {}).problems == [
        "sequence 0: no 3-D ground truth; not scored in 3-D"]


def test_the_sequences_truth_round_trips_and_a_malformed_entry_is_one_line():
    _, geometry, _ = _tracking_case()
    data = json.loads(json.dumps(geometry.to_json()))
    back = GeometryGroundTruth.from_json(data)
    assert back.problems == [] and list(back.sequences) == [0] and len(back.sequences[0]) == 3
    np.testing.assert_allclose(back.sequences[0][2][0].centroid, [0.02, 0, 1.0])
    del data["sequences"][0]["frames"][1][0]["normal"]
    data["sequences"].append({"index": 1})
    back = GeometryGroundTruth.from_json(data, "gt.json")
    assert back.problems == [
        "gt.json: sequence 0 frame 1 target 0: malformed (missing 'normal'); not scored in 3-D",
        "gt.json: sequence entry 1: malformed ('frames'); not scored in 3-D"]
    assert back.sequences[0][1] == [None] and back.sequences[0][0][0] is not None
    # A commands bag's sidecar has no "sequences" key at all (unchanged for its readers).
    assert "sequences" not in GeometryGroundTruth(commands={0: []}).to_json()
