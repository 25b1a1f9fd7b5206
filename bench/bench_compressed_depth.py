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
What compressedDepth costs the node: decoding one frame's depth, and how small it is.

With ``use_compressed_depth`` the node decodes the depth nearest a command's frame when it
binds it (m2sa_ros/depth/compressed_depth.py), once per command, on the worker's thread. This
script encodes synthetic 640x480 registered depth (m2sa_core/data/synthetic/depth.py, the
bag recorder's ``mild`` sensor artefacts: holes, noise, mixed edges) as
compressed_depth_image_transport's publisher does with its defaults, for 16UC1 and 32FC1,
PNG and RVL, and times the decode to float metres beside the raw image's conversion
(``depth_to_metres``); sizes are the CompressedImage's data against the raw image's.

    .venv/bin/python bench/bench_compressed_depth.py
    .venv/bin/python bench/bench_compressed_depth.py --scenes 2 --repeats 3 --no-write
"""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path
import statistics
import sys
import time
from types import SimpleNamespace

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.bench_target_geometry import padded_scene  # noqa: E402
from bench.common import command_line, host_line, publish_report, RESULTS, RESULTS_HEADER  # noqa: E402
from m2sa_core.data.synthetic.depth import render_depth  # noqa: E402
from m2sa_core.geometry.depth_encoding import to_16uc1  # noqa: E402
from m2sa_ros.bag.depth_recording import ARTEFACT_LEVELS, sensor_depth  # noqa: E402
from m2sa_ros.depth.compressed_depth import decode_compressed_depth, encode_compressed_depth  # noqa: E402
from m2sa_ros.messages.image_conversion import depth_to_metres  # noqa: E402
import numpy as np  # noqa: E402

WIDTH, HEIGHT = 640, 480
CASES = (("16UC1", "png"), ("16UC1", "rvl"), ("32FC1", "png"), ("32FC1", "rvl"))


def scene_depths(n: int) -> list[np.ndarray]:
    """``n`` seeded 640x480 registered depth images (metres, NaN = none) with mild artefacts."""
    depths = []
    for seed in range(n):
        scene, horizon = padded_scene(seed, WIDTH, HEIGHT)
        sd = render_depth(scene, np.random.default_rng(10_000 + seed), horizon=horizon)
        depths.append(sensor_depth(scene, sd.depth, ARTEFACT_LEVELS["mild"], np.random.default_rng(seed)))
    return depths


def _raw(depth_m: np.ndarray, encoding: str) -> tuple[np.ndarray, SimpleNamespace]:
    image = to_16uc1(depth_m) if encoding == "16UC1" else np.ascontiguousarray(depth_m, np.float32)
    msg = SimpleNamespace(height=HEIGHT, width=WIDTH, encoding=encoding, is_bigendian=0,
                          step=WIDTH * image.itemsize, data=image.astype(image.dtype.newbyteorder("<")).tobytes())
    return image, msg


def _ms(fn, repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1e3)
    return times


def measure(depths: list[np.ndarray], repeats: int) -> dict:
    rows = {}
    for encoding, codec in CASES:
        decode, raw_convert, sizes, raw_sizes, errors = [], [], [], [], []
        for depth in depths:
            image, raw = _raw(depth, encoding)
            fmt, data = encode_compressed_depth(image, encoding, codec)
            msg = SimpleNamespace(format=fmt, data=data)
            decode += _ms(lambda: decode_compressed_depth(msg), repeats)
            raw_convert += _ms(lambda: depth_to_metres(raw), repeats)
            sizes.append(len(data))
            raw_sizes.append(len(raw.data))
            back, exact = decode_compressed_depth(msg), depth_to_metres(raw)
            both = np.isfinite(back) & np.isfinite(exact)
            errors.append(float(np.max(np.abs(back[both] - exact[both]))) if both.any() else 0.0)
        rows[f"{encoding} {codec}"] = {
            "decode_ms": (statistics.median(decode), float(np.percentile(decode, 95))),
            "raw_ms": statistics.median(raw_convert), "kib": statistics.median(sizes) / 1024,
            "raw_kib": statistics.median(raw_sizes) / 1024, "max_error_mm": max(errors) * 1e3}
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--scenes", type=int, default=6, help="seeded 640x480 scenes")
    parser.add_argument("--repeats", type=int, default=10, help="timed decodes per scene and case")
    parser.add_argument("--no-write", action="store_true", help="print only; do not append to bench/RESULTS.md")
    parser.add_argument("--json", default=None, help="also write the report as JSON here")
    args = parser.parse_args(argv)

    rows = measure(scene_depths(args.scenes), args.repeats)
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "## bench_compressed_depth: decoding compressedDepth (use_compressed_depth), 640x480, on cpu",
        "",
        f"- date: {now}; machine: {host_line()}",
        f"- command: `{command_line(argv, 'bench_compressed_depth.py')}`",
        f"- {args.scenes} synthetic scenes' registered depth with the bag recorder's mild artefacts, encoded as "
        "compressed_depth_image_transport's publisher does with its defaults (depth_max 10 m, depth_quantization "
        f"100, png_level 3); {args.repeats} decodes each to float metres, against the raw Image's `depth_to_metres`",
        "",
        "| encoding, codec | decode ms median | p95 | raw Image ms | KiB sent | raw KiB | max error mm |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in rows.items():
        (dm, dp) = r["decode_ms"]
        lines.append(f"| {name} | {dm:.1f} | {dp:.1f} | {r['raw_ms']:.2f} | {r['kib']:.0f} | {r['raw_kib']:.0f} | "
                     f"{r['max_error_mm']:.2f} |")
    text = "\n".join(lines) + "\n"
    publish_report(text, {"rows": rows}, RESULTS, not args.no_write, args.json, header=RESULTS_HEADER)
    return 0


if __name__ == "__main__":
    sys.exit(main())
