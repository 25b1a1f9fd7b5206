"""Tracking bags: rendered camera sequences and the ground truth of every frame.

A tracked command is answered once and then followed on the frames that come after it,
so scoring it needs what an ordinary bag does not hold: the targets' masks on *every*
frame of a sequence. ``m2sa-bag make --sequences N`` renders held-out sequences of the
synthetic world (``m2sa_core.data.synthetic.sequences``: pan, zoom, nudged objects, a
passing occluder) and writes them one after another into an ordinary rosbag2:

* ``/camera/image_raw``: the frames of sequence 0, then of sequence 1, ... at ``--rate``;
* ``/m2sa/command``: one command per sequence, after its first frame and before its
  second (the command a planner would send as a ``track`` goal);
* ``BAG/ground_truth.json`` (format version 1, unchanged): each command and its targets
  on the sequence's *first* frame, so every tool that reads ordinary bags (and a
  command-by-command ``m2sa-bag-eval --protocol commands``) reads a tracking bag too;
* ``BAG/tracking_ground_truth.json`` (its own format, version 1): per sequence, the
  stamp of each frame and every target's mask on it. A separate file rather than a
  version 2 of ``ground_truth.json`` so that a team's existing readers keep working on
  tracking bags and the per-frame masks are only read by the tracking scorer.

Sequence ``k`` of seed ``S`` is drawn from its own stream ``(S, k)``, the rule
``m2sa-eval --protocol tracking`` uses, so a bag and an offline evaluation with the same
seed, motion, frame count and size hold the same sequences.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from m2sa_ros.bag.record import (COMMAND_TOPIC, DEFAULT_FRAME_ID, DEFAULT_START_NS, IMAGE_TOPIC, BagError, BagPlan,
                                 GroundTruth, GroundTruthCommand, GroundTruthFrame, GroundTruthTarget, PlannedCommand,
                                 PlannedFrame, check_sidecar_header, read_sidecar_json, sidecar_to_load, write_bag,
                                 write_sidecar_json)

TRACKING_GROUND_TRUTH_FILE = "tracking_ground_truth.json"
TRACKING_GROUND_TRUTH_FORMAT = "m2sa_ros/bag_tracking_ground_truth"
TRACKING_GROUND_TRUTH_VERSION = 1


# --------------------------------------------------------------------------- ground truth
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
    """The bag's tracking sidecar (or ``override``); None for a bag without one."""
    path = sidecar_to_load(bag, TRACKING_GROUND_TRUTH_FILE, override)
    return None if path is None else TrackingGroundTruth.load(path)


# --------------------------------------------------------------------------- rendering
def render_sequence_k(seed: int, k: int, n_frames: int, motion: str, size: int) -> Any:
    """Held-out sequence ``k`` of ``seed``, drawn from its own stream ``(seed, k)`` as m2sa-eval draws it."""
    from m2sa_core.data.synthetic.sequences import render_sequence

    return render_sequence(np.random.default_rng(np.random.SeedSequence([seed, k])), n_frames, motion, size)


def _targets_on(sequence: Any, frame: int, question: Any) -> list[GroundTruthTarget]:
    """The question's targets on one frame: the shape it asks for, plus the complete one."""
    from m2sa_core.data.labels import category_of, make_label
    from m2sa_core.data.rle import encode_mask
    from m2sa_core.types import Granularity, MaskType

    out = []
    for index, part in question.targets:
        obj = sequence.frames[frame].objects[index]
        out.append(GroundTruthTarget(
            label=make_label(obj.category, obj.instance, part), category_name=category_of(obj.category, part),
            object_name=obj.category, instance=int(obj.instance), part_name=part,
            granularity=int(Granularity.PART if part else Granularity.OBJECT),
            segmentation=encode_mask(sequence.target_mask(frame, (index, part), question.mask_type)),
            amodal_segmentation=encode_mask(sequence.target_mask(frame, (index, part), MaskType.AMODAL))))
    return out


def plan_from_sequences(sequences: list[Any], rate_hz: float = 5.0, start_ns: int = DEFAULT_START_NS,
                        frame_id: str = DEFAULT_FRAME_ID) -> tuple[BagPlan, TrackingGroundTruth]:
    """Lay sequences out in time: their frames back to back, each command after its first frame.

    Frame ``i`` of the whole bag is at ``start + i / rate_hz``; a sequence's command is
    half a period after its first frame. Sequence ``k`` asks its question ``k mod n`` (the
    world asks one per family in a fixed family order), so a bag covers object, part,
    multi-target and amodal commands rather than the first family only. Sequences
    without a question cannot be tracked and are refused.
    """
    if not rate_hz > 0:
        raise BagError(f"rate must be > 0 Hz, got {rate_hz}")
    if not sequences:
        raise BagError("no sequences to write")
    period_ns = int(round(1e9 / rate_hz))
    frames: list[PlannedFrame] = []
    commands: list[PlannedCommand] = []
    truth = GroundTruth()
    tracking = TrackingGroundTruth()
    for k, sequence in enumerate(sequences):
        if not sequence.questions:
            raise BagError(f"sequence {k} has no question to track")
        question = sequence.questions[k % len(sequence.questions)]
        height, width = sequence.frames[0].image.shape[:2]
        stamps = []
        for t, scene in enumerate(sequence.frames):
            stamp = start_ns + len(frames) * period_ns
            frames.append(PlannedFrame(stamp, (lambda image=scene.image: image), frame_id))
            truth.frames[stamp] = GroundTruthFrame(stamp, f"seq{k:03d}", f"seq{k:03d}_frame{t:02d}", height, width)
            stamps.append(stamp)
        time_ns = stamps[0] + period_ns // 2
        commands.append(PlannedCommand(time_ns, question.question))
        entry = GroundTruthSequence(
            index=k, time_ns=time_ns, command=question.question, split=question.family, motion=sequence.motion,
            answer=question.answer, record_id=f"seq{k:03d}", height=int(height), width=int(width),
            frames=[GroundTruthSequenceFrame(s, _targets_on(sequence, t, question)) for t, s in enumerate(stamps)],
            mask_type=question.mask_type)
        tracking.sequences.append(entry)
        truth.commands.append(entry.command_at(0))
    return BagPlan(frames, commands, truth), tracking


def make_sequence_bag(out: str | Path, count: int, n_frames: int = 6, motion: str = "mixed", seed: int = 4242,
                      size: int = 256, storage: str = "mcap", rate_hz: float = 5.0,
                      frame_id: str = DEFAULT_FRAME_ID, progress: bool = False) -> Path:
    """Render ``count`` sequences and write them as a bag with both ground-truth sidecars."""
    from m2sa_core.data.synthetic.sequences import MOTIONS

    if count < 1:
        raise BagError(f"--sequences must be >= 1, got {count}")
    if n_frames < 2:
        raise BagError(f"--frames must be >= 2 (the answered frame and at least one tracked frame), got {n_frames}")
    if motion not in MOTIONS:
        raise BagError(f"--motion must be one of {', '.join(MOTIONS)}, got {motion!r}")
    if size < 64:
        raise BagError(f"--size must be >= 64 pixels, got {size}")
    if Path(out).exists():  # before rendering, not after
        raise BagError(f"{out} already exists; rosbag2 writes a new directory (remove it or pick another --out)")
    iterator: Any = range(count)
    if progress:
        from tqdm import tqdm

        iterator = tqdm(iterator, desc="render sequences", unit="seq")
    sequences = [render_sequence_k(seed, k, n_frames, motion, size) for k in iterator]
    plan, tracking = plan_from_sequences(sequences, rate_hz=rate_hz, frame_id=frame_id)
    generator = {"seed": seed, "sequences": count, "frames": n_frames, "motion": motion, "size": size,
                 "rate_hz": rate_hz}
    tracking.generator = generator
    plan.ground_truth.sources = [f"synthetic sequences {json.dumps(generator, sort_keys=True)}"]
    write_bag(plan, out, storage, progress=progress)
    tracking.save(tracking_ground_truth_path(out))
    return Path(out)

