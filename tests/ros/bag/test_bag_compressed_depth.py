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
Bags with compressedDepth, recorded, replayed and scored in 3-D.

Recorded as compressed_depth_image_transport writes it, replayed to the node's
depth/compressedDepth, scored in 3-D.

The recorder's messages are checked against the plugin's definition (the format string,
16UC1 lossless, 32FC1 as ``A / (trunc(A / d + B) - B)`` in float32) and against the raw
bag of the same data; the replay through the live node (a subprocess on the shipped tiny
model) must give the same 3-D scores from a lossless compressedDepth bag as from the raw one.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from m2sa_core.data.synthetic.dataset_depth import find_generator, scene_depth
from m2sa_core.geometry.depth_encoding import to_16uc1
from m2sa_core.shipped_model import SHIPPED_MODEL_RELATIVE
from m2sa_ros.bag.bag_io import bag_info, decode, iter_messages, make_bag, message_typestore
from m2sa_ros.bag.cli import main
from m2sa_ros.bag.depth_recording import DepthOptions
from m2sa_ros.bag.geometry_truth import CAMERA_INFO_TOPIC, DEPTH_TOPIC, load_geometry_ground_truth
from m2sa_ros.bag.ground_truth import ground_truth_path, GroundTruth, IMAGE_TOPIC
from m2sa_ros.depth.compressed_depth import decode_compressed_depth
from m2sa_ros.messages.image_conversion import depth_to_metres
import numpy as np
import pytest

pytestmark = pytest.mark.integration

TEST_FILES = ("MMR_test_obj_only.json", "MMR_test_part_only.json", "MMR_test_mixed.json")
COMPRESSED_TOPIC = DEPTH_TOPIC + "/compressedDepth"
MODEL = Path(__file__).resolve().parents[3] / SHIPPED_MODEL_RELATIVE


def _plugin_32fc1(depth: np.ndarray) -> np.ndarray:
    """
    Return what compressed_depth_image_transport gives back for 32FC1 metres, in float32.

    From its definition: depth_max 10, depth_quantization 100, A = 100 * 101, B = 1 - A / 10.
    """
    a, b = np.float32(100.0 * 101.0), np.float32(1.0 - 100.0 * 101.0 / 10.0)
    d = depth.astype(np.float32)
    out = np.full(d.shape, np.nan, np.float32)
    ok = np.isfinite(d) & (d > 0) & (d < 10.0)
    q = np.trunc(a / d[ok] + b)
    out[ok] = np.where(q > 0, a / (q.astype(np.float32) - b), np.nan)
    return out


@pytest.mark.parametrize("encoding", ["16UC1", "32FC1"])
@pytest.mark.parametrize("codec", ["png", "rvl"])
def test_the_recorder_writes_compressed_depth_as_the_plugin_does(synth, tmp_path, encoding, codec):
    data = [synth / name for name in TEST_FILES]
    out = make_bag(data, tmp_path / "bag", storage="sqlite3", frame_id="cam_optical", limit=4,
                   depth=DepthOptions(encoding, "none", codec))
    info = bag_info(out)
    assert info["topics"][COMPRESSED_TOPIC]["type"] == "sensor_msgs/msg/CompressedImage"
    assert DEPTH_TOPIC not in info["topics"]  # the compressed stream replaces the raw one, as recorded on a robot
    assert info["geometry_ground_truth"]["compressed_depth"] == codec
    geometry = load_geometry_ground_truth(out)
    assert (geometry.depth_topic, geometry.depth_codec, geometry.encoding) == (COMPRESSED_TOPIC, codec, encoding)

    images = {m.time_ns: decode(m) for m in iter_messages(out, [IMAGE_TOPIC])}
    truth = GroundTruth.load(ground_truth_path(out))
    generator = find_generator(synth)
    depths = [(m, decode(m)) for m in iter_messages(out, [COMPRESSED_TOPIC])]
    assert len(depths) == len(images) == len(list(iter_messages(out, [CAMERA_INFO_TOPIC])))
    for message, msg in depths:
        image = images[message.time_ns]
        assert msg.format == f"{encoding}; compressedDepth {codec}"
        assert msg.header.frame_id == image.header.frame_id == "cam_optical"
        assert (msg.header.stamp.sec, msg.header.stamp.nanosec) == (image.header.stamp.sec, image.header.stamp.nanosec)
        _, sd = scene_depth(generator, int(truth.frames[message.time_ns].file_name[:6]))
        metres = decode_compressed_depth(msg)
        if encoding == "16UC1":  # lossless: the raw 16UC1 image's millimetres
            mm = to_16uc1(sd.depth)
            expected = np.where(mm > 0, mm.astype(np.float32) / np.float32(1000.0), np.nan)
        else:
            expected = _plugin_32fc1(sd.depth)
        np.testing.assert_array_equal(metres, expected)


def test_a_raw_16uc1_bag_and_its_compressed_twin_hold_the_same_depth(synth, tmp_path):
    data = [synth / name for name in TEST_FILES]
    raw = make_bag(data, tmp_path / "raw", storage="sqlite3", limit=3, depth=DepthOptions("16UC1", "mild"))
    packed = make_bag(data, tmp_path / "packed", storage="sqlite3", limit=3, depth=DepthOptions("16UC1", "mild", "png"))
    a = [depth_to_metres(decode(m)) for m in iter_messages(raw, [DEPTH_TOPIC])]
    b = [decode_compressed_depth(decode(m)) for m in iter_messages(packed, [COMPRESSED_TOPIC])]
    assert len(a) == len(b) > 0
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)  # artefacts included: the same stream, losslessly packed
    sizes = [sum(len(m.raw) for m in iter_messages(bag, [topic])) for bag, topic in ((raw, DEPTH_TOPIC),
                                                                                     (packed, COMPRESSED_TOPIC))]
    assert sizes[1] < sizes[0], sizes


def test_the_cli_records_compressed_depth_and_says_so(synth, tmp_path, capsys):
    out = tmp_path / "bag"
    assert main(["make", "--data", str(synth / TEST_FILES[0]), "--out", str(out), "--limit", "2",
                 "--compressed-depth", "rvl", "--depth-encoding", "16UC1", "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "; depth (16UC1, compressedDepth rvl, artefacts mild) on" in printed, printed
    assert json.loads(json.dumps(bag_info(out)))["geometry_ground_truth"]["compressed_depth"] == "rvl"
    # Tracking bags too.
    assert main(["make", "--sequences", "1", "--frames", "2", "--size", "64", "--compressed-depth", "png",
                 "--out", str(tmp_path / "track"), "--quiet"]) == 0
    assert "; depth (32FC1, compressedDepth png, artefacts mild) on 2 frames" in capsys.readouterr().out
    packed = [decode(m) for m in iter_messages(tmp_path / "track", [COMPRESSED_TOPIC])]
    assert len(packed) == 2 and all(m.format == "32FC1; compressedDepth png" for m in packed)
    assert all(np.isfinite(decode_compressed_depth(m)).any() for m in packed)
    assert main(["make", "--data", str(synth / TEST_FILES[0]), "--out", str(tmp_path / "x"), "--no-depth",
                 "--compressed-depth", "png"]) == 2
    assert "does not go with --no-depth" in capsys.readouterr().err


def test_the_replayer_sends_compressed_depth_as_recorded_and_leaves_out_a_corrupt_one():
    """
    A compressedDepth message goes to the node's depth/compressedDepth unchanged.

    One whose payload does not decode is left out with one line (its commands then not
    scored in 3-D).
    """
    from m2sa_ros.bag.bag_io import _header, BagMessage
    from m2sa_ros.bag.replay import Replayer
    from m2sa_ros.depth.compressed_depth import encode_compressed_depth

    store = message_typestore()
    CompressedImage = store.types["sensor_msgs/msg/CompressedImage"]
    fmt, payload = encode_compressed_depth(np.full((4, 4), 1500, np.uint16), "16UC1", "png")
    good = CompressedImage(header=_header(store, 6_000_000_000, "cam"), format=fmt,
                           data=np.frombuffer(payload, np.uint8))
    cut = CompressedImage(header=_header(store, 5_000_000_007, "cam"), format=fmt,
                          data=np.frombuffer(payload[:20], np.uint8))
    raw_sent, sent = [], []
    fake = SimpleNamespace(bad_depth={}, depth_pub=SimpleNamespace(publish=raw_sent.append),
                           compressed_depth_pub=SimpleNamespace(publish=sent.append))
    messages = []
    for stamp, msg in ((5_000_000_000, cut), (6_000_000_000, good)):
        messages.append(BagMessage(COMPRESSED_TOPIC, "sensor_msgs/msg/CompressedImage", stamp,
                                   bytes(store.serialize_cdr(msg, "sensor_msgs/msg/CompressedImage"))))
        Replayer._publish_depth(fake, messages[-1], True)
    assert sent == [messages[1].raw] and raw_sent == []
    line = fake.bad_depth[5_000_000_007]
    assert "\n" not in line and line.startswith("depth at 5000000000 ns not replayed: ") and "PNG" in line


@pytest.mark.ros
@pytest.mark.slow
def test_a_compressed_depth_bag_scores_in_3d_as_its_raw_twin(synth, tmp_path):
    """
    A compressedDepth bag scores in 3-D as its raw twin.

    The round trip: recorded as compressedDepth (16UC1 PNG, lossless), replayed to a node the
    tool starts with use_compressed_depth, the targets' 3-D errors are those of the raw bag.
    """
    from m2sa_ros.bag.evaluate import evaluate_bag

    if not (MODEL / "config.json").is_file():
        pytest.skip(f"the shipped model is not in {MODEL}")
    data = [synth / name for name in TEST_FILES]
    reports = {}
    for name, codec in (("raw", ""), ("packed", "png")):
        bag = make_bag(data, tmp_path / name, storage="mcap", rate_hz=5.0, limit=3,
                       depth=DepthOptions("16UC1", "mild", codec))
        evaluation = evaluate_bag(bag, tmp_path / f"eval_{name}",
                                  node_args=["-p", f"model_path:={MODEL}", "-p", "max_image_age:=2.0"],
                                  rate_factor=5.0, progress=False, overlays=False, result_timeout_s=120,
                                  startup_timeout_s=120)
        report = evaluation.report
        assert report["counts"]["commands_without_result"] == 0, (tmp_path / f"eval_{name}" / "node.log").read_text()
        assert ("use_compressed_depth:=true" in report["settings"]["node_command"]) == bool(codec)
        geometry = report["geometry"]
        assert geometry["scored"] and not geometry.get("problems"), geometry
        reports[name] = geometry
    # Lossless: the same depth reached the node, so the same 3-D errors, pair by pair (NaN included).
    assert json.dumps(reports["packed"]["pairs"]) == json.dumps(reports["raw"]["pairs"])
    assert json.dumps(reports["packed"]["splits"]) == json.dumps(reports["raw"]["splits"])
    assert reports["raw"]["pairs"], "the tiny model's masks should match some targets"
    assert "Registered depth (16UC1, compressedDepth png, " in (tmp_path / "eval_packed" / "report.md").read_text()
    assert any(m["pose_share"] > 0 for m in reports["raw"]["splits"].values() if m["pairs"]), reports["raw"]["splits"]
