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
Tracking bags: rendered camera sequences and the ground truth of every frame.

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
  stamp of each frame and every target's mask on it (``m2sa_ros.bag.ground_truth``
  reads and writes both sidecars);
* with depth (``depth=``, the CLI's default): a registered depth image and camera_info
  beside every frame, one 3-D world per sequence (``m2sa_core.data.synthetic.
  sequence_depth``), and ``BAG/geometry_ground_truth.json`` with every target's visible
  surface on every frame (``m2sa_ros.bag.depth_recording.plan_sequence_depth``), so that
  ``m2sa-bag-eval`` scores the tracked targets in 3-D too.

Sequence ``k`` of seed ``S`` is drawn from its own stream ``(S, k)``, the rule
``m2sa-eval --protocol tracking`` uses, so a bag and an offline evaluation with the same
seed, motion, frame count and size hold the same sequences.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from m2sa_ros.bag.bag_io import BagPlan, DEFAULT_FRAME_ID, DEFAULT_START_NS, PlannedCommand, PlannedFrame, write_bag
from m2sa_ros.bag.ground_truth import (
    BagError,
    GroundTruth,
    GroundTruthFrame,
    GroundTruthSequence,
    GroundTruthSequenceFrame,
    GroundTruthTarget,
    tracking_ground_truth_path,
    TrackingGroundTruth,
)
import numpy as np


# --------------------------------------------------------------------------- rendering
def render_sequence_k(seed: int, k: int, n_frames: int, motion: str, size: int) -> Any:
    """Held-out sequence ``k`` of ``seed``, drawn from its own stream ``(seed, k)`` as m2sa-eval draws it."""
    from m2sa_core.data.synthetic.sequences import render_sequence

    return render_sequence(np.random.default_rng(np.random.SeedSequence([seed, k])), n_frames, motion, size)


def _targets_on(sequence: Any, frame: int, question: Any) -> list[GroundTruthTarget]:
    """Return the question's targets on one frame: the shape it asks for, plus the complete one."""
    from m2sa_core.data.rle import encode_mask
    from m2sa_core.labels import category_of, make_label
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
    """
    Lay sequences out in time: their frames back to back, each command after its first frame.

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
                      frame_id: str = DEFAULT_FRAME_ID, progress: bool = False, depth: Any = None) -> Path:
    """
    Render ``count`` sequences and write them as a bag with both ground-truth sidecars.

    ``depth``: a ``depth_recording.DepthOptions`` to record registered depth, camera_info and
    the per-frame 3-D ground truth too; None for images and commands only.
    """
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
    if depth is not None:
        from m2sa_ros.bag.depth_recording import plan_sequence_depth

        plan_sequence_depth(plan, tracking, sequences, seed, depth)
    plan.ground_truth.sources = [f"synthetic sequences {json.dumps(generator, sort_keys=True)}"]
    write_bag(plan, out, storage, progress=progress)
    tracking.save(tracking_ground_truth_path(out))
    return Path(out)
