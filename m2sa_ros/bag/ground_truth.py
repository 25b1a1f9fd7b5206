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
The ground truth of a bag: sidecar JSON files inside the bag directory.

ROS tools ignore them; the bag tools read them to score the node's answers:

* ``BAG/ground_truth.json`` (format version 1, or 2 when a command is about something
  not in view): frames keyed by image stamp (ns) and one entry per command message, in
  bag order, with the image stamp it refers to, its split, the reference answer and
  every target's RLE mask; version 2 adds ``missing`` to a command whose answer should
  name no target (``{"kind": ..., "words": ...}``, as the synthetic world's records say;
  ``null`` for the others). A bag with no such command is still written as version 1,
  which older readers (that refuse keys they do not know) read as before. A sidecar rather than a
  topic because a SegmentationResult cannot carry splits, RLE or amodal masks
  compactly, and because a team's own bags (recorded on the robot) get their ground
  truth annotated afterwards, as a file.
* ``BAG/tracking_ground_truth.json`` (its own format, version 1), in tracking bags only
  (``m2sa_ros.bag.sequences``): per sequence, the stamp of each frame and every
  target's mask on it. A separate file rather than a version 2 of
  ``ground_truth.json`` so that a team's existing readers keep working on tracking bags
  and the per-frame masks are only read by the tracking scorer.

Nothing here reads or writes the bag itself (``m2sa_ros.bag.bag_io`` does).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
import json
from pathlib import Path
from typing import Any

import numpy as np

IMAGE_TOPIC = "/camera/image_raw"
COMMAND_TOPIC = "/m2sa/command"
GROUND_TRUTH_FILE = "ground_truth.json"
GROUND_TRUTH_FORMAT = "m2sa_ros/bag_ground_truth"
GROUND_TRUTH_VERSION = 2  # what a bag with absent commands is written as; one without stays version 1
GROUND_TRUTH_VERSIONS = (1, 2)  # read
TRACKING_GROUND_TRUTH_FILE = "tracking_ground_truth.json"
TRACKING_GROUND_TRUTH_FORMAT = "m2sa_ros/bag_tracking_ground_truth"
TRACKING_GROUND_TRUTH_VERSION = 1


class BagError(ValueError):
    """A bag or its ground truth that cannot be used; the text says which file and why."""


# --------------------------------------------------------------------------- commands


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
    # Version 2: the command is about something not in view, and its answer should name no
    # target: {"kind": "category" | "part" | "instance" | "property", "words": what is missing}.
    missing: dict[str, str] | None = None

    @property
    def absent(self) -> bool:
        """Tell whether the command expects an answer naming no target (OUTCOME_ABSENT)."""
        return self.missing is not None

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
        """Return the sidecar's JSON: version 2 when a command is absent, else version 1 without ``missing``."""
        absent = any(c.absent for c in self.commands)
        commands = [asdict(c) for c in self.commands]
        if not absent:
            for entry in commands:
                del entry["missing"]
        return {
            "format": GROUND_TRUTH_FORMAT,
            "version": GROUND_TRUTH_VERSION if absent else 1,
            "image_topic": self.image_topic,
            "command_topic": self.command_topic,
            "sources": self.sources,
            "frames": {str(k): asdict(v) for k, v in sorted(self.frames.items())},
            "commands": commands,
        }

    def save(self, path: str | Path) -> Path:
        return write_sidecar_json(path, self.to_json())

    @classmethod
    def from_json(cls, data: Any, where: str = "ground truth") -> "GroundTruth":
        """Parse and check a sidecar; BagError naming ``where`` and the entry on bad input."""
        check_sidecar_header(data, GROUND_TRUTH_FORMAT, GROUND_TRUTH_VERSIONS, "ground-truth", where)
        try:
            frames = {int(k): GroundTruthFrame(**v) for k, v in data.get("frames", {}).items()}
            commands = []
            for i, entry in enumerate(data.get("commands", [])):
                entry = dict(entry)
                if data["version"] < 2 and "missing" in entry:
                    raise BagError(f"{where}: command {i} has 'missing', which needs version 2")
                entry["targets"] = [GroundTruthTarget(**t) for t in entry.get("targets", [])]
                command = GroundTruthCommand(**entry)
                if command.index != i:
                    raise BagError(f"{where}: command {i} has index {command.index}; commands must be in bag order")
                if command.absent and command.targets:
                    raise BagError(f"{where}: command {i} names what is missing and has targets; an absent "
                                   "command has none")
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
    """Return the JSON of a sidecar file; a missing or malformed file is a one-line BagError naming ``what``."""
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


def check_sidecar_header(data: Any, fmt: str, version: int | tuple[int, ...], what: str, where: str) -> None:
    """Raise a one-line BagError naming ``where`` unless ``data`` is a ``what`` sidecar of ``fmt`` at ``version``."""
    if not isinstance(data, dict) or data.get("format") != fmt:
        raise BagError(f"{where}: not an m2sa_ros {what} file (format must be '{fmt}')")
    versions = version if isinstance(version, tuple) else (version,)
    if data.get("version") not in versions:
        raise BagError(f"{where}: version {data.get('version')!r} is not supported (expected "
                       f"{' or '.join(map(str, versions))})")


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
    """Return the bag's sidecar (or ``override``); None for a bag without ground truth."""
    path = sidecar_to_load(bag, GROUND_TRUTH_FILE, override)
    return None if path is None else GroundTruth.load(path)


# --------------------------------------------------------------------------- tracking sequences


@dataclass
class GroundTruthSequenceFrame:
    """One frame of a sequence: its image stamp and the command's targets on it (answer order)."""

    image_stamp_ns: int
    targets: list[GroundTruthTarget] = field(default_factory=list)


@dataclass
class GroundTruthSequence:
    """The k-th command message of a tracking bag and its targets on every frame that follows."""

    index: int
    time_ns: int  # bag time of the command message (after frame 0, before frame 1)
    command: str
    split: str  # the question family (object, part, multi, mixed, amodal, visible)
    motion: str
    answer: str  # reference answer with one "{seg}" per target
    record_id: str
    height: int
    width: int
    frames: list[GroundTruthSequenceFrame] = field(default_factory=list)
    mask_type: str | None = None  # "modal" | "amodal": which shape ``segmentation`` holds

    def command_at(self, frame: int, index: int | None = None, split: str | None = None) -> GroundTruthCommand:
        """Frame ``frame`` of the sequence as an ordinary ground-truth command (for scoring and overlays)."""
        entry = self.frames[frame]
        return GroundTruthCommand(index=self.index if index is None else index, time_ns=self.time_ns,
                                  image_stamp_ns=entry.image_stamp_ns, command=self.command,
                                  split=self.split if split is None else split, answer=self.answer,
                                  record_id=f"{self.record_id}/frame{frame}", height=self.height, width=self.width,
                                  targets=entry.targets, mask_type=self.mask_type)


@dataclass
class TrackingGroundTruth:
    """The tracking sidecar of a bag: sequences in bag order, each with its frames."""

    image_topic: str = IMAGE_TOPIC
    command_topic: str = COMMAND_TOPIC
    generator: dict[str, Any] = field(default_factory=dict)  # how the sequences were made (seed, motion, ...)
    sequences: list[GroundTruthSequence] = field(default_factory=list)

    def frame_index(self) -> dict[int, tuple[int, int]]:
        """Image stamp -> (sequence index, frame index within it)."""
        return {f.image_stamp_ns: (s.index, t) for s in self.sequences for t, f in enumerate(s.frames)}

    @property
    def n_frames(self) -> int:
        return max((len(s.frames) for s in self.sequences), default=0)

    def to_json(self) -> dict[str, Any]:
        return {"format": TRACKING_GROUND_TRUTH_FORMAT, "version": TRACKING_GROUND_TRUTH_VERSION,
                "image_topic": self.image_topic, "command_topic": self.command_topic,
                "generator": self.generator, "sequences": [asdict(s) for s in self.sequences]}

    def save(self, path: str | Path) -> Path:
        return write_sidecar_json(path, self.to_json())

    @classmethod
    def from_json(cls, data: Any, where: str = "tracking ground truth") -> "TrackingGroundTruth":
        """Parse and check a tracking sidecar; BagError naming ``where`` and the entry on bad input."""
        check_sidecar_header(data, TRACKING_GROUND_TRUTH_FORMAT, TRACKING_GROUND_TRUTH_VERSION,
                             "tracking ground-truth", where)
        sequences = []
        try:
            for i, entry in enumerate(data.get("sequences", [])):
                entry = dict(entry)
                entry["frames"] = [GroundTruthSequenceFrame(int(f["image_stamp_ns"]),
                                                            [GroundTruthTarget(**t) for t in f.get("targets", [])])
                                   for f in entry.get("frames", [])]
                sequence = GroundTruthSequence(**entry)
                if sequence.index != i:
                    raise BagError(f"{where}: sequence {i} has index {sequence.index}; sequences must be in bag order")
                if not sequence.frames:
                    raise BagError(f"{where}: sequence {i} has no frames")
                sequences.append(sequence)
        except (TypeError, ValueError, KeyError) as exc:
            if isinstance(exc, BagError):
                raise
            raise BagError(f"{where}: malformed entry: {exc}") from exc
        stamps = [f.image_stamp_ns for s in sequences for f in s.frames]
        if len(set(stamps)) != len(stamps):
            raise BagError(f"{where}: an image stamp belongs to more than one frame")
        return cls(image_topic=str(data.get("image_topic", IMAGE_TOPIC)),
                   command_topic=str(data.get("command_topic", COMMAND_TOPIC)),
                   generator=dict(data.get("generator", {})), sequences=sequences)

    @classmethod
    def load(cls, path: str | Path) -> "TrackingGroundTruth":
        return cls.from_json(read_sidecar_json(path, "tracking ground truth"), str(path))


def tracking_ground_truth_path(bag: str | Path) -> Path:
    """Where the tracking sidecar of ``bag`` lives."""
    return Path(bag) / TRACKING_GROUND_TRUTH_FILE


def load_tracking_ground_truth(bag: str | Path, override: str | Path | None = None) -> TrackingGroundTruth | None:
    """Return the bag's tracking sidecar (or ``override``); None for a bag without one."""
    path = sidecar_to_load(bag, TRACKING_GROUND_TRUTH_FILE, override)
    return None if path is None else TrackingGroundTruth.load(path)
