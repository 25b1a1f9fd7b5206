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
``m2sa-bag``: write a bag from a dataset file or of rendered tracking sequences; summarise one.

Usage::

    m2sa-bag make --data MMR_test_mixed.json --image-root images --out demo_bag --storage mcap
    m2sa-bag make --data MMR_test_mixed.json --out demo_bag --depth-encoding 16UC1 --depth-artefacts strong
    m2sa-bag make --sequences 10 --frames 6 --motion mixed --seed 4242 --out track_bag   # docs/TRACKING.md
    m2sa-bag info demo_bag

What a bag holds: ``m2sa_ros.bag.bag_io`` (the messages) and ``m2sa_ros.bag.ground_truth``
(the sidecars).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
import sys

from m2sa_core.cli_errors import cli_entry
from m2sa_ros.bag.bag_io import bag_info, DEFAULT_FRAME_ID, make_bag, STORAGES
from m2sa_ros.bag.depth_recording import ARTEFACT_LEVELS, DEFAULT_ARTEFACTS, DEPTH_ENCODINGS, DepthOptions
from m2sa_ros.bag.ground_truth import BagError, ground_truth_path
from m2sa_ros.bag.sequences import make_sequence_bag


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="m2sa-bag", description="Rosbag2 tools of m2sa_ros.")
    sub = parser.add_subparsers(dest="cmd", required=True)
    make = sub.add_parser("make", help="write a bag of images, commands and ground truth from a dataset file, "
                          "or of rendered tracking sequences (--sequences)")
    make.add_argument("--data", action="append",
                      help="dataset JSON (MMR, R2SM or AmodalReasonSeg layout); repeat for several files")
    seq = make.add_argument_group("tracking sequences (instead of --data; docs/TRACKING.md)")
    seq.add_argument("--sequences", type=int, default=None,
                     help="render N synthetic camera sequences, one command each, ground truth on every frame")
    seq.add_argument("--frames", type=int, default=None, help="frames per sequence (default 6)")
    seq.add_argument("--motion", default=None, help="pan, zoom, nudge, occluder or mixed (default mixed)")
    seq.add_argument("--seed", type=int, default=None, help="sequence seed (default 4242, as m2sa-eval)")
    seq.add_argument("--size", type=int, default=None, help="image side in pixels (default 256)")
    make.add_argument("--image-root", default=None, help="image directory (default: images/ beside the JSON)")
    make.add_argument("--out", required=True, help="output bag directory (must not exist)")
    make.add_argument("--storage", choices=STORAGES, default="mcap", help="rosbag2 storage (default mcap)")
    make.add_argument("--rate", type=float, default=None,
                      help="frames per second of the recording (default 1; 5 for --sequences)")
    make.add_argument("--limit", type=int, default=None, help="keep only the first N commands")
    make.add_argument("--frame-id", default=DEFAULT_FRAME_ID, help="header frame_id of the images")
    depth = make.add_argument_group("depth (synthetic data; docs/BAG_REPLAY.md)")
    depth.add_argument("--no-depth", action="store_true",
                       help="images and commands only: no registered depth, camera_info or 3-D ground truth")
    depth.add_argument("--depth-encoding", choices=DEPTH_ENCODINGS, default="32FC1",
                       help="32FC1 metres (default) or 16UC1 millimetres")
    depth.add_argument("--compressed-depth", choices=("png", "rvl"), default="",
                       help="record the depth as image_transport's compressedDepth with this codec (a "
                       "CompressedImage on <depth topic>/compressedDepth, as robots record depth); default: raw")
    depth.add_argument("--depth-artefacts", choices=tuple(ARTEFACT_LEVELS), default=DEFAULT_ARTEFACTS,
                       help=f"sensor artefacts on the recorded depth (default {DEFAULT_ARTEFACTS}: 2%% holes, "
                       "1 mm + 0.1%% of range noise, 1-px mixed edges; the ground truth stays clean)")
    make.add_argument("--quiet", action="store_true", help="no progress bar")
    info = sub.add_parser("info", help="summarise a bag (topics, counts, ground truth)")
    info.add_argument("bag")
    return parser


def _make_sequences(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Path:
    """``m2sa-bag make --sequences N ...``: a tracking bag (m2sa_ros.bag.sequences)."""
    if args.data or args.image_root or args.limit is not None:
        parser.error("--sequences renders its own frames: --data, --image-root and --limit do not apply")
    return make_sequence_bag(args.out, args.sequences, n_frames=6 if args.frames is None else args.frames,
                             motion=args.motion or "mixed", seed=4242 if args.seed is None else args.seed,
                             size=256 if args.size is None else args.size, storage=args.storage,
                             rate_hz=5.0 if args.rate is None else args.rate, frame_id=args.frame_id,
                             progress=not args.quiet, depth=_depth_options(args))


def _depth_options(args: argparse.Namespace) -> DepthOptions | None:
    if args.no_depth and args.compressed_depth:
        raise ValueError("--compressed-depth says how to record the depth; it does not go with --no-depth")
    return None if args.no_depth else DepthOptions(args.depth_encoding, args.depth_artefacts, args.compressed_depth)


def _depth_note(out: Path, summary: dict) -> str:
    geometry = summary.get("geometry_ground_truth")
    if not geometry:
        return "; no depth"
    codec = f", compressedDepth {geometry['compressed_depth']}" if "compressed_depth" in geometry else ""
    return (f"; depth ({geometry['encoding']}{codec}, artefacts {geometry['artefacts']}) on {geometry['frames']} "
            f"frames, 3-D truth in {out / 'geometry_ground_truth.json'}")


@cli_entry("m2sa-bag")
def main(argv: list[str] | None = None) -> int:
    """``m2sa-bag make ...`` / ``m2sa-bag info BAG``."""
    from m2sa_core.data.records import DataError

    parser = _parser()
    args = parser.parse_args(argv)
    try:
        if args.cmd == "make" and args.sequences is not None:
            out = _make_sequences(parser, args)
            summary = bag_info(out)
            track = summary["tracking_ground_truth"]
            print(f"{out}: {summary['storage']}, {track['sequences']} sequences of {track['frames_per_sequence']} "
                  f"frames ({track['motion']}), {summary['duration_s']:.1f} s; ground truth in "
                  f"{ground_truth_path(out)} and {out / 'tracking_ground_truth.json'}{_depth_note(out, summary)}")
        elif args.cmd == "make":
            sequence_only = [f"--{n}" for n in ("frames", "motion", "seed", "size") if getattr(args, n) is not None]
            if not args.data:
                parser.error("make needs --data FILE (a dataset) or --sequences N (rendered tracking sequences)")
            if sequence_only:
                parser.error(f"{', '.join(sequence_only)} only apply with --sequences")
            if args.limit is not None and args.limit < 1:
                parser.error(f"--limit must be >= 1, got {args.limit}")
            out = make_bag(args.data, args.out, args.image_root, args.storage,
                           1.0 if args.rate is None else args.rate, args.limit, args.frame_id,
                           progress=not args.quiet, depth=_depth_options(args))
            summary = bag_info(out)
            gt = summary["ground_truth"]
            print(f"{out}: {summary['storage']}, {gt['frames']} frames, {gt['commands']} commands "
                  f"({', '.join(f'{k} {v}' for k, v in sorted(gt['splits'].items()))}), "
                  + (f"{gt['absent_commands']} about something not in view, " if gt["absent_commands"] else "")
                  + f"{summary['duration_s']:.1f} s; ground truth in {ground_truth_path(out)}"
                  + _depth_note(out, summary))
        else:
            print(json.dumps(bag_info(args.bag), indent=2))
    except (BagError, DataError, ValueError) as exc:
        print(f"m2sa-bag: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
