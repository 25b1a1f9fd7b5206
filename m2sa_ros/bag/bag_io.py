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
Rosbag2 files of camera images and commands: planned, written and read back.

A robotics team evaluates the perception node on recordings, not on JSON files, so the
evaluation data travels as a rosbag2 (sqlite3 or mcap, written with the ``rosbags``
library, readable by ``ros2 bag info/play`` on a real install):

* ``/camera/image_raw`` (sensor_msgs/Image, rgb8): one frame per scene, its header stamp
  equal to its bag time;
* ``/m2sa/command`` (std_msgs/String): the questions about that frame, each after it
  and before the next frame;
* with depth (synthetic data, ``m2sa_ros.bag.depth_recording``): a registered depth
  image on ``/camera/depth_registered/image_raw`` and a camera_info on
  ``/camera/camera_info`` per frame, with the frame's stamp and frame_id;
* the ground truth as sidecar JSON files inside the bag directory
  (``m2sa_ros.bag.ground_truth``; the 3-D truth in ``m2sa_ros.bag.geometry_truth``).

The messages are (de)serialised with the typestore of the ROS 2 distribution that plays
the bag, plus the project's own messages (``message_typestore``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
import importlib.metadata
import os
from pathlib import Path
import re
import sys
from typing import Any

from m2sa_ros.bag.ground_truth import (
    BagError,
    COMMAND_TOPIC,
    ground_truth_path,
    GroundTruth,
    GroundTruthCommand,
    GroundTruthFrame,
    GroundTruthTarget,
    IMAGE_TOPIC,
    load_ground_truth,
    load_tracking_ground_truth,
)
from m2sa_ros.messages.image_conversion import stamp_ns
import numpy as np

RESULT_TOPIC = "/m2sa/result"
IMAGE_TYPE = "sensor_msgs/msg/Image"
COMMAND_TYPE = "std_msgs/msg/String"
RESULT_TYPE = "m2sa_ros/msg/SegmentationResult"
COMMAND_STAMPED_TOPIC = "/m2sa/command_stamped"
COMMAND_STAMPED_TYPE = "m2sa_ros/msg/Command"
STORAGES = ("mcap", "sqlite3")
DEFAULT_FRAME_ID = "camera_color_optical_frame"
# A fixed, plausible epoch (2023-11-14) so that the same data always gives the same bag.
DEFAULT_START_NS = 1_700_000_000 * 1_000_000_000
_OUR_MESSAGES = ("Target", "SegmentationResult", "Command")  # dependency order


# --------------------------------------------------------------------------- typestore
def _msg_dirs() -> list[Path]:
    """Where msg/*.msg of m2sa_ros live: the checkout, then the installed share dir."""
    here = Path(__file__).resolve().parent  # the venv link resolves to the checkout
    dirs = [here.parent / "msg"]
    try:
        from ament_index_python.packages import get_package_share_directory

        dirs.append(Path(get_package_share_directory("m2sa_ros")) / "msg")
    except Exception:  # noqa: BLE001 - not installed through ament
        pass
    dirs.append(Path(sys.prefix) / "share" / "m2sa_ros" / "msg")
    return dirs


# rclpy's major version in each ROS 2 distribution, for a venv or an install that did
# not set ROS_DISTRO (the venvs of `make setup` run their python without it).
_RCLPY_MAJOR_DISTRO = {3: "humble", 4: "iron", 7: "jazzy", 9: "kilted"}
DEFAULT_DISTRO = "kilted"  # what `make setup` builds when ROS_DISTRO is not set


def ros_distro() -> str:
    """
    Return the ROS 2 distribution bags are written and read for.

    ROS_DISTRO when set (a sourced /opt/ros/<distro>/setup.bash, a venv's setup.sh and
    the Makefile all set it), else the installed rclpy's, else Kilted. Message
    definitions (and so the type hashes ROS 2 tools match bags by) differ between
    distributions, so a bag must carry those of the graph that plays it.
    """
    distro = os.environ.get("ROS_DISTRO", "").strip().lower()
    if distro:
        return distro
    try:
        major = int(importlib.metadata.version("rclpy").split(".")[0])
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return DEFAULT_DISTRO
    return _RCLPY_MAJOR_DISTRO.get(major, DEFAULT_DISTRO)


def message_typestore(distro: str | None = None):
    """
    Return the rosbags typestore of the ROS 2 distribution plus our own messages.

    The distribution is ``ros_distro()`` unless given; our messages are parsed from msg/*.msg.

    rosbags needs every type it (de)serialises or writes a definition for, and the
    definitions written into the bag let ``ros2 bag info`` and other readers decode
    our SegmentationResult without our Python package.
    """
    return _message_typestore((distro or ros_distro()).strip().lower())


@lru_cache(maxsize=None)
def _message_typestore(distro: str):
    from rosbags.typesys import get_types_from_msg, get_typestore, Stores

    known = [s.name[len("ROS2_"):].lower() for s in Stores if s.name.startswith("ROS2_")]
    if distro not in known:
        raise BagError(f"ROS_DISTRO={distro}: rosbags has no typestore for it (known: {', '.join(known)})")
    store = get_typestore(Stores[f"ROS2_{distro.upper()}"])
    for directory in _msg_dirs():
        if all((directory / f"{name}.msg").is_file() for name in _OUR_MESSAGES):
            types: dict[str, Any] = {}
            for name in _OUR_MESSAGES:
                types.update(get_types_from_msg((directory / f"{name}.msg").read_text(encoding="utf-8"),
                                                f"m2sa_ros/msg/{name}"))
            store.register(types)
            return store
    raise BagError("cannot find the m2sa_ros message definitions (msg/Target.msg, "
                   f"msg/SegmentationResult.msg, msg/Command.msg) in any of: {', '.join(map(str, _msg_dirs()))}")


# --------------------------------------------------------------------------- planning
@dataclass
class PlannedFrame:
    """An image to write: its stamp and how to get its pixels (loaded only when written)."""

    stamp_ns: int
    load: Callable[[], np.ndarray]
    frame_id: str = DEFAULT_FRAME_ID


@dataclass
class PlannedCommand:
    time_ns: int
    text: str


@dataclass
class BagPlan:
    """Everything a bag will hold, in time order within each list."""

    frames: list[PlannedFrame]
    commands: list[PlannedCommand]
    ground_truth: GroundTruth
    # With depth (m2sa_ros.bag.depth_recording.plan_depth): per frame its depth and
    # camera_info, and the 3-D ground truth; empty / None for a bag without depth.
    depth: list[Any] = field(default_factory=list)  # depth_recording.PlannedDepth
    geometry: Any = None  # geometry_truth.GeometryGroundTruth


def _target_entry(target: Any) -> GroundTruthTarget:
    def plain(rle: dict[str, Any] | None) -> dict[str, Any] | None:
        if rle is None:
            return None
        counts = rle["counts"]
        if isinstance(counts, bytes):
            counts = counts.decode("ascii")
        return {"size": [int(v) for v in rle["size"]], "counts": counts}

    return GroundTruthTarget(label=target.label, category_name=target.category_name,
                             object_name=target.object_name, instance=int(target.instance),
                             part_name=target.part_name, granularity=int(target.granularity),
                             segmentation=plain(target.mask_rle), amodal_segmentation=plain(target.amodal_rle))


def _missing_entry(record: Any) -> dict[str, str] | None:
    """Return an absent record's ``{"kind", "words"}`` (its meta's ``missing``, m2sa_core.data.mmr), else None."""
    missing = getattr(record, "meta", {}).get("missing")
    return None if missing is None else {"kind": str(missing.get("kind", "")), "words": str(missing.get("words", ""))}


def plan_from_records(records: Sequence[Any], rate_hz: float = 1.0, start_ns: int = DEFAULT_START_NS,
                      frame_id: str = DEFAULT_FRAME_ID, image_topic: str = IMAGE_TOPIC,
                      command_topic: str = COMMAND_TOPIC) -> BagPlan:
    """
    Lay dataset records (``SegRecord``) out in time: one frame per image, its commands after it.

    Frame i is at ``start + i / rate_hz``; the n commands about it are spread evenly
    before the next frame, so every command follows its image and none shares a stamp.
    """
    if not rate_hz > 0:
        raise BagError(f"rate must be > 0 Hz, got {rate_hz}")
    if not records:
        raise BagError("no records to write: the data file has no usable questions")
    by_image: dict[str, list[Any]] = {}
    for record in records:
        by_image.setdefault(str(record.image_path), []).append(record)
    period_ns = int(round(1e9 / rate_hz))
    frames: list[PlannedFrame] = []
    commands: list[PlannedCommand] = []
    truth = GroundTruth(image_topic=image_topic, command_topic=command_topic)
    for i, group in enumerate(by_image.values()):
        stamp = start_ns + i * period_ns
        first = group[0]
        frames.append(PlannedFrame(stamp, first.load_image, frame_id))
        truth.frames[stamp] = GroundTruthFrame(stamp, first.image_id, Path(first.image_path).name,
                                               int(first.height), int(first.width))
        for k, record in enumerate(group):
            time_ns = stamp + (k + 1) * period_ns // (len(group) + 1)
            commands.append(PlannedCommand(time_ns, record.question))
            truth.commands.append(GroundTruthCommand(
                index=len(truth.commands), time_ns=time_ns, image_stamp_ns=stamp, command=record.question,
                split=record.split, answer=record.answer_template, record_id=record.record_id,
                height=int(record.height), width=int(record.width),
                targets=[_target_entry(t) for t in record.targets], mask_type=record.mask_type,
                missing=_missing_entry(record)))
    return BagPlan(frames, commands, truth)


# --------------------------------------------------------------------------- writing
def _header(store: Any, stamp: int, frame_id: str) -> Any:
    Header, Time = store.types["std_msgs/msg/Header"], store.types["builtin_interfaces/msg/Time"]
    return Header(stamp=Time(sec=stamp // 1_000_000_000, nanosec=stamp % 1_000_000_000), frame_id=frame_id)


def image_message(store: Any, rgb: np.ndarray, stamp: int, frame_id: str = DEFAULT_FRAME_ID) -> Any:
    """Return a rosbags sensor_msgs/Image (rgb8) of an RGB uint8 array."""
    if not isinstance(rgb, np.ndarray) or rgb.dtype != np.uint8 or rgb.ndim != 3 or rgb.shape[2] != 3:
        raise BagError(f"frame at {stamp} ns: expected an RGB uint8 HxWx3 array, got "
                       f"{getattr(rgb, 'dtype', type(rgb).__name__)} {getattr(rgb, 'shape', '')}")
    height, width = rgb.shape[:2]
    Image = store.types[IMAGE_TYPE]
    return Image(header=_header(store, stamp, frame_id), height=height, width=width, encoding="rgb8",
                 is_bigendian=0, step=width * 3, data=np.ascontiguousarray(rgb).reshape(-1))


def _storage_plugin(storage: str) -> Any:
    from rosbags.rosbag2 import StoragePlugin

    if storage not in STORAGES:
        raise BagError(f"storage must be one of {', '.join(STORAGES)}, got {storage!r}")
    return StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3


def write_bag(plan: BagPlan, out: str | Path, storage: str = "mcap", progress: bool = False) -> Path:
    """
    Write ``plan`` as a rosbag2 directory ``out`` plus its ground-truth sidecar.

    Messages are written in time order (frames and commands interleaved), the way
    ``ros2 bag record`` would have stored them.
    """
    from rosbags.rosbag2 import Writer

    out = Path(out)
    if out.exists():
        raise BagError(f"{out} already exists; rosbag2 writes a new directory (remove it or pick another --out)")
    store = message_typestore()
    truth = plan.ground_truth
    events: list[tuple[int, int, Any]] = [(f.stamp_ns, 0, f) for f in plan.frames]
    events += [(c.time_ns, 1, c) for c in plan.commands]
    events += [(d.stamp_ns, -1, d) for d in plan.depth]  # before its colour image at the same time
    events.sort(key=lambda e: (e[0], e[1]))
    iterator: Any = events
    if progress:
        from tqdm import tqdm

        iterator = tqdm(events, desc="m2sa-bag", unit="msg")
    String = store.types[COMMAND_TYPE]
    with Writer(out, version=9, storage_plugin=_storage_plugin(storage)) as writer:
        images = writer.add_connection(truth.image_topic, IMAGE_TYPE, typestore=store)
        commands = writer.add_connection(truth.command_topic, COMMAND_TYPE, typestore=store)
        if plan.depth:
            from m2sa_ros.bag.depth_recording import CAMERA_INFO_TYPE, COMPRESSED_DEPTH_TYPE, DEPTH_TYPE

            depth_type = COMPRESSED_DEPTH_TYPE if plan.geometry.depth_codec else DEPTH_TYPE
            depths = writer.add_connection(plan.geometry.depth_topic, depth_type, typestore=store)
            infos = writer.add_connection(plan.geometry.camera_info_topic, CAMERA_INFO_TYPE, typestore=store)
        for time_ns, kind, item in iterator:
            if kind == -1:
                _write_depth(writer, store, depths, infos, item, plan.geometry.encoding, plan.geometry.depth_codec)
            elif kind == 0:
                msg = image_message(store, item.load(), item.stamp_ns, item.frame_id)
                writer.write(images, time_ns, store.serialize_cdr(msg, IMAGE_TYPE))
            else:
                writer.write(commands, time_ns, store.serialize_cdr(String(data=item.text), COMMAND_TYPE))
    truth.save(ground_truth_path(out))
    if plan.depth:
        from m2sa_ros.bag.geometry_truth import geometry_ground_truth_path

        plan.geometry.save(geometry_ground_truth_path(out))
    return out


def _write_depth(writer: Any, store: Any, depths: Any, infos: Any, item: Any, encoding: str, codec: str = "") -> None:
    """
    Write a frame's camera_info and depth image (raw, or compressedDepth with ``codec``).

    Both carry the colour image's stamp and frame_id.
    """
    from m2sa_ros.bag.depth_recording import camera_info_message, CAMERA_INFO_TYPE, depth_entry

    header = _header(store, item.stamp_ns, item.frame_id)
    writer.write(infos, item.stamp_ns, store.serialize_cdr(camera_info_message(store, header, item.camera),
                                                           CAMERA_INFO_TYPE))
    msg, msgtype = depth_entry(store, header, item.load(), encoding, codec)
    writer.write(depths, item.stamp_ns, store.serialize_cdr(msg, msgtype))


def make_bag(data: Sequence[str | Path], out: str | Path, image_root: str | Path | None = None,
             storage: str = "mcap", rate_hz: float = 1.0, limit: int | None = None,
             frame_id: str = DEFAULT_FRAME_ID, progress: bool = False, depth: Any = None) -> Path:
    """
    Read dataset files (MMR / R2SM / AmodalReasonSeg, any the project reads) into a bag.

    ``depth``: a ``depth_recording.DepthOptions`` to record registered depth, camera_info
    and the 3-D ground truth beside the images (synthetic data only: other data gets a
    one-line note and no depth); None for a bag of images and commands only.
    """
    from m2sa_core.data.readers import read_dataset

    records: list[Any] = []
    for path in data:
        dataset = read_dataset(path, image_root)
        for problem in dataset.problems:
            print(f"m2sa-bag: skipped {problem}", file=sys.stderr)
        records.extend(dataset.records)
    if limit is not None:
        records = records[:limit]
    plan = plan_from_records(records, rate_hz=rate_hz, frame_id=frame_id)
    plan.ground_truth.sources = [str(p) for p in data]
    if depth is not None:
        from m2sa_ros.bag.depth_recording import plan_depth, print_notes

        print_notes(plan_depth(plan, records, depth, data_dirs=[Path(p).parent for p in data]))
    return write_bag(plan, out, storage, progress=progress)


# --------------------------------------------------------------------------- reading
@dataclass
class BagMessage:
    topic: str
    msgtype: str
    time_ns: int
    raw: bytes


def iter_messages(bag: str | Path, topics: Sequence[str] | None = None) -> Iterator[BagMessage]:
    """Raw (CDR) messages of ``bag`` in time order, optionally only ``topics``."""
    from rosbags.rosbag2 import Reader

    bag = Path(bag)
    if not (bag / "metadata.yaml").is_file():
        raise BagError(f"{bag} is not a rosbag2 directory (no metadata.yaml)")
    with Reader(bag) as reader:
        connections = [c for c in reader.connections if topics is None or c.topic in topics]
        for connection, time_ns, raw in reader.messages(connections=connections):
            yield BagMessage(connection.topic, connection.msgtype, int(time_ns), bytes(raw))


def decode(message: BagMessage) -> Any:
    """Deserialise a raw message with the project's typestore."""
    return message_typestore().deserialize_cdr(message.raw, message.msgtype)


def read_frames(bag: str | Path, stamps: set[int] | None = None,
                image_topic: str = IMAGE_TOPIC) -> dict[int, np.ndarray]:
    """RGB frames of ``bag`` keyed by header stamp (only ``stamps`` when given)."""
    from m2sa_ros.messages.image_conversion import image_to_rgb

    frames: dict[int, np.ndarray] = {}
    for message in iter_messages(bag, [image_topic]):
        msg = decode(message)
        stamp = stamp_ns(msg.header)
        if stamps is None or stamp in stamps:
            frames[stamp] = image_to_rgb(msg, what=f"{bag}: {image_topic} at {message.time_ns} ns")
    return frames


def _storage_identifier(bag: Path) -> str:
    """``storage_identifier`` of metadata.yaml (rosbags' Reader does not expose it)."""
    match = re.search(r"^\s*storage_identifier:\s*(\S+)", (bag / "metadata.yaml").read_text(encoding="utf-8"),
                      re.MULTILINE)
    return match.group(1).strip("'\"") if match else "unknown"


def bag_info(bag: str | Path) -> dict[str, Any]:
    """Topics, types, message counts, storage and ground-truth summary of ``bag``."""
    from rosbags.rosbag2 import Reader

    bag = Path(bag)
    if not (bag / "metadata.yaml").is_file():
        raise BagError(f"{bag} is not a rosbag2 directory (no metadata.yaml)")
    with Reader(bag) as reader:
        info = {
            "path": str(bag),
            "storage": _storage_identifier(bag),
            "duration_s": reader.duration / 1e9 if reader.message_count else 0.0,
            "messages": reader.message_count,
            "topics": {c.topic: {"type": c.msgtype, "count": c.msgcount} for c in reader.connections},
        }
    truth = load_ground_truth(bag)
    if truth is not None:
        splits: dict[str, int] = {}
        for command in truth.commands:
            splits[command.split] = splits.get(command.split, 0) + 1
        info["ground_truth"] = {"frames": len(truth.frames), "commands": len(truth.commands), "splits": splits,
                                "absent_commands": sum(1 for c in truth.commands if c.absent)}
    from m2sa_ros.bag.geometry_truth import load_geometry_ground_truth

    geometry = load_geometry_ground_truth(bag)
    if geometry is not None:
        info["geometry_ground_truth"] = {
            "frames": len(geometry.frames), "commands": len(geometry.commands),
            "targets": sum(1 for ts in geometry.commands.values() for t in ts if t is not None),
            **({"sequences": len(geometry.sequences),
                "tracked_targets": sum(1 for frames in geometry.sequences.values() for ts in frames
                                       for t in ts if t is not None)} if geometry.sequences else {}),
            "encoding": geometry.encoding, "artefacts": geometry.artefacts.get("level", "none"),
            **({"compressed_depth": geometry.depth_codec} if geometry.depth_codec else {}),
            "problems": geometry.problems}
    tracking = load_tracking_ground_truth(bag)
    if tracking is not None:
        info["tracking_ground_truth"] = {
            "sequences": len(tracking.sequences), "frames_per_sequence": tracking.n_frames,
            "motion": ", ".join(sorted({s.motion for s in tracking.sequences})),
            "frames": sum(len(s.frames) for s in tracking.sequences)}
    return info
