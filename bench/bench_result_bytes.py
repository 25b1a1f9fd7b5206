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
What a planner receives, in bytes: a result and a tracked frame, v5's cropped PNG masks against full-frame mono8.

The node sends every result on ``result``, and while a track runs every tracked frame
also as the Track action's feedback. This script builds the result of one 1280x720 frame
with four targets the way the node builds it (m2sa_ros.messages.result_conversion with the frame's
registered depth, the default 5 mm voxel, points on): a television and a laptop whose
boxes are about 480x570 px, the laptop (0.6 m away) in front of the television's edge
(1.15 m), and two small parts, the television's button and the laptop's touchpad. The
masks have the smooth, stair-stepped edges of SAM's masks (a polygon on a quarter-resolution
grid, blurred and upsampled bilinearly, thresholded at 0.5). The depth is a plane per
object before a wall at 2.6 m: exact, as the synthetic world's (the v4 result is then the
3.97 MB measured before v5: 3.69 MB of masks, 0.28 MB of points); with 1 mm of noise, as a
D455 gives at 0.6-1.2 m (more points); and no depth at all, as with ``target_points: false``
(no points). The points do not depend on the mask encoding: a v5 result is nearly all points.

Sizes are serialised CDR bytes (rclpy's ``serialize_message``), all measured in this run:

* a result, with and without an amodal mask for every target (``amodal: true``), as
  interfaces v4 sent it (full-frame mono8 masks) and as v5 sends it (each mask cropped to
  its box, a 1-bit PNG), and v5 with ``full_frame_masks`` on (both);
* a tracked frame: the result on ``result`` plus its Track feedback message (goal id and
  feedback): v4 sent the whole result twice, v5 sends the feedback without masks and points;
* the label image (``labels``, mono16, sent only while someone subscribes).

It also times what the masks cost: converting the result (masks and label values; no
depth), decoding its masks back to full-frame numpy as a client does, and painting the
label image.

    .venv/bin/python bench/bench_result_bytes.py
    .venv/bin/python bench/bench_result_bytes.py --repeats 5 --no-write
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
import cv2  # noqa: E402
from m2sa_core.camera import Intrinsics  # noqa: E402
from m2sa_core.geometry.registered_depth import register_depth  # noqa: E402
from m2sa_core.types import Granularity, Result, Target  # noqa: E402
import numpy as np  # noqa: E402

WIDTH, HEIGHT = 1280, 720
# A 70 degree colour camera (a D455's is 69 x 42).
CAMERA = Intrinsics(fx=910.0, fy=910.0, cx=639.5, cy=359.5, width=WIDTH, height=HEIGHT)
OPTICAL = "camera_color_optical_frame"
DEPTHS = (("exact depth", 0.0), ("1 mm depth noise", 0.001), ("no depth", None))  # (name, noise m)
TV = [(150, 80), (630, 100), (620, 650), (160, 640)]
LAPTOP = [(600, 120), (1080, 140), (1070, 420), (1120, 690), (590, 680), (620, 420)]


def sam_like(polygon: list[tuple[int, int]] | None = None, ellipse: tuple | None = None, scale: int = 4) -> np.ndarray:
    """Return a full-frame mask with SAM's edges: drawn at 1/``scale`` resolution, blurred, upsampled, thresholded."""
    small = np.zeros((HEIGHT // scale, WIDTH // scale), np.float32)
    if polygon is not None:
        cv2.fillPoly(small, [(np.array(polygon, np.float64) / scale).round().astype(np.int32)], 1.0)
    if ellipse is not None:
        (cx, cy), (ax, ay), angle = ellipse
        axes = (max(1, round(ax / scale)), max(1, round(ay / scale)))
        cv2.ellipse(small, (round(cx / scale), round(cy / scale)), axes, angle, 0, 360, 1.0, -1)
    small = cv2.GaussianBlur(small, (0, 0), 1.0)
    return cv2.resize(small, (WIDTH, HEIGHT), interpolation=cv2.INTER_LINEAR) > 0.5


def scene(noise_m: float) -> tuple[list[Target], np.ndarray]:
    """Return the four targets (visible and complete masks) and the registered depth (metres, ``noise_m`` of noise)."""
    tv, laptop = sam_like(TV), sam_like(LAPTOP)
    button = sam_like(ellipse=((390, 615), (14, 9), 0)) & tv
    touchpad = sam_like([(800, 560), (900, 562), (905, 625), (795, 622)]) & laptop
    tv_visible = tv & ~laptop  # the laptop stands in front of the television's right edge
    rows, cols = np.mgrid[0:HEIGHT, 0:WIDTH].astype(np.float64)
    depth = np.full((HEIGHT, WIDTH), 2.6)
    depth[tv] = (1.15 + 0.0001 * (cols - 390))[tv]
    depth[button] -= 0.004
    depth[laptop] = (0.6 + 0.0002 * (rows - 400))[laptop]
    depth[touchpad] -= 0.002
    if noise_m > 0:
        depth += np.random.default_rng(0).normal(0.0, noise_m, depth.shape)

    def target(label: str, obj: str, part: str, visible: np.ndarray, complete: np.ndarray) -> Target:
        return Target(label, obj, 1, part, Granularity.PART if part else Granularity.OBJECT, visible, score=0.9,
                      amodal_mask=complete, amodal_score=0.8)

    return [target("television_set_1", "television_set", "", tv_visible, tv),
            target("laptop_computer_1", "laptop_computer", "", laptop, laptop),
            target("television_set_1's button", "television_set", "button", button, button),
            target("laptop_computer_1's touchpad", "laptop_computer", "touchpad", touchpad, touchpad)], \
        depth.astype(np.float32)


def build(targets: list[Target], depth: np.ndarray | None, *, amodal: bool, full_frame: bool):
    """Return the SegmentationResult the node sends for ``targets`` (measured with ``depth`` when given)."""
    from m2sa_ros.depth.depth_binding import TargetMeasure
    from m2sa_ros.messages.result_conversion import result_to_msg, ResultOrigin
    from std_msgs.msg import Header

    kept = [Target(t.label, t.object_name, t.instance, t.part_name, t.granularity, t.mask, score=t.score,
                   amodal_mask=t.amodal_mask if amodal else None, amodal_score=t.amodal_score)
            for t in targets]
    measure = TargetMeasure(register_depth(depth, CAMERA, (HEIGHT, WIDTH))) if depth is not None else None
    header = Header(frame_id=OPTICAL)
    header.stamp.sec, header.stamp.nanosec = 1_700_000_000, 123_456_789
    origin = ResultOrigin("4f6c1e0a9b2d4c7e8f1a2b3c4d5e6f70", "I want to turn on the TV", header, HEIGHT, WIDTH)
    return result_to_msg(Result(answer="Press the television_set_1's button [SEG] ...", targets=kept), origin, 180.0,
                         measure, full_frame_masks=full_frame)


def as_v4(msg):
    """Return ``msg`` (built with full_frame_masks) as interfaces v4 sent it: full-frame masks, no crops."""
    import copy

    from sensor_msgs.msg import CompressedImage, RegionOfInterest

    old = copy.deepcopy(msg)
    for t in old.targets:
        t.mask_crop, t.amodal_mask_crop, t.amodal_bbox, t.label_value = CompressedImage(), CompressedImage(), \
            RegionOfInterest(), 0
    return old


def feedback_bytes(result) -> int:
    """Return the serialised size of the Track feedback message (goal id + feedback) carrying ``result``."""
    from m2sa_ros.action import Track
    from rclpy.serialization import serialize_message
    from unique_identifier_msgs.msg import UUID

    message = Track.Impl.FeedbackMessage(goal_id=UUID(uuid=list(range(16))),
                                         feedback=Track.Feedback(result=result, frame_seq=7))
    return len(serialize_message(message))


def timed(fn, repeats: int) -> float:
    """Return the median wall time of ``fn()`` in milliseconds."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def main(argv: list[str] | None = None) -> int:
    from m2sa_core.label_image import paint_labels
    from m2sa_ros.messages.image_conversion import labels_to_msg
    from m2sa_ros.messages.mask_encoding import amodal_target_mask, result_masks
    from m2sa_ros.messages.result_conversion import feedback_result
    from rclpy.serialization import serialize_message

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=20, help="timed runs of each step (median)")
    parser.add_argument("--no-write", action="store_true", help="print only, do not append to bench/RESULTS.md")
    parser.add_argument("--json", help="also write the report as JSON here")
    args = parser.parse_args(argv)

    rows, report = [], {}
    for name, noise in DEPTHS:
        targets, depth = scene(noise or 0.0)
        for amodal in (False, True):
            v5 = build(targets, depth if noise is not None else None, amodal=amodal, full_frame=False)
            both = build(targets, depth if noise is not None else None, amodal=amodal, full_frame=True)
            v4 = as_v4(both)
            sizes = {"v4": len(serialize_message(v4)), "v5": len(serialize_message(v5)),
                     "v5_full_frame_masks": len(serialize_message(both))}
            feedback = feedback_bytes(feedback_result(v5))
            tracked = {"v4": sizes["v4"] + feedback_bytes(v4), "v5": sizes["v5"] + feedback, "v5_feedback": feedback}
            entry = {"result": sizes, "tracked_frame": tracked,
                     "points": sum(len(serialize_message(t.points)) for t in v5.targets),
                     "png_bytes": sum(len(t.mask_crop.data) + len(t.amodal_mask_crop.data) for t in v5.targets)}
            report[f"{name}, {'amodal' if amodal else 'visible'}"] = entry
            rows.append((name, amodal, entry))
    boxes = [tuple(int(v) for v in cv2.boundingRect(t.mask.astype(np.uint8))[2:]) for t in targets]
    report["boxes_wh"], report["pixels"] = boxes, [int(t.mask.sum()) for t in targets]
    labels = labels_to_msg(paint_labels([t.mask for t in targets], (HEIGHT, WIDTH)), build(
        targets, None, amodal=False, full_frame=False).header)
    report["labels_bytes"] = len(serialize_message(labels))

    plain = build(targets, None, amodal=True, full_frame=False)
    costs = {
        "convert_full_ms": timed(lambda: build(targets, None, amodal=True, full_frame=True), args.repeats),
        "convert_v5_ms": timed(lambda: build(targets, None, amodal=True, full_frame=False), args.repeats),
        "decode_v5_ms": timed(lambda: (result_masks(plain),
                                       [amodal_target_mask(t, HEIGHT, WIDTH) for t in plain.targets]), args.repeats),
        "paint_labels_ms": timed(lambda: paint_labels([t.mask for t in targets], (HEIGHT, WIDTH)), args.repeats),
    }
    report["costs"] = costs

    def mb(n: int) -> str:
        return f"{n / 1e6:.3f}"

    lines = ["## bench_result_bytes: a result and a tracked frame on the wire, 1280x720, four targets, on cpu", "",
             f"- date: {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC; machine: {host_line()}",
             f"- command: `{command_line(argv, 'bench_result_bytes.py')}`",
             "- four targets (boxes " + ", ".join(f"{w}x{h}" for w, h in boxes) + " px; "
             + ", ".join(f"{p}" for p in report["pixels"]) + " visible pixels): a television (1.15 m), a laptop "
             "(0.6 m) in front of its edge, the television's button and the laptop's touchpad, SAM-like edges; "
             "depth a plane per object, exact or with 1 mm noise, or none (no points); points at the default "
             "5 mm voxel; serialised CDR bytes (rclpy), v4 and v5 in this run (v4: the v5 message with the "
             "full-frame masks and empty v5 fields, about 80 bytes a target more than v4's own)", "",
             "| message | depth | amodal masks | v4: full-frame mono8 (MB) | v5: cropped PNG (MB) | v4 / v5 | "
             "v5 + full_frame_masks (MB) |", "|---|---|---|---:|---:|---:|---:|"]
    for name, amodal, entry in rows:
        sizes, tracked, which = entry["result"], entry["tracked_frame"], "every target" if amodal else "none"
        lines.append(f"| result | {name} | {which} | {mb(sizes['v4'])} | {mb(sizes['v5'])} | "
                     f"{sizes['v4'] / sizes['v5']:.1f}x | {mb(sizes['v5_full_frame_masks'])} |")
        lines.append(f"| tracked frame: result + Track feedback | {name} | {which} | {mb(tracked['v4'])} | "
                     f"{mb(tracked['v5'])} | {tracked['v4'] / tracked['v5']:.1f}x | |")
    exact, noisy, bare = (report["exact depth, visible"], report["1 mm depth noise, visible"],
                          report["no depth, amodal"])
    lines += ["", f"Of a v5 result the targets' points are {mb(exact['points'])} MB with exact depth and "
              f"{mb(noisy['points'])} MB with 1 mm of noise; the four PNGs are {exact['png_bytes']} bytes "
              f"({bare['png_bytes']} for all eight with the amodal masks); a v5 Track feedback message is "
              f"{exact['tracked_frame']['v5_feedback']} bytes. The label image (`labels`, mono16) is "
              f"{mb(report['labels_bytes'])} MB a result, sent only while someone subscribes.", "",
              f"Costs (median of {args.repeats}, no depth, amodal masks on): converting the result "
              f"{costs['convert_v5_ms']:.1f} ms with crops alone (v5's default), "
              f"{costs['convert_full_ms']:.1f} ms with full_frame_masks on (crops and full-frame masks); "
              f"a client decoding all eight masks to full frame {costs['decode_v5_ms']:.1f} ms; painting the "
              f"label image {costs['paint_labels_ms']:.1f} ms."]
    publish_report("\n".join(lines), report, RESULTS, not args.no_write, args.json, header=RESULTS_HEADER)
    return 0


if __name__ == "__main__":
    sys.exit(main())
