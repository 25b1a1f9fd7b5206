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
m2sa-bag: bags of images, commands and ground truth, written and read back.

No DDS here: these tests read the files with rosbags, as ``ros2 bag info`` or a
team's own tooling would.
"""

from __future__ import annotations

import json

from m2sa_core.data.readers import read_dataset
from m2sa_ros.bag.bag_io import (
    bag_info,
    decode,
    iter_messages,
    make_bag,
    plan_from_records,
    read_frames,
    stamp_ns,
    write_bag,
)
from m2sa_ros.bag.cli import main
from m2sa_ros.bag.ground_truth import (
    BagError,
    COMMAND_TOPIC,
    GroundTruth,
    IMAGE_TOPIC,
    load_ground_truth,
    write_sidecar_json,
)
import numpy as np
import pytest

TEST_FILES = ("MMR_test_obj_only.json", "MMR_test_part_only.json", "MMR_test_mixed.json")


def _records(synth):
    records = []
    for name in TEST_FILES:
        records.extend(read_dataset(synth / name).records)
    assert len(records) >= 4, "the synthetic test split should hold several questions"
    return records


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_bag_written_and_read_back(synth, tmp_path, storage):
    records = _records(synth)
    out = make_bag([synth / name for name in TEST_FILES], tmp_path / "bag", storage=storage, rate_hz=2.0)
    assert (out / "metadata.yaml").is_file()
    info = bag_info(out)
    assert info["storage"] == storage
    n_images = len({str(r.image_path) for r in records})
    assert info["topics"][IMAGE_TOPIC] == {"type": "sensor_msgs/msg/Image", "count": n_images}
    assert info["topics"][COMMAND_TOPIC] == {"type": "std_msgs/msg/String", "count": len(records)}

    truth = load_ground_truth(out)
    assert truth is not None and len(truth.commands) == len(records) and len(truth.frames) == n_images

    # Time order: every command after its own image and before the next one.
    last_stamp = None
    commands = []
    for message in iter_messages(out):
        msg = decode(message)
        if message.topic == IMAGE_TOPIC:
            last_stamp = stamp_ns(msg.header)
            assert last_stamp == message.time_ns, "header stamp = bag time, as a camera driver records it"
            assert msg.encoding == "rgb8" and msg.header.frame_id == "camera_color_optical_frame"
        else:
            assert last_stamp is not None, "a command came before any image"
            commands.append((msg.data, last_stamp, message.time_ns))
    assert sorted(c[0] for c in commands) == sorted(r.question for r in records)
    for k, (text, image_stamp, time_ns) in enumerate(commands):
        gt = truth.commands[k]
        assert (gt.command, gt.image_stamp_ns, gt.time_ns) == (text, image_stamp, time_ns)
    assert len({c[2] for c in commands}) == len(commands), "no two commands share a stamp"

    # Pixels and masks survive exactly (rgb8 is lossless; masks are RLE in the sidecar).
    frames = read_frames(out)
    by_id = {r.record_id: r for r in records}
    for gt in truth.commands:
        record = by_id[gt.record_id]
        assert gt.command == record.question
        assert np.array_equal(frames[gt.image_stamp_ns], record.load_image())
        assert gt.split == record.split and gt.answer == record.answer_template
        assert truth.frames[gt.image_stamp_ns].file_name == record.image_path.name
        expected = np.stack([t.mask(record.height, record.width) for t in record.targets]) if record.targets \
            else np.zeros((0, record.height, record.width), bool)
        assert np.array_equal(gt.masks(), expected)
        assert [t.label for t in gt.targets] == [t.label for t in record.targets]
        # A question about something not in the scene keeps what is missing (ground truth version 2).
        assert gt.missing == record.meta.get("missing") and gt.absent == ("missing" in record.meta)


def test_rate_spaces_frames_and_commands_in_between(synth, tmp_path):
    plan = plan_from_records(_records(synth), rate_hz=4.0, start_ns=10**18)
    stamps = [f.stamp_ns for f in plan.frames]
    assert stamps[0] == 10**18 and all(b - a == 250_000_000 for a, b in zip(stamps, stamps[1:]))
    for gt in plan.ground_truth.commands:
        assert gt.image_stamp_ns < gt.time_ns < gt.image_stamp_ns + 250_000_000


def test_bad_inputs_are_named(synth, tmp_path):
    records = _records(synth)
    with pytest.raises(BagError, match="rate must be > 0"):
        plan_from_records(records, rate_hz=0)
    with pytest.raises(BagError, match="no records"):
        plan_from_records([])
    out = write_bag(plan_from_records(records[:1]), tmp_path / "bag", "sqlite3")
    with pytest.raises(BagError, match="already exists"):
        write_bag(plan_from_records(records[:1]), out, "sqlite3")
    with pytest.raises(BagError, match="storage must be one of"):
        write_bag(plan_from_records(records[:1]), tmp_path / "other", "rosbag1")
    with pytest.raises(BagError, match="not a rosbag2 directory"):
        bag_info(tmp_path)
    bad = tmp_path / "gt.json"
    bad.write_text(json.dumps({"format": "something else"}))
    with pytest.raises(BagError, match=str(bad)):
        GroundTruth.load(bad)


@pytest.mark.parametrize("sidecar", ["ground truth", "tracking ground truth"])
def test_a_sidecar_of_another_kind_or_version_is_refused_in_one_line(tmp_path, sidecar):
    """
    A tracking sidecar is not a ground-truth one and the other way round.

    A newer version is refused by name, not parsed into wrong scores. Saved sidecars
    load back.
    """
    from m2sa_ros.bag.ground_truth import TrackingGroundTruth

    kinds = {"ground truth": GroundTruth(), "tracking ground truth": TrackingGroundTruth()}
    truth = kinds[sidecar]
    other = next(t for k, t in kinds.items() if k != sidecar)
    path = truth.save(tmp_path / "truth.json")
    assert type(truth).load(path).to_json() == truth.to_json()
    with pytest.raises(BagError) as wrong_kind:
        type(truth).load(other.save(tmp_path / "other.json"))
    assert str(wrong_kind.value) == (f"{tmp_path / 'other.json'}: not an m2sa_ros "
                                     f"{sidecar.replace(' truth', '-truth')} "
                                     f"file (format must be '{truth.to_json()['format']}')")
    newer = dict(truth.to_json(), version=99)
    with pytest.raises(BagError, match=r"truth.json: version 99 is not supported \(expected \d+( or \d+)*\)$"):
        type(truth).load(write_sidecar_json(path, newer))


def test_cli_make_and_info(synth, tmp_path, capsys):
    out = tmp_path / "cli_bag"
    code = main(["make", "--data", str(synth / "MMR_test_mixed.json"), "--out", str(out), "--storage", "sqlite3",
                 "--limit", "1", "--quiet"])
    assert code == 0
    assert "1 commands" in capsys.readouterr().out
    assert main(["info", str(out)]) == 0
    assert json.loads(capsys.readouterr().out)["ground_truth"]["commands"] == 1
    assert main(["make", "--data", str(tmp_path / "missing.json"), "--out", str(tmp_path / "x"), "--quiet"]) == 2
    assert "missing.json" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["SegmentationResult", "Target", "Command"])
def test_our_types_carry_the_hash_rosidl_gives_them(name):
    """ROS 2 tools match a bag's types by RIHS01 hash: ours must equal the generated one."""
    from pathlib import Path
    import sys

    from m2sa_ros.bag.bag_io import message_typestore

    generated = Path(sys.prefix) / "share" / "m2sa_ros" / "msg" / f"{name}.json"
    if not generated.is_file():
        pytest.skip("interfaces not built into this prefix (make setup)")
    hashes = {h["type_name"]: h["hash_string"] for h in json.loads(generated.read_text())["type_hashes"]}
    msgtype = f"m2sa_ros/msg/{name}"
    assert message_typestore().hash_rihs01(msgtype) == hashes[msgtype]
