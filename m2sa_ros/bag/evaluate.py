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
Score the live perception node on a rosbag: ``m2sa-bag-eval``.

What a robotics team runs on its own recordings (docs/BAG_REPLAY.md):

1. start the node as a subprocess under a private namespace, on simulated time
   (``use_sim_time``), or use one already running (``--no-start --namespace /robot1``);
2. replay the bag's images and commands over DDS with the recorded timing (scaled by
   ``--rate-factor``), publishing ``/clock`` from the bag's time so that the node's
   clock, its image-age check (``max_image_age``) and every stamp are bag time, and
   recording every SegmentationResult into an output bag stamped in bag time;
3. score the results against the bag's ground truth with the generative protocol
   (Hungarian matching, gIoU, cIoU, target-count accuracy, per split), with latency
   percentiles and the number of commands that got no result (must be 0); with
   commands about something not in view in the ground truth (``missing``), the share
   of them the node rejected (outcome ABSENT) and of present commands it wrongly
   rejected, per split, the masks scored on present commands only
   (``m2sa_ros.bag.absence_scoring``); with depth
   in the bag, the depth and camera_info are replayed too and the matched targets' 3-D
   errors (centroid, box centre, normal, size, share with a pose) are scored per split
   against ``geometry_ground_truth.json`` (``m2sa_ros.bag.geometry_scoring``);
4. write DIR/report.md, DIR/report.json and DIR/overlays/ (one PNG per command and a
   contact sheet).

Replay and the node's keep-latest image: the node answers a topic command on the
newest frame it holds *when the worker starts the command*. Replaying open loop on a
slow model would therefore answer queued commands on later frames. So the replayer
keeps the recorded spacing of messages but never publishes a new frame while commands
about the previous one are still unanswered (the schedule shifts by the wait), and
leaves ``--settle`` seconds between a frame and the next command so the frame is in
the node before its command. Each result's header stamp is checked against the frame
the command was about; a mismatch is reported, not scored silently.

Commands go out on the node's typed ``command_stamped`` topic with a request id of
their own (``bag-<index>``) and the bag time as their stamp; results are matched to
commands by that id, never by text.

A bag with ``tracking_ground_truth.json`` (``m2sa-bag make --sequences``) is scored
through the node's ``track`` action instead, one goal per sequence and gIoU per frame
(``m2sa_ros.bag.tracking``; ``--protocol`` chooses explicitly).

Usage::

    m2sa-bag-eval --bag demo_bag --out runs/eval
    m2sa-bag-eval --bag track_bag --out runs/track_eval --model-path models/m2sa-tiny-synth
    m2sa-bag-eval --bag demo_bag --out runs/eval --node-args "-p model_path:=models/m2sa-tiny-synth"
    m2sa-bag-eval --bag robot.mcap_dir --out runs/eval --no-start --namespace /robot1
"""


from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
import json
import os
from pathlib import Path
import shlex
import sys
from typing import Any, TypeVar

from m2sa_core.cli_errors import cli_entry
from m2sa_ros.bag.absence_scoring import score_absence
from m2sa_ros.bag.bag_io import bag_info
from m2sa_ros.bag.geometry_report import geometry_report
from m2sa_ros.bag.geometry_scoring import GeometryScores, score_geometry
from m2sa_ros.bag.geometry_truth import CAMERA_INFO_TOPIC, DEPTH_TOPIC, GeometryGroundTruth, load_geometry_ground_truth
from m2sa_ros.bag.ground_truth import (
    BagError,
    COMMAND_TOPIC,
    IMAGE_TOPIC,
    load_ground_truth,
    load_tracking_ground_truth,
    tracking_ground_truth_path,
)
from m2sa_ros.bag.node_subprocess import Interrupted, stop_on_signals
from m2sa_ros.bag.replay import bag_start_ns, check_bag, NodeProcess, Outcome, Replayer, ReplayOptions
from m2sa_ros.bag.report import build_report, json_default, render_markdown, summary_text, write_overlays
from m2sa_ros.bag.scoring import Prediction, prediction_from_msg, score_predictions, Scores

R = TypeVar("R", bound=Replayer)
PROTOCOLS = ("auto", "commands", "tracking")
REPLAY_DEPTH_WAIT_S = 5.0  # the node's depth_wait during a replay: see _depth_node_args


# --------------------------------------------------------------------------- a session
def _namespace(namespace: str | None) -> str:
    """Return the node's namespace: the given one (made absolute) or a private one for this run."""
    namespace = namespace or f"/m2sa_bag_eval_{os.getpid()}"
    return namespace if namespace.startswith("/") else "/" + namespace


@contextmanager
def _live_node(bag: Path, node: NodeProcess | None, make_replayer: Callable[[Any], R]) -> Iterator[R]:
    """
    Start the node (unless one runs already) and a replayer; stop both whatever happens.

    The replayer has its own DDS context and runs on the bag's clock; the block starts once
    the node is there.
    """
    import rclpy

    context = rclpy.Context()
    rclpy.init(context=context, args=[])
    replayer = None
    try:
        if node is not None:
            node.start()
        replayer = make_replayer(context)
        replayer.start_clock(bag_start_ns(bag))
        replayer.start()
        replayer.wait_for_node(node)
        yield replayer
    finally:
        try:
            if replayer is not None:
                replayer.close()
        finally:  # the node goes even when a stop signal cut the replayer's close short
            if node is not None:
                node.stop()
            rclpy.try_shutdown(context=context)


def _results_bag(out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    results_bag = out_dir / "results_bag"
    if results_bag.exists():
        raise BagError(f"{results_bag} already exists: pick a new --out directory or remove it")
    return results_bag


# --------------------------------------------------------------------------- evaluation
@dataclass
class Evaluation:
    report: dict[str, Any]
    outcomes: list[Outcome]
    predictions: dict[int, Prediction | None]
    scores: Scores | None
    geometry: GeometryScores | None = None  # the 3-D errors, when the bag has depth ground truth


def evaluate_bag(bag: str | Path, out_dir: str | Path, *, node_args: Sequence[str] = (), start_node: bool = True,
                 namespace: str | None = None, rate_factor: float = 1.0, settle_s: float = 0.1,
                 max_in_flight: int = 4, result_timeout_s: float = 300.0, startup_timeout_s: float = 300.0,
                 ground_truth: str | Path | None = None, progress: bool = True, overlays: bool = True,
                 geometry_ground_truth: str | Path | None = None) -> Evaluation:
    """
    Replay ``bag`` through a perception node, record, score and write the reports into ``out_dir``.

    With depth in the bag, its depth and camera_info go to the node too, and with a
    geometry sidecar (``geometry_ground_truth``, default BAG/geometry_ground_truth.json)
    the targets' 3-D errors are scored (``m2sa_ros.bag.geometry_scoring``).
    """
    bag, out_dir = Path(bag), Path(out_dir)
    if not (bag / "metadata.yaml").is_file():
        raise BagError(f"{bag} is not a rosbag2 directory (no metadata.yaml)")
    if not rate_factor > 0:
        raise BagError(f"--rate-factor must be > 0, got {rate_factor}")
    if max_in_flight < 1:
        raise BagError(f"--max-in-flight must be >= 1, got {max_in_flight}")
    truth = load_ground_truth(bag, ground_truth)
    image_topic = truth.image_topic if truth else IMAGE_TOPIC
    command_topic = truth.command_topic if truth else COMMAND_TOPIC
    check_bag(bag, truth, image_topic, command_topic)  # before paying for a node start-up
    geometry, geometry_note = _geometry_truth(bag, geometry_ground_truth)
    depth_topics = _depth_topics(bag, geometry)
    compressed = _compressed_depth(bag, depth_topics)
    results_bag = _results_bag(out_dir)
    namespace = _namespace(namespace)
    options = ReplayOptions(namespace, rate_factor, settle_s, max_in_flight, result_timeout_s, startup_timeout_s)
    node = NodeProcess(namespace, _depth_node_args(node_args, compressed), out_dir / "node.log") if start_node \
        else None

    def make_replayer(context: Any) -> Replayer:
        replayer = Replayer(options, context, results_bag)
        replayer.expect_depth = depth_topics is not None
        replayer.compressed_depth = compressed
        return replayer

    with _live_node(bag, node, make_replayer) as replayer:
        outcomes = replayer.replay(bag, truth, image_topic, command_topic, node, progress, depth_topics)
        foreign = replayer.foreign_results
        bad_depth = dict(replayer.bad_depth)
    predictions: dict[int, Prediction | None] = {}
    for o in outcomes:
        predictions[o.index] = None
        if o.result is not None:
            try:
                predictions[o.index] = prediction_from_msg(o.result)
            except ValueError as exc:  # e.g. a mask that is not mono8: scored as no masks, and said
                o.problems.append(f"unreadable result: {exc}")
    scores, absence = None, None
    if truth is not None:
        left_out = [o.index for o in outcomes if not o.image_in_bag]
        scores = score_predictions(truth, predictions, exclude=left_out)
        if any(c.absent for c in truth.commands):
            absence = score_absence(truth, predictions, exclude=left_out)
    settings = {"rate_factor": rate_factor, "namespace": namespace, "node_started": start_node,
                "node_command": node.command if node is not None else None, "settle_s": settle_s,
                "max_in_flight": max_in_flight, "result_timeout_s": result_timeout_s,
                "results_bag": str(results_bag)}
    geometry_scores = None
    if truth is not None and scores is not None and geometry is not None:
        left_out = [o.index for o in outcomes if not o.image_in_bag or o.expected_stamp_ns in bad_depth]
        geometry_scores = score_geometry(geometry, truth, predictions, scores, exclude=left_out)
    elif geometry_note is None:
        geometry_note = ("no 3-D ground truth (the bag has no geometry_ground_truth.json: recorded without "
                         "depth, or not from synthetic data)")
    report = build_report(bag, truth, outcomes, scores, settings, foreign, absence)
    report["geometry"] = geometry_report(geometry, geometry_scores, geometry_note, bad_depth)
    written = write_overlays(out_dir, bag, truth, outcomes, predictions, scores, image_topic) if overlays else []
    (out_dir / "report.json").write_text(json.dumps(report, indent=1, default=json_default), encoding="utf-8")
    (out_dir / "report.md").write_text(render_markdown(report, written), encoding="utf-8")
    return Evaluation(report, outcomes, predictions, scores, geometry_scores)


def _geometry_truth(bag: Path, override: str | Path | None) -> tuple[GeometryGroundTruth | None, str | None]:
    """
    Return the bag's 3-D ground truth, or (None, why) when it has none or it cannot be read.

    A broken geometry sidecar costs the 3-D scores (said in one line), never the
    masks'.
    """
    try:
        return load_geometry_ground_truth(bag, override), None
    except BagError as exc:
        print(f"m2sa-bag-eval: warning: {exc}; the 3-D errors are not scored", file=sys.stderr)
        return None, f"3-D errors not scored: {exc}"


def _depth_topics(bag: Path, geometry: GeometryGroundTruth | None) -> tuple[str, str] | None:
    """(depth, camera_info) topics to replay when the bag has both, else None."""
    topics = bag_info(bag)["topics"]
    depth = geometry.depth_topic if geometry else DEPTH_TOPIC
    info = geometry.camera_info_topic if geometry else CAMERA_INFO_TOPIC
    return (depth, info) if depth in topics and info in topics else None


def _compressed_depth(bag: Path, depth_topics: tuple[str, str] | None) -> bool:
    """Whether the bag's depth is image_transport's compressedDepth (a CompressedImage topic)."""
    if depth_topics is None:
        return False
    return bag_info(bag)["topics"][depth_topics[0]]["type"] == "sensor_msgs/msg/CompressedImage"


def _depth_node_args(node_args: Sequence[str], compressed: bool) -> list[str]:
    """
    Return the node's arguments.

    With a compressedDepth bag it listens on depth/compressedDepth (a node you start yourself,
    --no-start, needs ``-p use_compressed_depth:=true`` too). A replayed frame's depth always
    comes, so a command waits for it up to 5 s (``depth_wait``) instead of answering
    without 3-D when it is late on a loaded machine; the given arguments come after, so
    they can set it otherwise.
    """
    return ["-p", f"depth_wait:={REPLAY_DEPTH_WAIT_S}", *node_args,
            *(("-p", "use_compressed_depth:=true") if compressed else ())]


@dataclass
class TrackingEvaluation:
    report: dict[str, Any]
    outcomes: list[Any]  # m2sa_ros.bag.tracking.TrackOutcome, one per sequence
    scores: Any  # m2sa_ros.bag.tracking_report.TrackingScores


def evaluate_tracking_bag(bag: str | Path, out_dir: str | Path, *, node_args: Sequence[str] = (),
                          start_node: bool = True, namespace: str | None = None, rate_factor: float = 1.0,
                          settle_s: float = 0.1, result_timeout_s: float = 300.0, startup_timeout_s: float = 300.0,
                          ground_truth: str | Path | None = None, use_previous_mask: bool = False,
                          min_score: float = 0.0, lost_frames: int = 0, progress: bool = True,
                          overlays: bool = True,
                          geometry_ground_truth: str | Path | None = None) -> TrackingEvaluation:
    """
    Replay a tracking bag through the node's ``track`` action, score per frame, write the reports.

    One goal per sequence (docs/TRACKING.md, m2sa_ros.bag.tracking); ``ground_truth`` is
    the tracking sidecar (default BAG/tracking_ground_truth.json). With depth in the bag
    it is replayed too, and with per-frame 3-D truth in the geometry sidecar
    (``geometry_ground_truth``, default BAG/geometry_ground_truth.json) every frame's
    targets are scored in 3-D (``tracking_report.score_tracked_geometry``).
    """
    from m2sa_ros.bag.tracking import check_tracking_bag, TrackGoalSettings, TrackReplayer
    from m2sa_ros.bag.tracking_report import (
        build_tracking_report,
        render_tracking_markdown,
        score_tracked_geometry,
        TrackingScores,
        write_tracking_overlays,
    )

    bag, out_dir = Path(bag), Path(out_dir)
    if not (bag / "metadata.yaml").is_file():
        raise BagError(f"{bag} is not a rosbag2 directory (no metadata.yaml)")
    if not rate_factor > 0:
        raise BagError(f"--rate-factor must be > 0, got {rate_factor}")
    if not 0.0 <= min_score <= 1.0:
        raise BagError(f"--min-score must be within [0, 1], got {min_score}")
    if lost_frames < 0:
        raise BagError(f"--lost-frames must be >= 0, got {lost_frames}")
    truth = load_tracking_ground_truth(bag, ground_truth)
    if truth is None:
        raise BagError(f"{bag} has no tracking ground truth ({tracking_ground_truth_path(bag).name}); record one "
                       "with m2sa-bag make --sequences N, or pass --tracking-ground-truth FILE")
    check_tracking_bag(bag, truth)  # before paying for a node start-up
    geometry, geometry_note = _geometry_truth(bag, geometry_ground_truth)
    if geometry is not None and not geometry.sequences:
        geometry, geometry_note = None, "3-D errors not scored: the geometry ground truth has no sequences"
    depth_topics = _depth_topics(bag, geometry)
    compressed = _compressed_depth(bag, depth_topics)
    results_bag = _results_bag(out_dir)
    namespace = _namespace(namespace)
    options = ReplayOptions(namespace, rate_factor, settle_s, 1, result_timeout_s, startup_timeout_s)
    goal = TrackGoalSettings(min_score, lost_frames, use_previous_mask)
    node = NodeProcess(namespace, _depth_node_args(node_args, compressed), out_dir / "node.log") if start_node \
        else None

    def make_replayer(context: Any) -> TrackReplayer:
        replayer = TrackReplayer(options, context, results_bag, goal)
        replayer.expect_depth = depth_topics is not None
        replayer.compressed_depth = compressed
        return replayer

    with _live_node(bag, node, make_replayer) as replayer:
        outcomes = replayer.replay_tracks(bag, truth, node, progress, depth_topics)
        foreign = replayer.foreign_results
        bad_depth = dict(replayer.bad_depth)
    scores = TrackingScores(truth, outcomes)
    geometry_scores = None
    if geometry is not None:
        geometry_scores = score_tracked_geometry(geometry, scores, truth, bad_depth)
    elif geometry_note is None:
        geometry_note = ("no 3-D ground truth (the bag has no geometry_ground_truth.json: recorded with "
                         "--no-depth, or before tracking bags had depth)")
    settings = {"rate_factor": rate_factor, "namespace": namespace, "node_started": start_node,
                "node_command": node.command if node is not None else None, "settle_s": settle_s,
                "result_timeout_s": result_timeout_s, "results_bag": str(results_bag),
                "use_previous_mask": use_previous_mask, "min_score": min_score, "lost_frames": lost_frames,
                "generator": truth.generator}
    report = build_tracking_report(bag, truth, outcomes, scores, settings, foreign)
    report["geometry"] = geometry_report(geometry, geometry_scores, geometry_note, bad_depth)
    written = write_tracking_overlays(out_dir, bag, truth, outcomes, scores) if overlays else []
    (out_dir / "report.json").write_text(json.dumps(report, indent=1, default=json_default), encoding="utf-8")
    (out_dir / "report.md").write_text(render_tracking_markdown(report, written), encoding="utf-8")
    return TrackingEvaluation(report, outcomes, scores)


def resolve_protocol(protocol: str, bag: str | Path, tracking_ground_truth: str | Path | None) -> str:
    """``auto``: tracking when the bag has a tracking sidecar (or one is given), else commands."""
    if protocol != "auto":
        return protocol
    return "tracking" if tracking_ground_truth or tracking_ground_truth_path(bag).is_file() else "commands"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="m2sa-bag-eval", description="Replay a bag through the perception node "
                                     "over DDS, record and score its results.")
    parser.add_argument("--bag", required=True, help="rosbag2 directory (e.g. written by m2sa-bag make)")
    parser.add_argument("--out", required=True, help="output directory: report.md, report.json, overlays/, "
                                                     "results_bag/, node.log")
    parser.add_argument("--node-args", default="", help="extra ROS arguments for the node, one string, e.g. "
                        '"-p model_path:=models/m2sa-tiny-synth -p device:=cuda" (after --ros-args)')
    parser.add_argument("--model-path", default=None, help='shorthand for --node-args "-p model_path:=PATH"')
    parser.add_argument("--params-file", default=None, help="node parameters file (--params-file)")
    parser.add_argument("--no-start", action="store_true", help="use a node that is already running under "
                        "--namespace instead of starting one")
    parser.add_argument("--namespace", default=None, help="the node's namespace (default: a private one)")
    parser.add_argument("--rate-factor", type=float, default=1.0, help="replay speed: 2 = twice as fast as recorded")
    parser.add_argument("--settle", type=float, default=0.1, help="seconds between a frame and the next command")
    parser.add_argument("--max-in-flight", type=int, default=4, help="unanswered commands allowed at once "
                        "(keep <= the node's max_queue + 1)")
    parser.add_argument("--result-timeout", type=float, default=300.0, help="seconds a command waits for its result")
    parser.add_argument("--startup-timeout", type=float, default=300.0,
                        help="seconds to wait for the node to become active, its model loaded (default 300; a "
                        "node that logs a configure failure ends the run at once, with its reason)")
    parser.add_argument("--ground-truth", default=None, help="ground-truth JSON (default: BAG/ground_truth.json)")
    parser.add_argument("--geometry-ground-truth", default=None,
                        help="3-D ground-truth JSON (default: BAG/geometry_ground_truth.json when the bag has depth)")
    parser.add_argument("--protocol", choices=PROTOCOLS, default="auto",
                        help="commands: each command answered once; tracking: each command a track goal followed "
                        "over its sequence (docs/TRACKING.md); auto (default): tracking when the bag has "
                        "tracking_ground_truth.json")
    track = parser.add_argument_group("tracking protocol")
    track.add_argument("--tracking-ground-truth", default=None,
                       help="tracking ground-truth JSON (default: BAG/tracking_ground_truth.json)")
    track.add_argument("--use-previous-mask", action="store_true", help="goals set use_previous_mask")
    track.add_argument("--min-score", type=float, default=0.0, help="goals' lost-target score (default 0)")
    track.add_argument("--lost-frames", type=int, default=0,
                       help="goals' lost-target frames (default 0: never lost, every frame is tracked)")
    parser.add_argument("--no-overlays", action="store_true", help="skip overlays/")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser


@cli_entry("m2sa-bag-eval")
def main(argv: list[str] | None = None) -> int:
    """``m2sa-bag-eval``; exit status 1 when any command got no result, 2 on bad input."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.no_start and not args.namespace:
        parser.error("--no-start needs --namespace (where the running node listens)")
    node_args = shlex.split(args.node_args)
    if args.model_path:
        node_args += ["-p", f"model_path:={args.model_path}"]
    if args.params_file:
        node_args = ["--params-file", args.params_file, *node_args]
    if args.no_start and node_args:
        parser.error("--node-args/--model-path/--params-file only apply to a node this tool starts")
    try:
        with stop_on_signals():  # SIGINT and SIGTERM stop the node this tool started, then the tool
            protocol = resolve_protocol(args.protocol, args.bag, args.tracking_ground_truth)
            if protocol == "tracking":
                return _main_tracking(args, node_args)
            if args.tracking_ground_truth or args.use_previous_mask or args.lost_frames or args.min_score:
                parser.error("--tracking-ground-truth, --use-previous-mask, --min-score and --lost-frames only "
                             "apply to --protocol tracking")
            evaluation = evaluate_bag(args.bag, args.out, node_args=node_args, start_node=not args.no_start,
                                      namespace=args.namespace, rate_factor=args.rate_factor, settle_s=args.settle,
                                      max_in_flight=args.max_in_flight, result_timeout_s=args.result_timeout,
                                      startup_timeout_s=args.startup_timeout, ground_truth=args.ground_truth,
                                      progress=not args.quiet, overlays=not args.no_overlays,
                                      geometry_ground_truth=args.geometry_ground_truth)
    except (BagError, ValueError) as exc:
        print(f"m2sa-bag-eval: error: {exc}", file=sys.stderr)
        return 2
    except (RuntimeError, TimeoutError) as exc:
        print(f"m2sa-bag-eval: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:
        why = exc.signal_name if isinstance(exc, Interrupted) else "interrupted"
        print(f"m2sa-bag-eval: {why}; the node was stopped, no report written", file=sys.stderr)
        return exc.exit_status if isinstance(exc, Interrupted) else 130
    print(summary_text(evaluation.report))
    print(f"report: {Path(args.out) / 'report.md'}")
    return 1 if evaluation.report["counts"]["commands_without_result"] else 0


def _main_tracking(args: argparse.Namespace, node_args: list[str]) -> int:
    """
    ``m2sa-bag-eval`` on a tracking bag.

    Exit status 1 when a goal had no final result or a tracked frame no result, 2 on bad
    input (raised to :func:`main`).
    """
    from m2sa_ros.bag.tracking_report import tracking_summary_text

    evaluation = evaluate_tracking_bag(
        args.bag, args.out, node_args=node_args, start_node=not args.no_start, namespace=args.namespace,
        rate_factor=args.rate_factor, settle_s=args.settle, result_timeout_s=args.result_timeout,
        startup_timeout_s=args.startup_timeout, ground_truth=args.tracking_ground_truth,
        use_previous_mask=args.use_previous_mask, min_score=args.min_score, lost_frames=args.lost_frames,
        geometry_ground_truth=args.geometry_ground_truth,
        progress=not args.quiet, overlays=not args.no_overlays)
    print(tracking_summary_text(evaluation.report))
    print(f"report: {Path(args.out) / 'report.md'}")
    counts = evaluation.report["counts"]
    return 1 if counts["goals_without_final_result"] or counts["frames_without_result"] else 0


if __name__ == "__main__":
    sys.exit(main())
