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
Tracking against re-running the command: time per frame and the gIoU it costs.

One run measures, on the same synthetic camera sequences and the same model:

* time per tracked frame (SAM encode + one decoder pass from the command's prompts,
  with and without the previous mask) against the whole command on the same frame,
  as a ratio within the run (this machine is noisy; absolute times are context);
* gIoU per frame and overall of the three modes (``training/tracking_eval.py``).

Examples::

    OMP_NUM_THREADS=1 python bench/bench_tracking.py                       # shipped tiny model, CPU
    python bench/bench_tracking.py --model /models/m2sa-7b --device cuda   # a real model on a GPU
    python bench/bench_tracking.py --preset 7b --device cuda               # 7b, random weights (timing only)

The figures are appended to bench/RESULTS.md with the machine, date and command.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
import datetime as dt
from pathlib import Path
import sys

# A script's own folder is on sys.path, not the checkout, which the imports below need
# (hence their noqa: E402).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import command_line, host_line, publish_report, RESULTS, SHIPPED_MODEL  # noqa: E402
from m2sa_core.inference import Segmenter  # noqa: E402
import torch  # noqa: E402
from training.tracking_eval import evaluate_tracking, render_sequences, tracking_markdown  # noqa: E402


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--model", default=str(SHIPPED_MODEL), help="checkpoint directory (default: shipped tiny)")
    source.add_argument("--preset", help="a preset with random weights instead (timing only)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--sequences", type=int, default=12, help="held-out sequences (seed --seed)")
    parser.add_argument("--frames", type=int, default=6, help="frames per sequence")
    parser.add_argument("--motion", default="mixed", help="pan | zoom | nudge | occluder | mixed")
    parser.add_argument("--size", type=int, default=256, help="image side in pixels")
    parser.add_argument("--seed", type=int, default=4242, help="sequence seed (never a training seed)")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--json", help="also write the report as JSON here")
    parser.add_argument("--results", default=str(RESULTS))
    parser.add_argument("--no-write", action="store_true", help="print only; do not append to RESULTS.md")
    return parser.parse_args(argv)


def machine(device: torch.device) -> str:
    text = host_line()
    if device.type == "cuda":
        text += f", {torch.cuda.get_device_name(device)}"
    return text + f", torch {torch.__version__}"


def run(args: argparse.Namespace) -> dict:
    device = torch.device(args.device)
    name = args.preset or args.model
    segmenter = Segmenter.from_pretrained(name, device=device, max_new_tokens=args.max_new_tokens)
    sequences = render_sequences(args.seed, args.sequences, args.frames, args.motion, args.size)
    reports = evaluate_tracking(segmenter, sequences, progress=True)
    rerun = reports["rerun"].ms_per_frame
    return {
        "model": str(name), "device": str(device), "machine": machine(device),
        "sequences": args.sequences, "frames": args.frames, "motion": args.motion, "size": args.size,
        "seed": args.seed, "questions": sum(len(s.questions) for s in sequences),
        "modes": {mode: r.as_dict() for mode, r in reports.items()},
        "speedup_vs_rerun": {mode: rerun / r.ms_per_frame for mode, r in reports.items() if mode != "rerun"},
        "markdown": tracking_markdown(reports),
    }


def to_markdown(report: dict, command: str) -> str:
    lines = [
        f"## bench_tracking: {Path(report['model']).name} on {report['device']}",
        "",
        f"- date: {dt.datetime.now(dt.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- machine: {report['machine']}",
        f"- command: `{command}`",
        f"- data: {report['sequences']} sequences x {report['frames']} frames ({report['motion']}, "
        f"{report['size']} px, seed {report['seed']}), {report['questions']} questions",
        "",
        report["markdown"],
        "",
    ]
    for mode, ratio in report["speedup_vs_rerun"].items():
        lines.append(f"- {mode}: a tracked frame is **{ratio:.1f}x** cheaper than re-running the command (median)")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> dict:
    args = parse_args(argv)
    report = run(args)
    text = to_markdown(report, command_line(argv, "bench_tracking.py"))
    publish_report(text, report, args.results, write=not args.no_write, json_path=args.json)
    return report


if __name__ == "__main__":
    main()
