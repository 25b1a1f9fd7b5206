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
What ``target_frame`` costs a result, what it adds to the messages, and how long the node waits.

With ``target_frame`` set, the node looks the transform up with tf2 at each result's
image stamp and moves every target's centroid, pose and points into it
(m2sa_ros/tf/frame_transform.py). This script builds the results the node sends for
synthetic scenes at 640x480 (the scene at the image height, padded to the width, its
registered depth: m2sa_core/data/synthetic/depth.py; every visible object and part a
target, measured as the node measures it) and times, on the worker's thread:

* the lookup in a tf2_ros Buffer holding a 50 Hz odom -> base_link stream (10 s) and a
  static base_link -> optical frame, at a stamp between two samples (interpolation and
  the chain), when the transform is there (the usual case: it has come while the model ran);
* moving the result (``move_result``: centroids, poses, the points' clouds decoded,
  moved in float64 and encoded again), and both together (``ResultFrames.apply``);
* the wait: a transform missing for the whole ``tf_timeout`` (how far past the timeout
  the worker gets back), and one whose sample comes 50 ms after the lookup started (how
  long after its arrival the result goes on), against tf2_ros's own blocking
  ``lookup_transform(timeout=...)``, which polls every 20 ms.

Message sizes are serialised CDR bytes (rclpy): the result in the optical frame and in
``base_link``, the v4 fields' share, a transform_error, the markers and the merged cloud.

    .venv/bin/python bench/bench_frame_transform.py
    .venv/bin/python bench/bench_frame_transform.py --scenes 2 --repeats 3 --waits 3 --no-write
"""

from __future__ import annotations

import argparse
import copy
import datetime as dt
from pathlib import Path
import statistics
import sys
import threading
import time

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.bench_target_geometry import padded_scene  # noqa: E402
from bench.common import command_line, host_line, publish_report, RESULTS, RESULTS_HEADER  # noqa: E402
from m2sa_core.camera import Intrinsics  # noqa: E402
from m2sa_core.data.synthetic.depth import render_depth  # noqa: E402
from m2sa_core.geometry.registered_depth import register_depth  # noqa: E402
from m2sa_core.types import Granularity, Result, Target  # noqa: E402
from m2sa_ros.tf.frame_transform import transform_msg  # noqa: E402
import numpy as np  # noqa: E402
from scipy.spatial.transform import Rotation  # noqa: E402

WIDTH, HEIGHT = 640, 480
OPTICAL, BASE, ODOM = "camera_color_optical_frame", "base_link", "odom"
START_NS = 1_000 * 10**9  # the tf stream's first stamp
RATE_HZ = 50
STREAM_S = 10
TIMEOUT_S = 0.1
LATE_S = 0.05
# The camera 1.2 m up and 0.1 m ahead of base_link, pitched 20 degrees down.
MOUNT = ((0.1, 0.0, 1.2), (Rotation.from_euler("y", 20, degrees=True)
                           * Rotation.from_euler("ZYX", [-90, 0, -90], degrees=True)).as_quat())


def robot_buffer():
    """Return a tf2_ros Buffer as a driving robot fills it: odom -> base_link at 50 Hz for 10 s, the camera's mount."""
    from tf2_ros.buffer import Buffer

    buffer = Buffer()
    buffer.set_transform_static(transform_msg(BASE, OPTICAL, 0, *MOUNT), "bench")
    for i in range(RATE_HZ * STREAM_S):
        t = i / RATE_HZ
        buffer.set_transform(transform_msg(ODOM, BASE, START_NS + i * 10**9 // RATE_HZ, (0.5 * t, 0.2 * t, 0.0),
                                           Rotation.from_euler("z", t).as_quat()), "bench")
    return buffer


def scene_results(scenes: int, stamp_ns: int) -> list:
    """
    Return the SegmentationResult the node sends for each scene.

    Every visible object and part a target, measured with the scene's registered depth
    (default voxel, points on).
    """
    from m2sa_ros.depth.depth_binding import TargetMeasure
    from m2sa_ros.messages.result_conversion import result_to_msg, ResultOrigin
    from std_msgs.msg import Header

    results = []
    for seed in range(scenes):
        scene, horizon = padded_scene(seed, WIDTH, HEIGHT)
        sd = render_depth(scene, np.random.default_rng(10_000 + seed), horizon=horizon)
        measure = TargetMeasure(register_depth(sd.depth, Intrinsics.from_k(sd.camera.k, WIDTH, HEIGHT),
                                               (HEIGHT, WIDTH)))
        targets = [Target(f"target_{i}", "object", 1, part or "", Granularity.PART if part else Granularity.OBJECT,
                          mask.copy(), score=0.9)
                   for i, (_index, part, mask, _truth) in enumerate(sd.visible_targets(scene))]
        header = Header(frame_id=OPTICAL)
        header.stamp.sec, header.stamp.nanosec = divmod(stamp_ns, 10**9)
        origin = ResultOrigin("bench", "every object and its parts", header, HEIGHT, WIDTH)
        results.append(result_to_msg(Result(answer="the targets", targets=targets), origin, 0.0, measure))
    return results


def _ms(values: list[float]) -> tuple[float, float]:
    """(median, 95th percentile) in milliseconds of values in seconds."""
    return statistics.median(values) * 1e3, float(np.percentile(values, 95)) * 1e3


def time_transform(results: list, repeats: int) -> dict:
    """Per result: the lookup, the move and both, median / p95 ms; targets and points per result."""
    from m2sa_ros.tf.frame_transform import move_result, ResultFrames

    buffer = robot_buffer()
    frames = ResultFrames(lambda _k, _t: None, buffer=buffer)
    stamp = results[0].header.stamp
    lookup, move, apply = [], [], []
    for msg in results:
        for _ in range(repeats):
            t0 = time.perf_counter()
            found = frames.lookup(ODOM, OPTICAL, stamp, TIMEOUT_S)
            lookup.append(time.perf_counter() - t0)
            assert found.transform is not None, found.error
            copied = copy.deepcopy(msg)
            t0 = time.perf_counter()
            move_result(copied, found.transform, ODOM)
            move.append(time.perf_counter() - t0)
            copied = copy.deepcopy(msg)
            t0 = time.perf_counter()
            frames.apply(copied, ODOM, TIMEOUT_S)
            apply.append(time.perf_counter() - t0)
            assert copied.geometry_frame_id == ODOM, copied.transform_error
    return {"results": len(results), "targets": statistics.median(len(m.targets) for m in results),
            "points": statistics.median(sum(int(t.points.width) for t in m.targets) for m in results),
            "lookup_ms": _ms(lookup), "move_ms": _ms(move), "apply_ms": _ms(apply)}


def time_waits(waits: int) -> dict:
    """
    Time how long past ``TIMEOUT_S`` a missing transform holds the worker.

    And how long after a late sample's arrival the lookup returns: ours against tf2_ros's
    blocking lookup.
    """
    from m2sa_ros.tf.frame_transform import ResultFrames
    from rclpy.duration import Duration
    from rclpy.time import Time
    import tf2_py

    def ours(buffer, stamp):
        return ResultFrames(lambda _k, _t: None, buffer=buffer).lookup(ODOM, OPTICAL, stamp.to_msg(), TIMEOUT_S)

    def theirs(buffer, stamp):
        try:
            return buffer.lookup_transform(ODOM, OPTICAL, stamp, Duration(seconds=TIMEOUT_S))
        except tf2_py.TransformException:
            return None

    out: dict[str, dict[str, tuple[float, float]]] = {}
    for name, lookup in (("frame_transform", ours), ("tf2_ros lookup_transform", theirs)):
        missing, woke = [], []
        for i in range(waits):
            buffer = robot_buffer()
            past_end = Time(nanoseconds=START_NS + (STREAM_S + 1 + i) * 10**9)  # after the stream: never comes
            t0 = time.perf_counter()
            lookup(buffer, past_end)
            missing.append(time.perf_counter() - t0 - TIMEOUT_S)
            stamp = Time(nanoseconds=START_NS + STREAM_S * 10**9 + 5_000_000)  # 5 ms after the last sample
            arrived: list[float] = []

            def late(buffer=buffer, arrived=arrived):
                buffer.set_transform(transform_msg(ODOM, BASE, START_NS + STREAM_S * 10**9 + 20_000_000, (5, 2, 0),
                                                   Rotation.from_euler("z", STREAM_S).as_quat()), "bench")
                arrived.append(time.perf_counter())

            timer = threading.Timer(LATE_S, late)
            timer.start()
            lookup(buffer, stamp)
            done = time.perf_counter()
            timer.join()
            woke.append(done - arrived[0])
        out[name] = {"missing_overrun_ms": _ms(missing), "late_wake_ms": _ms(woke)}
    return out


def sizes(results: list) -> dict:
    """Return the serialised bytes: the result in the optical frame and moved, the v4 fields, the views."""
    from m2sa_ros.tf.frame_transform import ResultFrames
    from m2sa_ros.messages.geometry_conversion import merged_cloud
    from m2sa_ros.messages.markers import target_markers
    from m2sa_ros.msg import SegmentationResult
    from rclpy.serialization import serialize_message

    msg = results[0]
    optical = len(serialize_message(msg))
    moved = copy.deepcopy(msg)
    ResultFrames(lambda _k, _t: None, buffer=robot_buffer()).apply(moved, BASE, TIMEOUT_S)
    assert moved.geometry_frame_id == BASE
    failed = copy.deepcopy(msg)
    ResultFrames(lambda _k, _t: None, buffer=robot_buffer()).apply(failed, "map", 0.0)
    empty = len(serialize_message(SegmentationResult()))
    return {"targets": len(msg.targets), "points": sum(int(t.points.width) for t in msg.targets),
            "result_optical": optical, "result_base_link": len(serialize_message(moved)),
            "result_transform_error": len(serialize_message(failed)),
            "transform_error_chars": len(failed.transform_error),
            "empty_result": empty, "markers": len(serialize_message(target_markers(moved))),
            "merged_cloud": len(serialize_message(merged_cloud(moved)))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--scenes", type=int, default=8, help="seeded 640x480 scenes (one result each)")
    parser.add_argument("--repeats", type=int, default=20, help="timed calls per result")
    parser.add_argument("--waits", type=int, default=10, help="timed waits (missing, late) per implementation")
    parser.add_argument("--no-write", action="store_true", help="print only; do not append to bench/RESULTS.md")
    parser.add_argument("--json", default=None, help="also write the report as JSON here")
    args = parser.parse_args(argv)

    results = scene_results(args.scenes, START_NS + 5 * 10**9 + 7_000_000)  # between two 50 Hz samples
    cost = time_transform(results, args.repeats)
    waits = time_waits(args.waits)
    size = sizes(results)
    report = {"cost": cost, "waits": waits, "sizes": size}

    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    (lm, lp), (mm, mp), (am, ap) = cost["lookup_ms"], cost["move_ms"], cost["apply_ms"]
    lines = [
        "## bench_frame_transform: target_frame's cost per result, message sizes and the tf wait, on cpu",
        "",
        f"- date: {now}; machine: {host_line()}",
        f"- command: `{command_line(argv, 'bench_frame_transform.py')}`",
        f"- {cost['results']} results of synthetic {WIDTH}x{HEIGHT} scenes (every visible object and part a target, "
        f"measured as the node does, 5 mm voxel): median {cost['targets']:.0f} targets and {cost['points']:.0f} points "
        f"a result; tf2_ros Buffer with odom -> base_link at {RATE_HZ} Hz ({STREAM_S} s) and the camera's static "
        f"mount, looked up odom <- optical at a stamp between two samples; {args.repeats} calls per result, "
        "worker thread",
        "",
        "| step | ms median | ms p95 |",
        "|---|---:|---:|",
        f"| lookup (tf2, transform there) | {lm:.3f} | {lp:.3f} |",
        f"| move_result (centroids, poses, clouds) | {mm:.3f} | {mp:.3f} |",
        f"| ResultFrames.apply (both) | {am:.3f} | {ap:.3f} |",
        "",
        f"Waiting (tf_timeout {TIMEOUT_S} s, {args.waits} runs each): a transform that never comes, how long past the "
        f"timeout the worker gets back; one whose sample arrives {LATE_S * 1e3:.0f} ms after the lookup started, "
        "how long after its arrival the lookup returns:",
        "",
        "| implementation | missing: overrun ms median | p95 | late: wake after arrival ms median | p95 |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, w in waits.items():
        (om, op), (wm, wp) = w["missing_overrun_ms"], w["late_wake_ms"]
        lines.append(f"| {name} | {om:.2f} | {op:.2f} | {wm:.2f} | {wp:.2f} |")
    lines += [
        "",
        f"Serialised sizes (bytes, one result of {size['targets']} targets, {size['points']} points): result in the "
        f"optical frame {size['result_optical']}, in base_link {size['result_base_link']}, with a transform_error "
        f"({size['transform_error_chars']} characters) {size['result_transform_error']}; an empty result "
        f"{size['empty_result']}; markers {size['markers']}; merged target_points {size['merged_cloud']}.",
    ]
    text = "\n".join(lines) + "\n"
    publish_report(text, report, RESULTS, not args.no_write, args.json, header=RESULTS_HEADER)
    return 0


if __name__ == "__main__":
    sys.exit(main())
