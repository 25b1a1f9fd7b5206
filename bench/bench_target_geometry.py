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
What a target's 3-D geometry costs on this CPU, what its points cost on the wire, whether a spill turns it.

m2sa_core/geometry/target.py turns a visible mask and registered depth into the target's
points, oriented box and normal; the node runs it once per target per frame. This
script renders synthetic scenes at a camera's resolution (the scene at the image height,
padded to the width: 640x480 and 1280x720), with registered depth degraded as a sensor
would (20 % holes, 3 mm noise, mixed pixels in a 2-px ring at each mask's border), and
times :func:`target_geometry` per object and per part target (the same work the node
does: the mask is full-frame): wall time, and the thread's CPU time, which a loaded
machine (other processes waiting for the same cores) inflates far less; the robust plane
fit's share of it is timed on the same pixels. It then sizes the targets' PointCloud2
messages (serialised CDR bytes) with every valid pixel (voxel 0), at the default voxel,
and empty (``target_points`` off), and the 3-D errors against the ground truth on the way.

The spill grid: strips and patches (160x10, 60x60, 200x40 px at 0.8 m, slanted 0, 30
and 60 degrees either way, 1 mm depth noise) with 2-15 % of the mask's pixels on a
surface 3-15 cm nearer or farther (scattered, a block at one end, a band along one
side): the worst normal error, the deepest box, the spilled pixels that reached the
points, and confident wrong poses (a pose more than 10 degrees off).

The band grid: a 120x90 px target (10,800 pixels, turned 20 degrees) whose mask also
covers a 10 px strip of a second surface 3 to 7 cm behind or in front, at 0.5-2.5 m,
seen by a 640x480 camera (focal length 385 px), with exact depth, 1 mm of noise
("quiet") and D455-like and D435-like noise (RealSense's ``z^2 * 0.08 / (focal_px *
baseline)``: 1.96 and 4.16 mm at 1 m; tests/core/test_plane_band.py has the same
cases and their bounds): the other surface's pixels let into the points, the target's
own pixels kept, the normal's error and ``inlier_fraction``; and the issue's laptop (2.13
m, a strip of the television 3.8-6.9 cm behind it, exact depth). The CPU time of
:func:`target_geometry` on each of those targets is the cost of a 10k-pixel target.

``--baseline REV`` runs the timing, both grids and the 10k-pixel cost through the
geometry of a git revision as well, timed target by target in turn: m2sa_core's
(m2sa_core/geometry/target.py and plane_fit.py at REV) or, before the move to m2sa_core,
m2sa_ros/target_geometry.py at REV.

    .venv/bin/python bench/bench_target_geometry.py
    .venv/bin/python bench/bench_target_geometry.py --scenes 4 --repeats 3 --no-write
    .venv/bin/python bench/bench_target_geometry.py --baseline 3e0a78c --no-write
    .venv/bin/python bench/bench_target_geometry.py --baseline 04e15a0 --no-write
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import os
from pathlib import Path
import statistics
import subprocess
import sys
import tempfile
import time
from types import ModuleType, SimpleNamespace

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.common import command_line, host_line, publish_report, RESULTS, RESULTS_HEADER  # noqa: E402
from m2sa_core.camera import Intrinsics  # noqa: E402
from m2sa_core.data.synthetic.depth import render_depth  # noqa: E402
from m2sa_core.data.synthetic.depth_noise import add_holes, add_noise, bleed_edges  # noqa: E402
from m2sa_core.data.synthetic.scene import render_layout, Scene, SceneObject  # noqa: E402
from m2sa_core.geometry.plane_fit import fit_plane, inverse_depth_noise  # noqa: E402
from m2sa_core.geometry.registered_depth import register_depth  # noqa: E402
from m2sa_core.geometry.target import GeometryParams, target_geometry  # noqa: E402
import numpy as np  # noqa: E402

RESOLUTIONS = ((640, 480), (1280, 720))


def padded_scene(seed: int, width: int, height: int) -> tuple[Scene, int]:
    """Return a synthetic scene rendered at ``height`` x ``height`` and centred in ``width`` columns."""
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
    """
    Return the serialised size of a PointCloud2 of ``n_points`` x, y, z FLOAT32 points.

    With rclpy, else the CDR layout computed: 12 bytes a point plus the empty message's fields.
    """
    try:
        from m2sa_ros.messages.cloud_conversion import points_to_cloud
        from rclpy.serialization import serialize_message
        from std_msgs.msg import Header
    except ImportError:
        return 133 + 12 * n_points  # CDR: header "camera_color_optical_frame", 3 fields, flags
    return len(serialize_message(points_to_cloud(np.zeros((n_points, 3), np.float32),
                                                 Header(frame_id="camera_color_optical_frame"))))


def fit_time(mask: np.ndarray, bound, params: GeometryParams, clock) -> float:
    """
    Time the robust plane fit on the mask's valid pixels, in seconds of ``clock``.

    The band's noise from the mask's second differences, then the fit; the pixels are
    strided as target_geometry strides its core (all of them here, the ring too: an
    upper bound).
    """
    vs, us = np.nonzero(mask)
    z = bound.depth_m[vs, us].astype(np.float64)
    ok = np.isfinite(z) & (z > 0)
    step = max(1, int(ok.sum()) // params.max_fit_points)
    us, vs, z = us[ok][::step], vs[ok][::step], z[ok][::step]
    xy = bound.camera.normalized(us, vs)
    r0, r1, c0, c1 = vs.min(), vs.max() + 1, us.min(), us.max() + 1
    crop = np.where(mask[r0:r1, c0:c1], bound.depth_m[r0:r1, c0:c1], np.nan)
    t0 = clock()
    fit_plane(xy, z, params.band_rule, params.ransac, inverse_depth_noise(crop, params.max_fit_points))
    return clock() - t0


# --- the spill grid ---------------------------------------------------------------------

SPILL_K = Intrinsics(fx=500.0, fy=500.0, cx=319.5, cy=239.5, width=640, height=480)
SPILL_DISTANCE_M = 0.8
SPILL_SIZES = ((160, 10), (60, 60), (200, 40))
SPILL_SLANTS = (0.0, 30.0, 60.0)
SPILL_FRACTIONS = (0.02, 0.05, 0.15)
SPILL_OFFSETS = (-0.15, -0.10, -0.03, 0.03, 0.10, 0.15)
SPILL_PATTERNS = ("scattered", "end", "side")


def spill_cases(seed: int = 0):
    """(shape, normal (3,), mask, spill, depth float32) of every spill case (module doc)."""
    k = SPILL_K
    rays = np.stack([*np.meshgrid((np.arange(k.width) - k.cx) / k.fx, (np.arange(k.height) - k.cy) / k.fy),
                     np.ones((k.height, k.width))], axis=-1)
    rng = np.random.default_rng(seed)
    for width, height in SPILL_SIZES:
        rows = slice(k.height // 2 - height // 2, k.height // 2 - height // 2 + height)
        cols = slice(k.width // 2 - width // 2, k.width // 2 - width // 2 + width)
        mask = np.zeros((k.height, k.width), bool)
        mask[rows, cols] = True
        long_rows = width < height  # the long side runs down the image
        for slant in SPILL_SLANTS:
            for axis in "xy":
                a = np.deg2rad(slant)
                normal = np.array([np.sin(a), 0.0, -np.cos(a)]) if axis == "x" else np.array([0.0, np.sin(a),
                                                                                              -np.cos(a)])
                plane = (normal @ np.array([0.0, 0.0, SPILL_DISTANCE_M])) / (rays @ normal)
                noisy = plane + rng.normal(0.0, 0.001, plane.shape)
                for fraction in SPILL_FRACTIONS:
                    count = int(round(fraction * mask.sum()))
                    for pattern in SPILL_PATTERNS:
                        spill = np.zeros_like(mask)
                        if pattern == "scattered":
                            spill.flat[rng.choice(np.flatnonzero(mask), count, replace=False)] = True
                        elif (pattern == "end") != long_rows:  # a block across the long side's end
                            spill[rows, cols.stop - int(np.ceil(count / height)):cols.stop] = True
                        else:
                            spill[rows.stop - int(np.ceil(count / width)):rows.stop, cols] = True
                        spill &= mask
                        for offset in SPILL_OFFSETS:
                            depth = noisy.copy()
                            depth[spill] += offset
                            yield f"{width}x{height}", normal, mask, spill, plane, depth.astype(np.float32)


def revision_geometry(rev: str) -> ModuleType:
    """
    Load the geometry as it was at git revision ``rev``: a module with target_geometry, GeometryParams, register_depth.

    m2sa_core/geometry/target.py with the plane_fit.py beside it when ``rev`` has them,
    else m2sa_ros/target_geometry.py (the fit before the move to m2sa_core).
    """
    def show(path: str) -> str | None:
        out = subprocess.run(["git", "-C", str(REPO), "show", f"{rev}:{path}"], capture_output=True, text=True)
        return out.stdout if out.returncode == 0 else None

    target, plane_fit = show("m2sa_core/geometry/target.py"), show("m2sa_core/geometry/plane_fit.py")
    if target is None or plane_fit is None:
        source = show("m2sa_ros/target_geometry.py")
        if source is None:
            raise SystemExit(f"--baseline {rev}: neither m2sa_core/geometry/target.py nor m2sa_ros/target_geometry.py")
        modules = {"baseline_target_geometry": source}
    else:
        modules = {"baseline_plane_fit": plane_fit,
                   "baseline_target_geometry": target.replace("from m2sa_core.geometry.plane_fit import",
                                                              "from baseline_plane_fit import")}
    with tempfile.TemporaryDirectory(prefix="baseline_geometry_") as folder:
        for name, text in modules.items():  # plane_fit first: target imports it
            path = Path(folder) / f"{name}.py"
            path.write_text(text)
            spec = importlib.util.spec_from_file_location(name, path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module  # dataclasses look their module up; target finds plane_fit
            spec.loader.exec_module(module)
    if not hasattr(module, "register_depth"):
        module.register_depth = register_depth  # m2sa_core's own, unchanged since the move
    return module


def spill_grid(register, geometry, every_point) -> dict[str, dict[str, float]]:
    """
    Run the spill grid through ``geometry`` and sum it up per shape.

    Per shape: cases, share with a pose, normal error (median, max, deg), deepest box (mm),
    cases whose points hold a spilled pixel, spilled points in all, confident wrong poses.
    """
    rows: dict[str, list[tuple[float, float, float, float]]] = {}
    for shape, normal, mask, spill, plane, depth in spill_cases():
        g = geometry(mask, register(depth, SPILL_K, mask.shape), every_point)
        if not g.has_pose:
            rows.setdefault(shape, []).append((0.0, np.nan, np.nan, 0.0))
            continue
        p = np.asarray(g.points, np.float64)
        rays = p / p[:, 2:3]
        off = p[:, 2] - (normal @ np.array([0.0, 0.0, SPILL_DISTANCE_M])) / (rays @ normal)
        error = float(np.degrees(np.arccos(np.clip(abs(g.normal @ normal), -1.0, 1.0))))
        rows.setdefault(shape, []).append((1.0, error, float(g.extents[2]) * 1e3, float((np.abs(off) > 0.015).sum())))
    out = {}
    for shape, r in rows.items():
        a = np.array(r)
        posed = a[a[:, 0] > 0]
        out[shape] = {"cases": len(a), "pose": float(a[:, 0].mean()),
                      "normal_median": float(np.median(posed[:, 1])), "normal_max": float(posed[:, 1].max()),
                      "depth_mm_max": float(posed[:, 2].max()), "cases_with_spill": int((posed[:, 3] > 0).sum()),
                      "spilled_points": int(posed[:, 3].sum()), "wrong_poses": int((posed[:, 1] > 10.0).sum())}
    return out


# --- the band grid ----------------------------------------------------------------------

BAND_K = Intrinsics(fx=385.0, fy=385.0, cx=319.5, cy=239.5, width=640, height=480)
BAND_DISTANCES = (0.5, 1.0, 1.5, 2.0, 2.5)
BAND_NOISE = {  # depth noise sigma (m) at depth z (m): RealSense's z^2 * subpixel / (focal_px * baseline)
    "exact": lambda z: np.zeros_like(z),
    "quiet": lambda z: np.full_like(z, 0.001),
    "D455-like": lambda z: 0.08 / (430.0 * 0.095) * np.square(z),
    "D435-like": lambda z: 0.08 / (385.0 * 0.050) * np.square(z),
}
BAND_SIDES = {"behind": 1.0, "in front": -1.0}


def band_case(distance: float, side: float, noise: str, seed: int, near: float = 0.03, far: float = 0.07,
              width: int = 120, height: int = 90) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """
    (mask, spill, depth float32, normal (3,)): the band grid's target and its 10 px strip of the other surface.

    The strip is ``near`` metres off the target at its left end, ``far`` at its right,
    ``side`` +1 behind and -1 in front (tests/core/test_plane_band.py draws the same).
    """
    k = BAND_K
    rays = np.stack([*np.meshgrid((np.arange(k.width) - k.cx) / k.fx, (np.arange(k.height) - k.cy) / k.fy),
                     np.ones((k.height, k.width))], axis=-1)
    a = np.deg2rad(20.0)
    normal = np.array([np.sin(a), 0.0, -np.cos(a)])
    target = (normal @ np.array([0.0, 0.0, distance])) / (rays @ normal)
    rows = slice(k.height // 2 - height // 2, k.height // 2 - height // 2 + height)
    cols = slice(k.width // 2 - width // 2, k.width // 2 - width // 2 + width)
    mask = np.zeros((k.height, k.width), bool)
    mask[rows, cols] = True
    spill = np.zeros_like(mask)
    spill[rows.stop - 10:rows.stop, cols] = True
    along = np.clip((np.arange(k.width) - cols.start) / (width - 1), 0.0, 1.0)
    depth = np.where(spill, target + side * (near + (far - near) * along)[None, :], target)
    noisy = depth + np.random.default_rng(seed).normal(0.0, 1.0, depth.shape) * BAND_NOISE[noise](depth)
    return mask, spill, noisy.astype(np.float32), normal


def band_cases():
    """(noise, side, distance, mask, spill, depth, normal) of every band case, then the issue's laptop."""
    for noise in BAND_NOISE:
        for distance in BAND_DISTANCES:
            for side, sign in BAND_SIDES.items():
                yield (noise, side, distance, *band_case(distance, sign, noise, seed=int(distance * 10)))
    yield ("exact", "laptop", 2.13, *band_case(2.13, 1.0, "exact", 0, near=0.038, far=0.069, width=240, height=60))


def _kept(points: np.ndarray) -> np.ndarray:
    """(H, W) bool: the band camera's pixels whose points (voxel 0: one a pixel) a geometry kept."""
    p = np.asarray(points, np.float64)
    k = BAND_K
    out = np.zeros((k.height, k.width), bool)
    us, vs = np.rint(p[:, 0] / p[:, 2] * k.fx + k.cx), np.rint(p[:, 1] / p[:, 2] * k.fy + k.cy)
    out[vs.astype(int), us.astype(int)] = True
    return out


def band_grid(fits: list[tuple[str, object, object]], repeats: int) -> dict:
    """
    Run the band grid through each ``(name, module, every-point params)`` and time each fit.

    Per noise and distance (both sides together) and fit: the other surface's pixels let
    in, the worst share of the target's own pixels kept, the worst normal error (deg), the
    mean inlier fraction; and per fit the CPU ms of each 10k-pixel target at the default
    voxel (median of ``repeats`` calls, the fits timed in turn).
    """
    rows: dict[tuple[str, float], dict[str, list]] = {}
    ms: dict[str, list[float]] = {name: [] for name, _, _ in fits}
    for noise, side, distance, mask, spill, depth, normal in band_cases():
        own = mask & ~spill
        key = ("laptop", distance) if side == "laptop" else (noise, distance)
        row = rows.setdefault(key, {"truth": [float(own.sum() / mask.sum())], "spill": []})
        row["spill"].append(int(spill.sum()))
        times: dict[str, list[float]] = {name: [] for name, _, _ in fits}
        for name, module, every in fits:
            bound = module.register_depth(depth, BAND_K, mask.shape)
            g = module.target_geometry(mask, bound, every)
            kept = _kept(g.points)
            error = float(np.degrees(np.arccos(np.clip(abs(g.normal @ normal), -1.0, 1.0))))
            row.setdefault(name, []).append((int((kept & spill).sum()), float((kept & own).sum() / own.sum()), error,
                                             float(getattr(g, "inlier_fraction", np.nan)), float(g.extents[2])))
        if side != "laptop":
            for _ in range(repeats):  # the default voxel, as the node measures: interleaved, so load hits all alike
                for name, module, _ in fits:
                    bound = module.register_depth(depth, BAND_K, mask.shape)
                    c0 = time.thread_time()
                    module.target_geometry(mask, bound, module.GeometryParams())
                    times[name].append(time.thread_time() - c0)
            for name in times:
                ms[name].append(statistics.median(times[name]) * 1e3)
    out: dict = {"rows": [], "cost_ms": {name: float(np.median(v)) for name, v in ms.items()},
                 "pixels": int(band_case(1.0, 1.0, "exact", 0)[0].sum())}
    for (noise, distance), row in rows.items():
        entry = {"noise": noise, "distance": distance, "spill": sum(row["spill"]), "truth": row["truth"][0]}
        for name, _, _ in fits:
            a = np.array(row[name])
            entry[name] = {"let_in": int(a[:, 0].sum()), "kept_min": float(a[:, 1].min()),
                           "normal_max": float(a[:, 2].max()), "inlier_fraction": float(a[:, 3].mean()),
                           "depth_mm_max": float(a[:, 4].max() * 1e3)}
        out["rows"].append(entry)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--scenes", type=int, default=12, help="seeded scenes per resolution")
    parser.add_argument("--repeats", type=int, default=5, help="timed calls per target (the median counts)")
    parser.add_argument("--voxel", type=float, default=GeometryParams().voxel_m, help="default voxel (m)")
    parser.add_argument("--baseline", default=None, metavar="REV",
                        help="also run everything through the geometry at this git revision (module doc)")
    parser.add_argument("--no-spill", action="store_true", help="time only; skip the spill grid")
    parser.add_argument("--no-band", action="store_true", help="skip the band grid and the 10k-pixel cost")
    parser.add_argument("--no-write", action="store_true", help="print only; do not append to bench/RESULTS.md")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    load = os.getloadavg()
    old = revision_geometry(args.baseline) if args.baseline else None
    report: dict = {"scenes": args.scenes, "repeats": args.repeats, "voxel_m": args.voxel, "rows": [],
                    "load_start": load[0]}
    rows = []
    every = GeometryParams(voxel_m=0.0)
    default = GeometryParams(voxel_m=args.voxel)
    for width, height in RESOLUTIONS:
        per_level: dict[str, dict[str, list[float]]] = {
            lvl: {"ms": [], "cpu_ms": [], "fit_share": [], "baseline_ratio": [], "pixels": [], "n0": [], "nv": [],
                  "centroid_mm": [], "normal_deg": []}
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
                times, cpu, fit, before = [], [], [], []
                for _ in range(args.repeats):
                    t0, c0 = time.perf_counter(), time.thread_time()
                    g = target_geometry(mask, bound, default)
                    times.append((time.perf_counter() - t0) * 1e3)
                    cpu.append((time.thread_time() - c0) * 1e3)
                    fit.append(fit_time(mask, bound, default, time.thread_time) * 1e3)
                    if old is not None:  # the same target through the revision's fit, interleaved
                        old_bound = old.register_depth(depth, k, (height, width))
                        c0 = time.thread_time()
                        old.target_geometry(mask, old_bound, old.GeometryParams(voxel_m=args.voxel))
                        before.append((time.thread_time() - c0) * 1e3)
                d = per_level["part" if part else "object"]
                if before:
                    d["baseline_ratio"].append(statistics.median(cpu) / max(statistics.median(before), 1e-9))
                d["ms"].append(statistics.median(times))
                d["cpu_ms"].append(statistics.median(cpu))
                d["fit_share"].append(statistics.median(fit) / max(statistics.median(cpu), 1e-9))
                d["pixels"].append(float(mask.sum()))
                d["nv"].append(float(len(g.points)))
                d["n0"].append(float(len(target_geometry(mask, bound, every).points)))
                if g.has_pose:
                    d["centroid_mm"].append(float(np.linalg.norm(g.centroid - truth.centroid) * 1e3))
                    d["normal_deg"].append(float(np.degrees(np.arccos(np.clip(g.normal @ truth.normal, -1, 1)))))
        for level, d in per_level.items():
            ms, cpu_ms = np.array(d["ms"]), np.array(d["cpu_ms"])
            n0, nv = float(np.median(d["n0"])), float(np.median(d["nv"]))
            row = {"resolution": f"{width}x{height}", "level": level, "targets": len(ms),
                   "pixels_median": float(np.median(d["pixels"])), "ms_median": float(np.median(ms)),
                   "ms_p95": float(np.percentile(ms, 95)), "ms_max": float(ms.max()),
                   "cpu_ms_median": float(np.median(cpu_ms)), "cpu_ms_p95": float(np.percentile(cpu_ms, 95)),
                   "cpu_ms_max": float(cpu_ms.max()), "fit_share_median": float(np.median(d["fit_share"])),
                   "baseline_ratio_median": float(np.median(d["baseline_ratio"])) if d["baseline_ratio"] else None,
                   "points_voxel0": n0, "points_voxel": nv, "bytes_voxel0": cloud_bytes(int(n0)),
                   "bytes_voxel": cloud_bytes(int(nv)), "bytes_empty": cloud_bytes(0),
                   "centroid_mm_median": float(np.median(d["centroid_mm"])),
                   "normal_deg_median": float(np.median(d["normal_deg"]))}
            report["rows"].append(row)
            rows.append(f"| {row['resolution']} | {level} | {row['targets']} | {row['pixels_median']:.0f} | "
                        f"{row['ms_median']:.2f} / {row['ms_p95']:.2f} / {row['ms_max']:.2f} | "
                        f"{row['cpu_ms_median']:.2f} / {row['cpu_ms_p95']:.2f} / {row['cpu_ms_max']:.2f} | "
                        f"{row['fit_share_median']:.0%} | "
                        + (f"{row['baseline_ratio_median']:.2f} | " if old is not None else "")
                        + f"{n0:.0f} / {row['bytes_voxel0']} | {nv:.0f} / {row['bytes_voxel']} | "
                        f"{row['bytes_empty']} | {row['centroid_mm_median']:.1f} | {row['normal_deg_median']:.1f} |")
    report["load_end"] = os.getloadavg()[0]
    spill_lines: list[str] = []
    if not args.no_spill:
        grids = [("now", spill_grid(register_depth, target_geometry, every))]
        if old is not None:
            baseline = spill_grid(old.register_depth, old.target_geometry, old.GeometryParams(voxel_m=0.0))
            grids.append((f"at {args.baseline}", baseline))
        report["spill"] = dict(grids)
        spill_lines = [
            "",
            "Spill grid (module doc; voxel 0, so every point is a pixel): per shape, "
            f"{len(SPILL_SLANTS) * 2 * len(SPILL_FRACTIONS) * len(SPILL_PATTERNS) * len(SPILL_OFFSETS)} cases "
            f"({len(SPILL_SLANTS)} slants x 2 axes x {len(SPILL_FRACTIONS)} shares x {len(SPILL_PATTERNS)} patterns "
            f"x {len(SPILL_OFFSETS)} offsets)",
            "",
            "| fit | shape | with pose | normal err median / max deg | box depth max mm | cases with a spilled "
            "point | spilled points | poses > 10 deg off |",
            "|---|---|---:|---:|---:|---:|---:|---:|",
            *[f"| {name} | {shape} | {s['pose']:.0%} | {s['normal_median']:.2f} / {s['normal_max']:.2f} | "
              f"{s['depth_mm_max']:.1f} | {s['cases_with_spill']} | {s['spilled_points']} | {s['wrong_poses']} |"
              for name, grid in grids for shape, s in grid.items()],
        ]
    band_lines: list[str] = []
    if not args.no_band:
        now = SimpleNamespace(register_depth=register_depth, target_geometry=target_geometry,
                              GeometryParams=GeometryParams)
        fits = [("now", now, every)]
        if old is not None:
            fits.append((f"at {args.baseline}", old, old.GeometryParams(voxel_m=0.0)))
        band = band_grid(fits, args.repeats)
        report["band"] = band
        names = [name for name, _, _ in fits]
        both = " / ".join(names)
        cost = band["cost_ms"]
        band_lines = [
            "",
            f"Band grid (module doc; voxel 0): a {band['pixels']}-pixel target with a 10 px strip of a surface 3-7 cm "
            "behind and, in a second case, in front; per row both cases together (the laptop: one). Each cell is "
            f"{both}.",
            "",
            "| depth | distance m | other surface's pixels let in | own pixels kept, worst | normal err max deg | "
            "box depth max mm | inlier fraction (true share) |",
            "|---|---:|---:|---:|---:|---:|---:|",
            *[f"| {r['noise']} | {r['distance']} | "
              + " / ".join(f"{r[n]['let_in']}" for n in names) + f" of {r['spill']} | "
              + " / ".join(f"{r[n]['kept_min']:.2%}" for n in names) + " | "
              + " / ".join(f"{r[n]['normal_max']:.2f}" for n in names) + " | "
              + " / ".join(f"{r[n]['depth_mm_max']:.0f}" for n in names) + " | "
              + " / ".join(f"{r[n]['inlier_fraction']:.3f}" for n in names) + f" ({r['truth']:.3f}) |"
              for r in band["rows"]],
            "",
            f"- cost of a {band['pixels']}-pixel target (`target_geometry`, default voxel, the thread's CPU ms, median "
            f"over the {len(band['rows']) * 2 - 2} grid targets of the median of {args.repeats} calls): "
            + ", ".join(f"{n} {cost[n]:.2f}" for n in names)
            + (f"; now - before {cost['now'] - cost[names[1]]:+.2f} ms, now / before {cost['now'] / cost[names[1]]:.2f}"
               if len(names) > 1 else ""),
        ]
    text = "\n".join([
        "## bench_target_geometry: a target's points, box and normal from its mask and registered depth, on cpu",
        "",
        f"- date: {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC; machine: {host_line()}; load average "
        f"{report['load_start']:.1f} at the start, {report['load_end']:.1f} after the timing",
        f"- command: `{command_line(argv, 'bench_target_geometry.py')}`",
        f"- {args.scenes} synthetic scenes per resolution (rendered at the height, padded to the width), depth "
        "with 20 % holes, 3 mm noise and mixed pixels in a 2-px ring at the mask's border; time = median of "
        f"{args.repeats} calls of `target_geometry` per target (full-frame mask in, points out), single thread: "
        "wall ms and the thread's CPU ms (median / p95 / max over targets); fit = the robust plane fit's share "
        "of the CPU time (fitted on all the mask's valid pixels: an upper bound)"
        + (f"; cpu / at {args.baseline} = the median over targets of the CPU time over that of the same "
           f"target through the geometry at {args.baseline}, timed in turn" if old is not None else ""),
        f"- cloud = points (median per target) / serialised PointCloud2 bytes, every valid pixel (voxel 0) and at "
        f"the default voxel ({args.voxel * 1000:.0f} mm); empty = the message with `target_points` off; errors "
        "against the synthetic ground truth (tests/core/test_target_geometry.py has the bounds)",
        "",
        "| image | target | targets | mask px (median) | wall ms | cpu ms | fit | "
        + (f"cpu / at {args.baseline} | " if old is not None else "") + "cloud voxel 0 | "
        f"cloud voxel {args.voxel * 1000:.0f} mm | empty bytes | centroid err mm | normal err deg |",
        "|---|---|---:|---:|---:|---:|---:|" + ("---:|" if old is not None else "") + "---:|---:|---:|---:|---:|",
        *rows,
        *spill_lines,
        *band_lines,
        "",
    ])
    publish_report(text, report, RESULTS, not args.no_write, args.json, header=RESULTS_HEADER)
    return 0


if __name__ == "__main__":
    sys.exit(main())
