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
What an idle node spends on a compressed camera stream: decode on arrival against decode on demand.

A node with ``use_compressed`` receives every frame of its camera, 30 a second, whether
or not a command will ever ask about it. It used to decode each one in the image callback
(``_take_frame(msg, compressed_to_rgb, ...)``, still its path for raw images); it now keeps
the newest frame encoded and decodes it when a command or a track takes it
(m2sa_ros/cameras/latest_frame.py). This script calls both callbacks of a real, active
PerceptionNode on the same 1080p JPEG frames, in alternating blocks so that a noisy
machine's drift falls on both, and reports each one's CPU time a frame and the share of
one core it takes at 30 Hz. What both paths share, rclpy's receipt and deserialization
of the message, is outside the callback and not counted.

    .venv/bin/python bench/bench_idle_decode.py
    .venv/bin/python bench/bench_idle_decode.py --frames 30 --blocks 2 --no-write
"""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path
import statistics
import sys
import time

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.common import command_line, host_line, publish_report, RESULTS, RESULTS_HEADER  # noqa: E402
import numpy as np  # noqa: E402

WIDTH, HEIGHT = 1920, 1080
RATE_HZ = 30.0


def jpeg_frames(n: int, quality: int = 90) -> list[bytes]:
    """``n`` seeded synthetic scenes at 1920x1080, JPEG-encoded as a camera driver's compressed stream sends them."""
    import cv2
    from m2sa_core.data.synthetic.scene import render_scene

    frames = []
    for seed in range(n):
        scene = render_scene(np.random.default_rng(seed), size=HEIGHT).image
        wide = cv2.resize(scene, (WIDTH, HEIGHT), interpolation=cv2.INTER_LINEAR)
        ok, data = cv2.imencode(".jpg", cv2.cvtColor(wide, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, quality])
        assert ok
        frames.append(data.tobytes())
    return frames


def active_node(context):
    """Return a PerceptionNode on the shipped model, configured and activated, with use_compressed."""
    from m2sa_ros.perception_node import PerceptionNode

    node = PerceptionNode(context=context, cli_args=["--ros-args", "-p", "autostart:=false",
                                                     "-p", "use_compressed:=true"])
    node.trigger_configure()
    node.trigger_activate()
    if node.lifecycle_state() != "active":
        raise SystemExit(f"bench_idle_decode: the node did not activate: {node.lifecycle_state()}")
    return node


def measure(node, frames: list[bytes], blocks: int) -> dict[str, list[float]]:
    """CPU ms a frame of each path, one figure per block; the paths alternate block by block."""
    from m2sa_ros.messages.image_conversion import compressed_to_rgb
    from sensor_msgs.msg import CompressedImage

    camera = node.cameras[0]
    messages = []
    for i, data in enumerate(frames):
        msg = CompressedImage(format="jpeg", data=data)
        msg.header.stamp.sec, msg.header.stamp.nanosec = 1, i
        messages.append(msg)
    paths = {"on arrival": lambda msg: node._take_frame(msg, compressed_to_rgb, camera),
             "on demand": lambda msg: node._on_compressed(msg, camera)}
    ms: dict[str, list[float]] = {name: [] for name in paths}
    for block in range(blocks):
        order = list(paths) if block % 2 == 0 else list(reversed(paths))
        for name in order:
            started = time.process_time()
            for msg in messages:
                paths[name](msg)
            ms[name].append((time.process_time() - started) * 1000.0 / len(messages))
    # A command still sees the frame: the newest one, decoded when taken.
    taken = camera.latest.get()
    assert taken is not None and taken.rgb is not None and taken.rgb.shape == (HEIGHT, WIDTH, 3), taken
    return ms


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--frames", type=int, default=60, help="distinct 1080p JPEG frames a block receives")
    parser.add_argument("--blocks", type=int, default=6, help="blocks per path, alternating")
    parser.add_argument("--no-write", action="store_true", help="print only; do not append to bench/RESULTS.md")
    parser.add_argument("--json", default=None, help="also write the report as JSON here")
    args = parser.parse_args(argv)

    import rclpy

    frames = jpeg_frames(args.frames)
    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        node = active_node(context)
        try:
            ms = measure(node, frames, args.blocks)
        finally:
            node.close()
    finally:
        rclpy.shutdown(context=context)
    medians = {name: statistics.median(values) for name, values in ms.items()}
    share = {name: value * RATE_HZ / 10.0 for name, value in medians.items()}  # ms a frame x 30 /s -> % of a core
    ratio = medians["on demand"] / medians["on arrival"]
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    kib = statistics.mean(len(f) for f in frames) / 1024
    lines = [
        "## bench_idle_decode: an idle node's image callback on a compressed 1080p stream, on cpu",
        "",
        f"- date: {now}; machine: {host_line()}",
        f"- command: `{command_line(argv, 'bench_idle_decode.py')}`",
        f"- {args.frames} synthetic 1920x1080 scenes as JPEG (quality 90, {kib:.0f} KiB each), each block calling "
        f"one path's callback of an active PerceptionNode on all of them; {args.blocks} blocks a path, alternating; "
        "CPU time of this process (rclpy's receipt of the message, the same for both, not counted)",
        "",
        "| path | CPU ms a frame (median of blocks) | blocks | share of one core at 30 Hz |",
        "|---|---:|---|---:|",
    ]
    for name in ms:
        blocks = ", ".join(f"{v:.2f}" for v in ms[name])
        lines.append(f"| {name} | {medians[name]:.3f} | {blocks} | {share[name]:.2f} % |")
    lines += ["", f"- on demand / on arrival: {ratio:.4f}"]
    text = "\n".join(lines) + "\n"
    report = {"ms_per_frame": ms, "median_ms": medians, "core_share_percent_at_30hz": share, "ratio": ratio,
              "frames": args.frames, "blocks": args.blocks, "jpeg_kib": kib}
    publish_report(text, report, RESULTS, not args.no_write, args.json, header=RESULTS_HEADER)
    return 0


if __name__ == "__main__":
    sys.exit(main())
