"""Rosbag2 files of camera images, commands and ground truth: ``m2sa-bag``.

A robotics team evaluates the perception node on recordings, not on JSON files, so the
evaluation data travels as a rosbag2 (sqlite3 or mcap, written with the ``rosbags``
library, readable by ``ros2 bag info/play`` on a real install):

* ``/camera/image_raw`` (sensor_msgs/Image, rgb8): one frame per scene, its header stamp
  equal to its bag time;
* ``/m2sa/command`` (std_msgs/String): the questions about that frame, each after it
  and before the next frame;
* the ground truth as a *sidecar* JSON inside the bag directory
  (``BAG/ground_truth.json``, ignored by ROS tools): frames keyed by image stamp (ns)
  and one entry per command message, in bag order, with the image stamp it refers
  to, its split, the reference answer and every target's RLE mask. A sidecar rather
  than a topic because a SegmentationResult cannot carry splits, RLE or amodal
  masks compactly, and because a team's own bags (recorded on the robot) get their
  ground truth annotated afterwards, as a file.

Usage::

    m2sa-bag make --data MMR_test_mixed.json --image-root images --out demo_bag --storage mcap
    m2sa-bag make --sequences 10 --frames 6 --motion mixed --seed 4242 --out track_bag   # docs/TRACKING.md
    m2sa-bag info demo_bag
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from m2sa_core.cli_errors import cli_entry

IMAGE_TOPIC = "/camera/image_raw"
COMMAND_TOPIC = "/m2sa/command"
RESULT_TOPIC = "/m2sa/result"
IMAGE_TYPE = "sensor_msgs/msg/Image"
COMMAND_TYPE = "std_msgs/msg/String"
RESULT_TYPE = "m2sa_ros/msg/SegmentationResult"
COMMAND_STAMPED_TOPIC = "/m2sa/command_stamped"
COMMAND_STAMPED_TYPE = "m2sa_ros/msg/Command"
GROUND_TRUTH_FILE = "ground_truth.json"
GROUND_TRUTH_FORMAT = "m2sa_ros/bag_ground_truth"
GROUND_TRUTH_VERSION = 1
STORAGES = ("mcap", "sqlite3")
DEFAULT_FRAME_ID = "camera_color_optical_frame"
# A fixed, plausible epoch (2023-11-14) so that the same data always gives the same bag.
DEFAULT_START_NS = 1_700_000_000 * 1_000_000_000
_OUR_MESSAGES = ("Target", "SegmentationResult", "Command")  # dependency order


class BagError(ValueError):
    """A bag or its ground truth that cannot be used; the text says which file and why."""


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
    """The ROS 2 distribution bags are written and read for.

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
    """rosbags typestore of the ROS 2 distribution (``ros_distro()`` unless given) plus
    our own messages (parsed from msg/*.msg).

    rosbags needs every type it (de)serialises or writes a definition for, and the
    definitions written into the bag let ``ros2 bag info`` and other readers decode
    our SegmentationResult without our Python package.
    """
    return _message_typestore((distro or ros_distro()).strip().lower())


@lru_cache(maxsize=None)
def _message_typestore(distro: str):
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

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


def stamp_ns(header: Any) -> int:
    """Nanoseconds of a std_msgs/Header stamp (rclpy or rosbags message)."""
    return int(header.stamp.sec) * 1_000_000_000 + int(header.stamp.nanosec)


# --------------------------------------------------------------------------- ground truth
@dataclass
class GroundTruthTarget:
    """One expected target of a command, as the dataset annotates it."""

    label: str
    category_name: str
    object_name: str
    instance: int
    part_name: str
    granularity: int
    segmentation: dict[str, Any]  # COCO RLE, counts as str
    amodal_segmentation: dict[str, Any] | None = None

    def mask(self, height: int, width: int) -> np.ndarray:
        from m2sa_core.data.rle import decode_rle

        return decode_rle(self.segmentation, height, width)


@dataclass
class GroundTruthCommand:
    """The k-th command message of the bag and what it should yield."""

    index: int
    time_ns: int  # bag time of the command message
    image_stamp_ns: int  # header stamp of the frame it is about
    command: str
    split: str
    answer: str  # reference answer with one "{seg}" per target ("" when unknown)
    record_id: str
    height: int
    width: int
    targets: list[GroundTruthTarget] = field(default_factory=list)
    mask_type: str | None = None  # "modal" | "amodal" when the text decides (R2SM); None otherwise

    def masks(self) -> np.ndarray:
        """Boolean [n, H, W] ground-truth masks in answer order."""
        if not self.targets:
            return np.zeros((0, self.height, self.width), dtype=bool)
        return np.stack([t.mask(self.height, self.width) for t in self.targets])


@dataclass
class GroundTruthFrame:
    """A frame of the bag: where its pixels came from."""

    stamp_ns: int
    image_id: Any
    file_name: str
    height: int
    width: int


@dataclass
class GroundTruth:
    """The sidecar of a bag: frames keyed by image stamp, commands in bag order."""

    image_topic: str = IMAGE_TOPIC
    command_topic: str = COMMAND_TOPIC
    frames: dict[int, GroundTruthFrame] = field(default_factory=dict)
    commands: list[GroundTruthCommand] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": GROUND_TRUTH_FORMAT,
            "version": GROUND_TRUTH_VERSION,
            "image_topic": self.image_topic,
            "command_topic": self.command_topic,
            "sources": self.sources,
            "frames": {str(k): asdict(v) for k, v in sorted(self.frames.items())},
            "commands": [asdict(c) for c in self.commands],
        }

    def save(self, path: str | Path) -> Path:
        return write_sidecar_json(path, self.to_json())

    @classmethod
    def from_json(cls, data: Any, where: str = "ground truth") -> "GroundTruth":
        """Parse and check a sidecar; BagError naming ``where`` and the entry on bad input."""
        check_sidecar_header(data, GROUND_TRUTH_FORMAT, GROUND_TRUTH_VERSION, "ground-truth", where)
        try:
            frames = {int(k): GroundTruthFrame(**v) for k, v in data.get("frames", {}).items()}
            commands = []
            for i, entry in enumerate(data.get("commands", [])):
                entry = dict(entry)
                entry["targets"] = [GroundTruthTarget(**t) for t in entry.get("targets", [])]
                command = GroundTruthCommand(**entry)
                if command.index != i:
                    raise BagError(f"{where}: command {i} has index {command.index}; commands must be in bag order")
                commands.append(command)
        except (TypeError, ValueError) as exc:
            if isinstance(exc, BagError):
                raise
            raise BagError(f"{where}: malformed entry: {exc}") from exc
        return cls(image_topic=str(data.get("image_topic", IMAGE_TOPIC)),
                   command_topic=str(data.get("command_topic", COMMAND_TOPIC)),
                   frames=frames, commands=commands, sources=list(data.get("sources", [])))

    @classmethod
    def load(cls, path: str | Path) -> "GroundTruth":
        return cls.from_json(read_sidecar_json(path, "ground truth"), str(path))


def read_sidecar_json(path: str | Path, what: str) -> Any:
    """The JSON of a sidecar file; a missing or malformed file is a one-line BagError naming ``what``."""
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise BagError(f"{what} {path} does not exist") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BagError(f"{what} {path} is not valid JSON: {exc}") from exc


def write_sidecar_json(path: str | Path, data: Any) -> Path:
    """Write a sidecar's JSON (indented: people read and diff these files)."""
    path = Path(path)
    path.write_text(json.dumps(data, indent=1), encoding="utf-8")
    return path


def check_sidecar_header(data: Any, fmt: str, version: int, what: str, where: str) -> None:
    """A one-line BagError naming ``where`` unless ``data`` is a ``what`` sidecar of ``fmt`` at ``version``."""
    if not isinstance(data, dict) or data.get("format") != fmt:
        raise BagError(f"{where}: not an m2sa_ros {what} file (format must be '{fmt}')")
    if data.get("version") != version:
        raise BagError(f"{where}: version {data.get('version')!r} is not supported (expected {version})")


def sidecar_to_load(bag: str | Path, file_name: str, override: str | Path | None) -> Path | None:
    """``override`` when given (it must exist), else the bag's own ``file_name``; None when the bag has none."""
    if override is not None:
        return Path(override)
    path = Path(bag) / file_name
    return path if path.is_file() else None


def ground_truth_path(bag: str | Path) -> Path:
    """Where the sidecar of ``bag`` lives."""
    return Path(bag) / GROUND_TRUTH_FILE


def load_ground_truth(bag: str | Path, override: str | Path | None = None) -> GroundTruth | None:
    """The bag's sidecar (or ``override``); None for a bag without ground truth."""
    path = sidecar_to_load(bag, GROUND_TRUTH_FILE, override)
    return None if path is None else GroundTruth.load(path)


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


def plan_from_records(records: Sequence[Any], rate_hz: float = 1.0, start_ns: int = DEFAULT_START_NS,
                      frame_id: str = DEFAULT_FRAME_ID, image_topic: str = IMAGE_TOPIC,
                      command_topic: str = COMMAND_TOPIC) -> BagPlan:
    """Lay dataset records (``SegRecord``) out in time: one frame per image, its commands after it.

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
                targets=[_target_entry(t) for t in record.targets], mask_type=record.mask_type))
    return BagPlan(frames, commands, truth)


# --------------------------------------------------------------------------- writing
def _header(store: Any, stamp: int, frame_id: str) -> Any:
    Header, Time = store.types["std_msgs/msg/Header"], store.types["builtin_interfaces/msg/Time"]
    return Header(stamp=Time(sec=stamp // 1_000_000_000, nanosec=stamp % 1_000_000_000), frame_id=frame_id)


def image_message(store: Any, rgb: np.ndarray, stamp: int, frame_id: str = DEFAULT_FRAME_ID) -> Any:
    """A rosbags sensor_msgs/Image (rgb8) of an RGB uint8 array."""
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
    """Write ``plan`` as a rosbag2 directory ``out`` plus its ground-truth sidecar.

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
    events.sort(key=lambda e: (e[0], e[1]))
    iterator: Any = events
    if progress:
        from tqdm import tqdm

        iterator = tqdm(events, desc="m2sa-bag", unit="msg")
    String = store.types[COMMAND_TYPE]
    with Writer(out, version=9, storage_plugin=_storage_plugin(storage)) as writer:
        images = writer.add_connection(truth.image_topic, IMAGE_TYPE, typestore=store)
        commands = writer.add_connection(truth.command_topic, COMMAND_TYPE, typestore=store)
        for time_ns, kind, item in iterator:
            if kind == 0:
                msg = image_message(store, item.load(), item.stamp_ns, item.frame_id)
                writer.write(images, time_ns, store.serialize_cdr(msg, IMAGE_TYPE))
            else:
                writer.write(commands, time_ns, store.serialize_cdr(String(data=item.text), COMMAND_TYPE))
    truth.save(ground_truth_path(out))
    return out


def make_bag(data: Sequence[str | Path], out: str | Path, image_root: str | Path | None = None,
             storage: str = "mcap", rate_hz: float = 1.0, limit: int | None = None,
             frame_id: str = DEFAULT_FRAME_ID, progress: bool = False) -> Path:
    """Read dataset files (MMR / R2SM / AmodalReasonSeg, any the project reads) into a bag."""
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
    from m2sa_ros.image_conversion import image_to_rgb

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
        info["ground_truth"] = {"frames": len(truth.frames), "commands": len(truth.commands), "splits": splits}
    from m2sa_ros.bag.sequences import load_tracking_ground_truth  # it builds on this module

    tracking = load_tracking_ground_truth(bag)
    if tracking is not None:
        info["tracking_ground_truth"] = {
            "sequences": len(tracking.sequences), "frames_per_sequence": tracking.n_frames,
            "motion": ", ".join(sorted({s.motion for s in tracking.sequences})),
            "frames": sum(len(s.frames) for s in tracking.sequences)}
    return info


# --------------------------------------------------------------------------- CLI
def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="m2sa-bag", description="Rosbag2 tools of m2sa_ros.")
    sub = parser.add_subparsers(dest="cmd", required=True)
    make = sub.add_parser("make", help="write a bag of images, commands and ground truth from a dataset file, "
                          "or of rendered tracking sequences (--sequences)")
    make.add_argument("--data", action="append",
                      help="dataset JSON (MMR, R2SM or AmodalReasonSeg layout); repeat for several files")
    seq = make.add_argument_group("tracking sequences (instead of --data; docs/TRACKING.md)")
    seq.add_argument("--sequences", type=int, default=None,
                     help="render N synthetic camera sequences, one command each, ground truth on every frame")
    seq.add_argument("--frames", type=int, default=None, help="frames per sequence (default 6)")
    seq.add_argument("--motion", default=None, help="pan, zoom, nudge, occluder or mixed (default mixed)")
    seq.add_argument("--seed", type=int, default=None, help="sequence seed (default 4242, as m2sa-eval)")
    seq.add_argument("--size", type=int, default=None, help="image side in pixels (default 256)")
    make.add_argument("--image-root", default=None, help="image directory (default: images/ beside the JSON)")
    make.add_argument("--out", required=True, help="output bag directory (must not exist)")
    make.add_argument("--storage", choices=STORAGES, default="mcap", help="rosbag2 storage (default mcap)")
    make.add_argument("--rate", type=float, default=None,
                      help="frames per second of the recording (default 1; 5 for --sequences)")
    make.add_argument("--limit", type=int, default=None, help="keep only the first N commands")
    make.add_argument("--frame-id", default=DEFAULT_FRAME_ID, help="header frame_id of the images")
    make.add_argument("--quiet", action="store_true", help="no progress bar")
    info = sub.add_parser("info", help="summarise a bag (topics, counts, ground truth)")
    info.add_argument("bag")
    return parser


def _make_sequences(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Path:
    """``m2sa-bag make --sequences N ...``: a tracking bag (m2sa_ros.bag.sequences)."""
    from m2sa_ros.bag.sequences import make_sequence_bag

    if args.data or args.image_root or args.limit is not None:
        parser.error("--sequences renders its own frames: --data, --image-root and --limit do not apply")
    return make_sequence_bag(args.out, args.sequences, n_frames=6 if args.frames is None else args.frames,
                             motion=args.motion or "mixed", seed=4242 if args.seed is None else args.seed,
                             size=256 if args.size is None else args.size, storage=args.storage,
                             rate_hz=5.0 if args.rate is None else args.rate, frame_id=args.frame_id,
                             progress=not args.quiet)


@cli_entry("m2sa-bag")
def main(argv: list[str] | None = None) -> int:
    """``m2sa-bag make ...`` / ``m2sa-bag info BAG``."""
    from m2sa_core.data.records import DataError

    parser = _parser()
    args = parser.parse_args(argv)
    try:
        if args.cmd == "make" and args.sequences is not None:
            out = _make_sequences(parser, args)
            summary = bag_info(out)
            track = summary["tracking_ground_truth"]
            print(f"{out}: {summary['storage']}, {track['sequences']} sequences of {track['frames_per_sequence']} "
                  f"frames ({track['motion']}), {summary['duration_s']:.1f} s; ground truth in "
                  f"{ground_truth_path(out)} and {out / 'tracking_ground_truth.json'}")
        elif args.cmd == "make":
            sequence_only = [f"--{n}" for n in ("frames", "motion", "seed", "size") if getattr(args, n) is not None]
            if not args.data:
                parser.error("make needs --data FILE (a dataset) or --sequences N (rendered tracking sequences)")
            if sequence_only:
                parser.error(f"{', '.join(sequence_only)} only apply with --sequences")
            if args.limit is not None and args.limit < 1:
                parser.error(f"--limit must be >= 1, got {args.limit}")
            out = make_bag(args.data, args.out, args.image_root, args.storage,
                           1.0 if args.rate is None else args.rate, args.limit, args.frame_id,
                           progress=not args.quiet)
            summary = bag_info(out)
            gt = summary["ground_truth"]
            print(f"{out}: {summary['storage']}, {gt['frames']} frames, {gt['commands']} commands "
                  f"({', '.join(f'{k} {v}' for k, v in sorted(gt['splits'].items()))}), "
                  f"{summary['duration_s']:.1f} s; ground truth in {ground_truth_path(out)}")
        else:
            print(json.dumps(bag_info(args.bag), indent=2))
    except (BagError, DataError, ValueError) as exc:
        print(f"m2sa-bag: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
