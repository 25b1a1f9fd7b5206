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
How well a command's targets are followed over a camera sequence, and at what cost.

Three ways to keep a command's masks current after the camera or the scene moved, each
scored per frame against the sequence's ground truth (see
``m2sa_core.data.synthetic.sequences``):

* ``prompts``: frame 0 answers the command with the whole model; every later frame
  re-segments with frame 0's ``[SEG]`` prompts (SAM alone, no language model);
* ``previous_mask``: the same, plus the previous frame's mask as SAM's mask prompt;
* ``rerun``: the whole command again on every frame (the cost tracking saves).

gIoU / cIoU per frame index and overall use the project's matching (Hungarian on IoU,
unmatched entries score 0), the mask each command asked for (visible or complete).
Frame 0 is the same answer in every mode. The frame cache is cleared before every frame
so each mode pays for its own image encodes.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass, field
import json
from pathlib import Path
import statistics

from m2sa_core.data.synthetic.sequences import MOTIONS, render_sequence, SceneSequence
from m2sa_core.evaluation.metrics import SegmentationEvaluator
from m2sa_core.inference import Segmenter
from m2sa_core.types import Result
import numpy as np
from tqdm import tqdm
from training.distributed import DistInfo, resolve_device

MODES = ("prompts", "previous_mask", "rerun")


@dataclass
class ModeReport:
    """One mode's scores: per frame index, overall (frames after the first), and time per frame."""

    per_frame: list[dict[str, float]]  # frame index -> {"giou", "ciou", "samples"}
    overall: dict[str, float]
    ms_per_frame: float  # median over the frames after the first
    frame_ms: list[float] = field(default_factory=list, repr=False)

    def as_dict(self) -> dict:
        return {"per_frame": self.per_frame, "overall": self.overall, "ms_per_frame": self.ms_per_frame}


def _frame_results(segmenter: Segmenter, sequence: SceneSequence, command: str, mode: str) -> list[Result]:
    """Return the command's result on every frame of ``sequence`` under ``mode``."""
    segmenter.clear_cache()
    first = segmenter.segment(sequence.frames[0].image, command, keep_prompts=True)
    results, state = [first], None
    for frame in sequence.frames[1:]:
        segmenter.clear_cache()
        if mode == "rerun":
            results.append(segmenter.segment(frame.image, command))
            continue
        result, state = segmenter.track(frame.image, first.prompts, state,
                                        use_previous_mask=mode == "previous_mask")
        results.append(result)
    return results


def evaluate_tracking(segmenter: Segmenter, sequences: Sequence[SceneSequence], modes: Sequence[str] = MODES,
                      progress: bool = True) -> dict[str, ModeReport]:
    """Score every question of every sequence under each mode (see the module docstring)."""
    unknown = sorted(set(modes) - set(MODES))
    if unknown:
        raise ValueError(f"unknown tracking mode(s) {unknown}; known: {list(MODES)}")
    n_frames = max((len(s.frames) for s in sequences), default=0)
    reports = {}
    for mode in modes:
        frame_names = [f"frame_{t}" for t in range(n_frames)]
        evaluator = SegmentationEvaluator("generative", splits=[*frame_names, "after_first"])
        times: list[float] = []
        items = [(s, q) for s in sequences for q in s.questions]
        for sequence, question in tqdm(items, desc=f"tracking ({mode})", disable=not progress):
            results = _frame_results(segmenter, sequence, question.question, mode)
            for t, result in enumerate(results):
                preds = [target.requested_mask for target in result.targets]
                gts = [sequence.target_mask(t, target, question.mask_type) for target in question.targets]
                evaluator.add(preds, gts, split=frame_names[t])
                if t:
                    evaluator.add(preds, gts, split="after_first")
                    times.append(result.timings_ms.get("total", float("nan")))
        split_reports = evaluator.report()
        per_frame = [{"giou": split_reports[name].giou, "ciou": split_reports[name].ciou,
                      "samples": split_reports[name].samples} for name in frame_names if name in split_reports]
        after = split_reports.get("after_first")
        overall = {"giou": after.giou, "ciou": after.ciou, "samples": after.samples} if after else {}
        median = statistics.median(times) if times else float("nan")
        reports[mode] = ModeReport(per_frame, overall, median, times)
    return reports


def tracking_markdown(reports: dict[str, ModeReport]) -> str:
    """Per-frame gIoU per mode, overall gIoU / cIoU and ms per frame, as Markdown tables."""
    modes = list(reports)
    n = max(len(r.per_frame) for r in reports.values())
    lines = ["| frame | " + " | ".join(f"{m} gIoU" for m in modes) + " |",
             "|---|" + "---|" * len(modes)]
    for t in range(n):
        cells = [f"{100 * r.per_frame[t]['giou']:.1f}" if t < len(r.per_frame) else "" for r in reports.values()]
        lines.append(f"| {t} | " + " | ".join(cells) + " |")
    lines += ["", "| mode | gIoU (frames 1..) | cIoU (frames 1..) | ms per frame (median) |", "|---|---|---|---|"]
    for mode, r in reports.items():
        if r.overall:
            lines.append(f"| {mode} | {100 * r.overall['giou']:.1f} | {100 * r.overall['ciou']:.1f} | "
                         f"{r.ms_per_frame:.1f} |")
    return "\n".join(lines)


def render_sequences(seed: int, count: int, n_frames: int, motion: str, size: int) -> list[SceneSequence]:
    """``count`` held-out sequences; sequence ``k`` is drawn from its own stream ``(seed, k)``."""
    return [render_sequence(np.random.default_rng(np.random.SeedSequence([seed, k])), n_frames, motion, size)
            for k in range(count)]


def add_tracking_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``m2sa-eval --protocol tracking`` (rendered sequences, no data files)."""
    group = parser.add_argument_group("tracking protocol")
    group.add_argument("--sequences", type=int, default=20, help="rendered held-out sequences")
    group.add_argument("--frames", type=int, default=8, help="frames per sequence")
    group.add_argument("--motion", choices=MOTIONS, default="mixed", help="how the view changes")
    group.add_argument("--seed", type=int, default=4242, help="sequence seed (use one training never saw)")
    group.add_argument("--size", type=int, default=256, help="image side in pixels")


def run_tracking_protocol(args: argparse.Namespace) -> int:
    """``m2sa-eval --protocol tracking``: JSON report at ``--out``, Markdown tables beside it."""
    device = resolve_device(args.device, DistInfo())  # one process: sequences are not sharded
    segmenter = Segmenter.from_pretrained(args.model, device=device, max_new_tokens=args.max_new_tokens)
    sequences = render_sequences(args.seed, args.sequences, args.frames, args.motion, args.size)
    reports = evaluate_tracking(segmenter, sequences)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    payload = {"model": str(args.model), "protocol": "tracking", "sequences": args.sequences, "frames": args.frames,
               "motion": args.motion, "seed": args.seed, "size": args.size,
               "modes": {mode: report.as_dict() for mode, report in reports.items()}}
    out.write_text(json.dumps(payload, indent=2))
    table = tracking_markdown(reports)
    out.with_suffix(".md").write_text(table + "\n")
    print(table)
    return 0
