#!/usr/bin/env python3

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
What the mask refiner costs a frame and a command, against the same model without it.

The shipped model refines SAM's 64x64 masks to 128x128 (``sam.refiner_channels``,
m2sa_core/model/refiner.py). Its cost is once a frame (the upsampling weights, read from
the image) and per mask (a 9-term weighted sum, and full-size masks upsampled from a
grid twice as fine). This script times both on one frame of the shipped model, and on
the same weights with the refiner taken out (SAM's own 64x64 masks), alternating the two
so the machine's drift falls on both alike. Figures are ratios within one run.

    .venv/bin/python bench/bench_refiner.py
    .venv/bin/python bench/bench_refiner.py --repeats 50 --targets 1 8 --no-write
"""

from __future__ import annotations

import argparse
import copy
import datetime as dt
from pathlib import Path
import statistics
import sys
import time

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.common import command_line, host_line, publish_report, RESULTS, RESULTS_HEADER, SHIPPED_MODEL  # noqa: E402
import cv2  # noqa: E402
from m2sa_core.data.synthetic.scene import render_scene  # noqa: E402
from m2sa_core.inference import Segmenter, SegmenterStages  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402


def without_refiner(segmenter: Segmenter) -> Segmenter:
    """Return a copy of ``segmenter`` whose model has the same weights and no refiner."""
    plain = copy.copy(segmenter)
    plain.model = copy.deepcopy(segmenter.model)
    plain.model.refiner = None
    plain.model.config.sam.refiner_channels = 0
    plain.cache = copy.deepcopy(segmenter.cache)
    plain.stages = SegmenterStages(plain.model, plain.tokenizer, segmenter.settings, plain.processor, plain.cache)
    return plain


def time_model(segmenter: Segmenter, image: np.ndarray, targets: int) -> tuple[float, float]:
    """(frame encode ms, mask decode and full-size postprocess ms for ``targets`` masks)."""
    segmenter.clear_cache()
    states = list(torch.randn(targets, segmenter.model.config.hidden_size, generator=torch.Generator().manual_seed(0)))
    t0 = time.perf_counter()
    entry = segmenter.stages.encode_frame(image, None, {})
    t1 = time.perf_counter()
    segmenter.stages.decode_masks(entry, states, {})
    t2 = time.perf_counter()
    return (t1 - t0) * 1e3, (t2 - t1) * 1e3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--model", default=str(SHIPPED_MODEL))
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--targets", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the node's cpu_threads default)")
    parser.add_argument("--no-write", action="store_true", help="print only; do not append to bench/RESULTS.md")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    refined = Segmenter.from_pretrained(args.model, decoder="dynamic")
    if refined.model.refiner is None:
        print(f"bench_refiner: {args.model} has no mask refiner (sam.refiner_channels is 0)", file=sys.stderr)
        return 2
    plain = without_refiner(refined)
    image = cv2.resize(render_scene(np.random.default_rng(0), size=480).image, (640, 480))  # a camera's 4:3 frame
    rows, report = [], {"model": args.model, "repeats": args.repeats, "threads": args.threads, "rows": []}
    with torch.inference_mode():
        for n in args.targets:
            times = {"refiner": [], "plain": []}
            for seg in (refined, plain):
                time_model(seg, image, n)  # warm-up
            for _ in range(args.repeats):
                for name, seg in (("refiner", refined), ("plain", plain)):
                    times[name].append(time_model(seg, image, n))
            med = {k: (statistics.median(e for e, _ in v), statistics.median(d for _, d in v))
                   for k, v in times.items()}
            row = {"targets": n, "encode_ms": med["refiner"][0], "encode_plain_ms": med["plain"][0],
                   "decode_ms": med["refiner"][1], "decode_plain_ms": med["plain"][1]}
            report["rows"].append(row)
            rows.append(f"| {n} | {row['encode_ms']:.1f} | {row['encode_plain_ms']:.1f} | "
                        f"{row['encode_ms'] / row['encode_plain_ms']:.2f}x | {row['decode_ms']:.1f} | "
                        f"{row['decode_plain_ms']:.1f} | {row['decode_ms'] / row['decode_plain_ms']:.2f}x |")
    h, w = image.shape[:2]
    text = "\n".join([
        f"## bench_refiner: {Path(args.model).name} on cpu, with and without its mask refiner",
        "",
        f"- date: {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC; machine: {host_line()}",
        f"- command: `{command_line(argv, 'bench_refiner.py')}`",
        f"- one {h}x{w} frame, {args.threads} torch thread(s), median of {args.repeats} alternating runs; "
        "decode = SAM's decoder, the refiner and the full-size visible masks",
        "",
        "| targets | frame encode ms | without refiner | ratio | mask decode ms | without refiner | ratio |",
        "|---:|---:|---:|---:|---:|---:|---:|",
        *rows,
        "",
    ])
    publish_report(text, report, RESULTS, not args.no_write, args.json, header=RESULTS_HEADER)
    return 0


if __name__ == "__main__":
    sys.exit(main())
