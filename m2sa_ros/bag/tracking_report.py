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
Scores and report of a tracking replay: gIoU per frame index, timing, how tracks ended.

Every frame of every sequence is one sample of the generative protocol (Hungarian
matching on IoU, unmatched masks IoU 0, the shape the command asked for), scored under
its frame index (``frame_0`` is the answer, ``frame_1``... the tracked frames) and,
for tracked frames, under ``after_first``: the overall tracking figure, as
``m2sa-eval --protocol tracking`` reports it. A frame the node never answered (the
track ended, or no result came) counts as an answer with no masks.
"""

from __future__ import annotations

from collections import Counter
import math
from pathlib import Path
from typing import Any

from m2sa_ros.bag.bag_io import read_frames
from m2sa_ros.bag.geometry_report import geometry_markdown, geometry_summary_line
from m2sa_ros.bag.geometry_scoring import GeometryScores, score_geometry, summarise
from m2sa_ros.bag.geometry_truth import GeometryGroundTruth
from m2sa_ros.bag.ground_truth import GroundTruth, TrackingGroundTruth
from m2sa_ros.bag.report import _fmt, _md, command_overlay, contact_sheet
from m2sa_ros.bag.scoring import percentiles, Prediction, prediction_from_msg, score_predictions, Scores
from m2sa_ros.bag.tracking import TrackOutcome
import numpy as np

OVERALL = "after_first"
_STATUS = {4: "succeeded", 5: "canceled", 6: "aborted"}  # action_msgs/GoalStatus


def frame_split(t: int) -> str:
    return f"frame_{t}"


def _frame_giou(entries: list[float]) -> float:
    return float(np.mean(entries)) if entries else math.nan


# --------------------------------------------------------------------------- scoring
class TrackingScores:
    """Per (sequence, frame): the scored command, its prediction and its score."""

    def __init__(self, truth: TrackingGroundTruth, outcomes: list[TrackOutcome]) -> None:
        self.keys: dict[tuple[int, int], int] = {}  # (sequence, frame) -> flat index
        flat = GroundTruth(image_topic=truth.image_topic, command_topic=truth.command_topic)
        self.predictions: dict[int, Prediction | None] = {}
        self.unreadable: dict[int, str] = {}
        exclude = []
        by_index = {o.index: o for o in outcomes}
        for sequence in truth.sequences:
            outcome = by_index.get(sequence.index)
            for t in range(len(sequence.frames)):
                i = len(flat.commands)
                self.keys[(sequence.index, t)] = i
                flat.commands.append(sequence.command_at(t, index=i, split=frame_split(t)))
                frame = outcome.frames[t] if outcome is not None else None
                self.predictions[i] = None
                if outcome is None or any(p.startswith("its first frame") for p in outcome.problems) or (
                        frame is not None and any(p.startswith("not in the bag") for p in frame.problems)):
                    exclude.append(i)  # a recording problem, not the node's
                elif frame is not None and frame.result is not None:
                    try:
                        self.predictions[i] = prediction_from_msg(frame.result)
                    except ValueError as exc:
                        self.unreadable[i] = str(exc)
                        frame.problems.append(f"unreadable result: {exc}")
        self.flat = flat
        frame_of = {i: t for (_, t), i in self.keys.items()}
        self.scores: Scores = score_predictions(flat, self.predictions, exclude=exclude,
                                                extra_splits=lambda c: [OVERALL] if frame_of[c.index] else [])

    def score(self, sequence: int, frame: int) -> Any:
        return self.scores.commands.get(self.keys[(sequence, frame)])


def score_tracked_geometry(geometry: GeometryGroundTruth, scores: TrackingScores, truth: TrackingGroundTruth,
                           bad_depth: dict[int, str]) -> GeometryScores:
    """
    Return the 3-D errors of every frame's matched targets, per frame index and over the tracked frames.

    By ``m2sa_ros.bag.geometry_scoring``'s rules, on the pairs the per-frame mask scoring
    matched; the tracked frames are ``after_first``. A frame whose depth could not be
    replayed is left out.
    """
    flat = GeometryGroundTruth(encoding=geometry.encoding, artefacts=geometry.artefacts,
                               generator=geometry.generator, problems=list(geometry.problems))
    left_out: list[int] = []  # frames the mask scoring left out have no score: score_geometry skips them
    for sequence in truth.sequences:
        frames = geometry.sequences.get(sequence.index)
        if frames is None:
            flat.problems.append(f"sequence {sequence.index}: no 3-D ground truth; not scored in 3-D")
            continue
        if len(frames) != len(sequence.frames):
            flat.problems.append(f"sequence {sequence.index}: the geometry ground truth has {len(frames)} frames, "
                                 f"the tracking ground truth {len(sequence.frames)}; not scored in 3-D")
            continue
        for t, (targets, frame) in enumerate(zip(frames, sequence.frames)):
            i = scores.keys[(sequence.index, t)]
            flat.commands[i] = targets
            if frame.image_stamp_ns in bad_depth:
                left_out.append(i)
    out = score_geometry(flat, scores.flat, scores.predictions, scores.scores, exclude=left_out)
    tracked = [p for p in out.pairs if p.split != frame_split(0)]
    splits = {split: out.splits[split] for split in sorted(out.splits, key=_frame_order) if split != "all"}
    if tracked:
        splits[OVERALL] = summarise(tracked)
    out.splits = splits
    return out


def _frame_order(split: str) -> int:
    return int(split.rsplit("_", 1)[1]) if split.startswith("frame_") else 10**9


# --------------------------------------------------------------------------- report
def _frame_entry(truth_frame: Any, frame: Any, score: Any) -> dict[str, Any]:
    result = frame.result
    targets = []
    if result is not None:
        for i, t in enumerate(result.targets):
            known = score is not None and i < len(score.target_ious)
            targets.append({"label": t.label, "score": float(t.score),
                            "iou": score.target_ious[i] if known else None,
                            "matched_gt": score.matched_gt[i] if known else None,
                            "has_centroid": bool(t.has_centroid), "has_pose": bool(t.has_pose)})
    return {
        "frame": frame.frame, "image_stamp_ns": frame.stamp_ns, "tracked": frame.tracked,
        "has_result": result is not None, "frame_seq": frame.frame_seq,
        "result_stamp_ns": (int(result.header.stamp.sec) * 1_000_000_000 + int(result.header.stamp.nanosec))
        if result is not None else None,
        "success": bool(result.success) if result is not None else False,
        "error": result.error if result is not None else "",
        "inference_ms": float(result.inference_ms) if result is not None else None,
        "latency_ms": frame.latency_ms if result is not None else None,
        "targets": targets, "ground_truth": [t.label for t in truth_frame.targets],
        "missed_ground_truth": score.missed_gt if score else [],
        "entry_ious": score.entry_ious if score else [],
        "giou": _frame_giou(score.entry_ious) if score else None,
        "scored": score is not None, "problems": frame.problems,
    }


def build_tracking_report(bag: Path, truth: TrackingGroundTruth, outcomes: list[TrackOutcome], scores: TrackingScores,
                          settings: dict[str, Any], foreign_results: int) -> dict[str, Any]:
    """Everything report.json holds for a tracking replay (report.md is rendered from it)."""
    sequences = []
    by_index = {o.index: o for o in outcomes}
    for sequence in truth.sequences:
        o = by_index.get(sequence.index)
        frames = [] if o is None else [_frame_entry(sequence.frames[f.frame], f, scores.score(sequence.index, f.frame))
                                       for f in o.frames]
        answer = o.frames[0].result if o is not None else None
        sequences.append({
            "index": sequence.index, "command": sequence.command, "split": sequence.split, "motion": sequence.motion,
            "request_id": o.request_id if o else "", "accepted": bool(o and o.accepted),
            "answer": answer.answer if answer is not None else "",
            "error": o.final.result.error if o and o.final is not None and not o.final.result.success else "",
            "reference_answer": sequence.answer,
            "reason": o.reason if o else "", "status": _STATUS.get(o.status, o.status) if o and o.status else None,
            "final_result": bool(o and o.final is not None),
            "final_frames": int(o.final.frames) if o and o.final is not None else None,
            "frames": frames, "problems": o.problems if o else ["no command for this sequence in the bag"],
        })
    all_frames = [f for o in outcomes for f in o.frames]
    later = [f for o in outcomes for f in o.frames[1:]]
    accepted = [o for o in outcomes if o.accepted]
    counts = {
        "sequences": len(truth.sequences),
        "goals_sent": sum(1 for o in outcomes if o.frames[0].tracked),
        "goals_accepted": len(accepted),
        "answers": sum(1 for o in outcomes if o.frames[0].result is not None and o.frames[0].result.success),
        "final_results": sum(1 for o in outcomes if o.final is not None),
        "goals_without_final_result": sum(1 for o in accepted if o.final is None),
        "failed_goals": sum(1 for o in outcomes if o.reason.startswith("error: ")),
        "frames": sum(len(s.frames) for s in truth.sequences),
        "frames_tracked": sum(1 for f in later if f.tracked),
        "frames_with_result": sum(1 for f in later if f.result is not None),
        "frames_without_result": sum(1 for f in all_frames if f.timed_out),
        "frames_after_track_end": sum(1 for f in later if f.result is None and not f.timed_out),
        "tracked_on_another_frame": sum(1 for f in all_frames if any(p.startswith("tracked on") for p in f.problems)),
        "foreign_results": foreign_results,
        "scored_frames": len(scores.scores.commands),
    }
    reports = scores.scores.reports
    n = truth.n_frames
    per_frame = []
    for t in range(n):
        r = reports.get(frame_split(t))
        ms = [float(o.frames[t].result.inference_ms) for o in outcomes
              if t < len(o.frames) and o.frames[t].result is not None and o.frames[t].result.success]
        per_frame.append({"frame": t, "giou": r.giou if r else math.nan, "ciou": r.ciou if r else math.nan,
                          "masks": r.masks if r else 0, "samples": r.samples if r else 0,
                          "results": sum(1 for o in outcomes if t < len(o.frames) and o.frames[t].result is not None),
                          "inference_ms_p50": percentiles(ms)["p50"]})
    tracked_ok = [f for f in later if f.result is not None and f.result.success]
    answered = [o.frames[0] for o in outcomes if o.frames[0].result is not None]
    return {
        "bag": str(bag), "protocol": "tracking", "settings": settings, "counts": counts,
        "end_reasons": dict(Counter(o.reason for o in outcomes if o.final is not None)),
        "overall": reports[OVERALL].as_dict() if OVERALL in reports else {},
        "per_frame": per_frame,
        "metrics": {k: r.as_dict() for k, r in reports.items()},
        "ms_per_tracked_frame": percentiles([float(f.result.inference_ms) for f in tracked_ok]),
        "tracked_frame_latency_ms": percentiles([f.latency_ms for f in later if f.result is not None]),
        "answer_inference_ms": percentiles([float(f.result.inference_ms) for f in answered if f.result.success]),
        "answer_latency_ms": percentiles([f.latency_ms for f in answered]),
        "sequences": sequences,
    }


def render_tracking_markdown(report: dict[str, Any], overlays: list[str]) -> str:
    """report.md of a tracking replay: counts, gIoU per frame, timing, end reasons, sequences."""
    c, s = report["counts"], report["settings"]
    lines = [f"# Tracking replay evaluation: `{report['bag']}`", "",
             "Protocol: generative per frame (Hungarian matching on IoU; unmatched masks count IoU 0). One `track` "
             f"goal per sequence (use_previous_mask {s.get('use_previous_mask')}, lost_frames "
             f"{s.get('lost_frames')}), cancelled after its last frame. Rate factor {s.get('rate_factor')}, node "
             f"namespace `{s.get('namespace')}`.", "",
             "| sequences | goals accepted | final results | **without final result** | frames tracked | "
             "frames with a result | **tracked frames without result** | after the track ended | "
             "on another frame |",
             "|---|---|---|---|---|---|---|---|---|",
             f"| {c['sequences']} | {c['goals_accepted']} | {c['final_results']} | "
             f"**{c['goals_without_final_result']}** | {c['frames_tracked']} | {c['frames_with_result']} | "
             f"**{c['frames_without_result']}** | {c['frames_after_track_end']} | {c['tracked_on_another_frame']} |",
             "", "## gIoU per frame", "", "| frame | gIoU | cIoU | masks | results | node ms (p50) |",
             "|---|---|---|---|---|---|"]
    for f in report["per_frame"]:
        name = f"{f['frame']} (answer)" if f["frame"] == 0 else str(f["frame"])
        lines.append(f"| {name} | {_fmt(f['giou'])} | {_fmt(f['ciou'])} | {f['masks']} | {f['results']} | "
                     f"{_fmt(f['inference_ms_p50'], 1)} |")
    o = report["overall"]
    if o:
        lines.append(f"| **tracked frames (1..)** | **{_fmt(o['giou'])}** | {_fmt(o['ciou'])} | {o['masks']} | "
                     f"{c['frames_with_result']} | {_fmt(report['ms_per_tracked_frame']['p50'], 1)} |")
    lines += [""] + geometry_markdown(report.get("geometry"))
    keys = list(report["ms_per_tracked_frame"])
    lines += ["## Time (ms)", "", "| | " + " | ".join(keys) + " |", "|---|" + "---|" * len(keys)]
    for name, key in (("tracked frame (node)", "ms_per_tracked_frame"),
                      ("frame -> tracked result", "tracked_frame_latency_ms"),
                      ("answer (node)", "answer_inference_ms"), ("goal -> answer", "answer_latency_ms")):
        lines.append(f"| {name} | " + " | ".join(_fmt(v, 1) for v in report[key].values()) + " |")
    lines += ["", "## How the tracks ended", "", "| reason | tracks |", "|---|---|"]
    lines += [f"| {_md(reason)} | {n} |" for reason, n in sorted(report["end_reasons"].items())] or ["| - | 0 |"]
    problems = [(seq["index"], None, p) for seq in report["sequences"] for p in seq["problems"]]
    problems += [(seq["index"], f["frame"], p) for seq in report["sequences"] for f in seq["frames"]
                 for p in f["problems"]]
    if problems:
        lines += ["", "## Problems", ""]
        lines += [f"- sequence {k}" + (f", frame {t}" if t is not None else "") + f": {p}" for k, t, p in problems]
    lines += ["", "## Sequences", "", "| # | split | motion | command | answer | ended | results | gIoU per frame |",
              "|---|---|---|---|---|---|---|---|"]
    for seq in report["sequences"]:
        per = " ".join(_fmt(f["giou"], 2) if f["giou"] is not None else "-" for f in seq["frames"]) or "-"
        results = sum(1 for f in seq["frames"] if f["has_result"])
        answer = seq["answer"] or (f"*error: {seq['error']}*" if seq["error"] else "-")
        lines.append(f"| {seq['index']} | {seq['split']} | {seq['motion']} | {_md(seq['command'])} | "
                     f"{_md(answer)} | {_md(seq['reason'] or '-')} | {results}/{len(seq['frames'])} | "
                     f"{per} |")
    if overlays:
        lines += ["", "## Overlays", "", f"One file per sequence in `overlays/` ({', '.join(overlays[:3])}"
                  f"{', ...' if len(overlays) > 3 else ''}): each frame's ground truth (left) and tracked masks "
                  "(right)."]
    return "\n".join(lines) + "\n"


def write_tracking_overlays(out_dir: Path, bag: Path, truth: TrackingGroundTruth, outcomes: list[TrackOutcome],
                            scores: TrackingScores) -> list[str]:
    """overlays/seq_NNN.png: every frame of a sequence, ground truth | tracked masks, titled with its gIoU."""
    import cv2

    overlay_dir = out_dir / "overlays"
    overlay_dir.mkdir(parents=True, exist_ok=True)
    images = read_frames(bag, {f.image_stamp_ns for s in truth.sequences for f in s.frames}, truth.image_topic)
    written = []
    for outcome in outcomes:
        sequence = truth.sequences[outcome.index]
        tiles = []
        for frame in outcome.frames:
            image = images.get(frame.stamp_ns)
            if image is None:
                continue
            i = scores.keys[(outcome.index, frame.frame)]
            score = scores.scores.commands.get(i)
            panel = command_overlay(image, scores.flat.commands[i], sequence.command, scores.predictions.get(i),
                                    score.target_ious if score else None)
            giou = f" gIoU {_frame_giou(score.entry_ious):.2f}" if score and score.entry_ious else ""
            tiles.append((f"frame {frame.frame}{giou}", panel))
        if tiles:
            name = f"seq_{outcome.index:03d}.png"
            cv2.imwrite(str(overlay_dir / name),
                        contact_sheet(tiles, columns=min(4, len(tiles)), tile_width=480)[:, :, ::-1])
            written.append(name)
    return written


def tracking_summary_text(report: dict[str, Any]) -> str:
    """Return a few lines for the terminal."""
    c = report["counts"]
    per = ", ".join(f"{f['frame']}: {_fmt(f['giou'], 3)}" for f in report["per_frame"])
    o = report["overall"]
    return "\n".join([
        f"sequences {c['sequences']}, goals accepted {c['goals_accepted']}, final results {c['final_results']} "
        f"(without {c['goals_without_final_result']}), frames tracked {c['frames_tracked']}, with a result "
        f"{c['frames_with_result']}, without result {c['frames_without_result']}, failed goals {c['failed_goals']}",
        f"gIoU per frame: {per}",
        f"gIoU tracked frames: {_fmt(o.get('giou', math.nan), 4)}; ms per tracked frame (node p50) "
        f"{_fmt(report['ms_per_tracked_frame']['p50'], 1)}",
        *([line] if (line := geometry_summary_line(report.get("geometry"), OVERALL)) else []),
        "ended: " + (", ".join(f"{k} {v}" for k, v in sorted(report["end_reasons"].items())) or "-")])
