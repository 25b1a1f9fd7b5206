#!/usr/bin/env python3
"""What a target's 3-D geometry costs on this CPU, and what its points cost on the wire.

m2sa_ros/target_geometry.py turns a visible mask and registered depth into the target's
points, oriented box and normal; the node will run it once per target per frame. This
script renders synthetic scenes at a camera's resolution (the scene at the image height,
padded to the width: 640x480 and 1280x720), with registered depth degraded as a sensor
would (20 % holes, 3 mm noise, mixed pixels in a 2-px ring at each mask's border), and
times :func:`target_geometry` per object and per part target (the same work the node
will do: the mask is full-frame). It then sizes the targets' PointCloud2 messages
(serialised CDR bytes) with every valid pixel (voxel 0), at the default voxel, and empty
(``target_points`` off), and the 3-D errors against the ground truth on the way.

    .venv/bin/python bench/bench_target_geometry.py
    .venv/bin/python bench/bench_target_geometry.py --scenes 4 --repeats 3 --no-write
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

from bench.common import RESULTS, RESULTS_HEADER, command_line, host_line, publish_report  # noqa: E402
from m2sa_core.data.synthetic.depth import render_depth  # noqa: E402
from m2sa_core.data.synthetic.depth_noise import add_holes, add_noise, bleed_edges  # noqa: E402
from m2sa_core.data.synthetic.scene import Scene, SceneObject, render_layout  # noqa: E402
from m2sa_ros.centroids import Intrinsics  # noqa: E402
from m2sa_ros.target_geometry import GeometryParams, register_depth, target_geometry  # noqa: E402

RESOLUTIONS = ((640, 480), (1280, 720))


def padded_scene(seed: int, width: int, height: int) -> tuple[Scene, int]:
    """A synthetic scene rendered at ``height`` x ``height`` and centred in ``width`` columns."""
    layout, scene = render_layout(np.random.default_rng(seed), height)
    left = (width - height) // 2

    def pad(a: np.ndarray) -> np.ndarray:
        widths = [(0, 0), (left, width - height - left)] + [(0, 0)] * (a.ndim - 2)
        return np.pad(a, widths, mode="edge" if a.ndim == 3 else "constant")

    objects = [SceneObject(o.category, o.instance, pad(o.amodal), pad(o.visible),
                           {k: pad(v) for k, v in o.parts_amodal.items()},
                           {k: pad(v) for k, v in o.parts_visible.items()}) for o in scene.objects]
    return Scene(pad(scene.image), objects), layout.horizon


def cloud_bytes(n_points: int) -> int:
    """Serialised size of a PointCloud2 of ``n_points`` x, y, z FLOAT32 points (with rclpy,
    else the CDR layout computed: 12 bytes a point plus the empty message's fields)."""
    try:
        from rclpy.serialization import serialize_message
        from std_msgs.msg import Header

        from m2sa_ros.cloud_conversion import points_to_cloud
    except ImportError:
        return 133 + 12 * n_points  # CDR: header "camera_color_optical_frame", 3 fields, flags
    return len(serialize_message(points_to_cloud(np.zeros((n_points, 3), np.float32),
                                                 Header(frame_id="camera_color_optical_frame"))))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenes", type=int, default=12, help="seeded scenes per resolution")
    parser.add_argument("--repeats", type=int, default=5, help="timed calls per target (the median counts)")
    parser.add_argument("--voxel", type=float, default=GeometryParams().voxel_m, help="default voxel (m)")
    parser.add_argument("--no-write", action="store_true", help="print only; do not append to bench/RESULTS.md")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    report: dict = {"scenes": args.scenes, "repeats": args.repeats, "voxel_m": args.voxel, "rows": []}
    rows = []
    every = GeometryParams(voxel_m=0.0)
    default = GeometryParams(voxel_m=args.voxel)
    for width, height in RESOLUTIONS:
        per_level: dict[str, dict[str, list[float]]] = {
            lvl: {"ms": [], "pixels": [], "n0": [], "nv": [], "centroid_mm": [], "normal_deg": []}
            for lvl in ("object", "part")}
        for seed in range(args.scenes):
            scene, horizon = padded_scene(seed, width, height)
            sd = render_depth(scene, np.random.default_rng(10_000 + seed), horizon=horizon)
            k = Intrinsics.from_k(sd.camera.k, width, height)
            rng = np.random.default_rng(seed)
            for _index, part, mask, truth in sd.visible_targets(scene):
                depth = add_holes(add_noise(bleed_edges(sd.depth, mask, rng, 2), rng, 0.003), rng, 0.2)
                bound = register_depth(depth, k, (height, width))
                target_geometry(mask, bound, default)  # warm-up
                times = []
                for _ in range(args.repeats):
                    t0 = time.perf_counter()
                    g = target_geometry(mask, bound, default)
                    times.append((time.perf_counter() - t0) * 1e3)
                d = per_level["part" if part else "object"]
                d["ms"].append(statistics.median(times))
                d["pixels"].append(float(mask.sum()))
                d["nv"].append(float(len(g.points)))
                d["n0"].append(float(len(target_geometry(mask, bound, every).points)))
                if g.has_pose:
                    d["centroid_mm"].append(float(np.linalg.norm(g.centroid - truth.centroid) * 1e3))
                    d["normal_deg"].append(float(np.degrees(np.arccos(np.clip(g.normal @ truth.normal, -1, 1)))))
        for level, d in per_level.items():
            ms = np.array(d["ms"])
            n0, nv = float(np.median(d["n0"])), float(np.median(d["nv"]))
            row = {"resolution": f"{width}x{height}", "level": level, "targets": len(ms),
                   "pixels_median": float(np.median(d["pixels"])), "ms_median": float(np.median(ms)),
                   "ms_p95": float(np.percentile(ms, 95)), "ms_max": float(ms.max()),
                   "points_voxel0": n0, "points_voxel": nv, "bytes_voxel0": cloud_bytes(int(n0)),
                   "bytes_voxel": cloud_bytes(int(nv)), "bytes_empty": cloud_bytes(0),
                   "centroid_mm_median": float(np.median(d["centroid_mm"])),
                   "normal_deg_median": float(np.median(d["normal_deg"]))}
            report["rows"].append(row)
            rows.append(f"| {row['resolution']} | {level} | {row['targets']} | {row['pixels_median']:.0f} | "
                        f"{row['ms_median']:.2f} | {row['ms_p95']:.2f} | {row['ms_max']:.2f} | "
                        f"{n0:.0f} / {row['bytes_voxel0']} | {nv:.0f} / {row['bytes_voxel']} | "
                        f"{row['bytes_empty']} | {row['centroid_mm_median']:.1f} | {row['normal_deg_median']:.1f} |")
    text = "\n".join([
        "## bench_target_geometry: a target's points, box and normal from its mask and registered depth, on cpu",
        "",
        f"- date: {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC; machine: {host_line()}",
        f"- command: `{command_line(argv, 'bench_target_geometry.py')}`",
        f"- {args.scenes} synthetic scenes per resolution (rendered at the height, padded to the width), depth "
        "with 20 % holes, 3 mm noise and mixed pixels in a 2-px ring at the mask's border; time = median of "
        f"{args.repeats} calls of `target_geometry` per target (full-frame mask in, points out), single thread",
        f"- cloud = points (median per target) / serialised PointCloud2 bytes, every valid pixel (voxel 0) and at "
        f"the default voxel ({args.voxel * 1000:.0f} mm); empty = the message with `target_points` off; errors "
        "against the synthetic ground truth (tests/ros/test_target_geometry.py has the bounds)",
        "",
        "| image | target | targets | mask px (median) | ms median | ms p95 | ms max | cloud voxel 0 | "
        f"cloud voxel {args.voxel * 1000:.0f} mm | empty bytes | centroid err mm | normal err deg |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        *rows,
        "",
    ])
    publish_report(text, report, RESULTS, not args.no_write, args.json, header=RESULTS_HEADER)
    return 0


if __name__ == "__main__":
    sys.exit(main())
