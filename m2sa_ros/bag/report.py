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
The report of a bag evaluation: Markdown, JSON payload, overlays and a contact sheet.

With commands about something not in view in the ground truth, the report has an
``absence`` section per split (absence_scoring: the share of absent commands the node
rejected, of present ones it wrongly rejected) beside the masks' scores on present commands.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from m2sa_ros.bag.bag_io import read_frames
from m2sa_ros.bag.geometry_report import geometry_markdown, geometry_summary_line
from m2sa_ros.bag.ground_truth import GroundTruth, GroundTruthCommand
from m2sa_ros.bag.replay import Outcome
from m2sa_ros.bag.scoring import outcome_of_msg, percentiles, Prediction, Scores
import numpy as np

MIN_PANEL_HEIGHT = 384  # overlay panels of smaller frames are enlarged to at least this


# --------------------------------------------------------------------------- reports
def _fmt(value: float, digits: int = 4) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f} %"


def build_report(bag: Path, truth: GroundTruth | None, outcomes: list[Outcome], scores: Scores | None,
                 settings: dict[str, Any], foreign_results: int,
                 absence: dict[str, Any] | None = None) -> dict[str, Any]:
    """
    Everything report.json holds (report.md is rendered from it).

    ``absence`` is absence_scoring's counts per split, given when the ground truth has
    commands about something not in view.
    """
    answered = [o for o in outcomes if o.result is not None]
    commands = []
    for o in outcomes:
        gt: GroundTruthCommand | None = truth.commands[o.index] if truth is not None else None
        score = scores.commands.get(o.index) if scores is not None else None
        result = o.result
        targets = []
        if result is not None:
            for i, t in enumerate(result.targets):
                known = score is not None and i < len(score.target_ious)  # not when the result was unreadable
                targets.append({"label": t.label, "score": float(t.score),
                                "iou": score.target_ious[i] if known else None,
                                "matched_gt": score.matched_gt[i] if known else None,
                                # Which targets the node measured in 3-D (false: no usable depth for the frame).
                                "has_centroid": bool(getattr(t, "has_centroid", False)),
                                "has_pose": bool(getattr(t, "has_pose", False))})
        commands.append({
            "index": o.index, "command": o.command, "split": gt.split if gt else "",
            "image_stamp_ns": o.expected_stamp_ns, "image_in_bag": o.image_in_bag,
            "has_result": result is not None,
            "success": bool(result.success) if result is not None else False,
            "error": result.error if result is not None else "",
            "answer": result.answer if result is not None else "",
            # v6: what the result says ("targets", "absent", "failed"; "" without a result) and
            # the words it gives for what is missing; what the ground truth expects.
            "outcome": outcome_of_msg(result) if result is not None else "",
            "missing": getattr(result, "missing", "") if result is not None else "",
            "expected_absent": bool(gt is not None and gt.absent),
            "expected_missing": (gt.missing or {}).get("words", "") if gt is not None else "",
            "request_id": result.request_id if result is not None else "",
            "latency_ms": None if result is None else o.latency_ms,
            "inference_ms": None if result is None else float(result.inference_ms),
            "targets": targets,
            "ground_truth": [t.label for t in gt.targets] if gt else [],
            "reference_answer": gt.answer if gt else "",
            "missed_ground_truth": score.missed_gt if score else [],
            "scored": score is not None,
            "problems": o.problems,
        })
    counts = {
        "commands": len(outcomes),
        "results": len(answered),
        "commands_without_result": len(outcomes) - len(answered),
        "failed_results": sum(1 for o in answered if not o.result.success),
        "commands_without_image": sum(1 for o in outcomes if not o.image_in_bag),
        "answered_on_another_frame": sum(1 for o in outcomes if any(p.startswith("answered on") for p in o.problems)),
        "foreign_results": foreign_results,
        "scored": len(scores.commands) if scores is not None else 0,
    }
    return {
        "bag": str(bag),
        "protocol": "generative",
        "settings": settings,
        "counts": counts,
        "metrics": {k: r.as_dict() for k, r in scores.reports.items()} if scores is not None else {},
        "absence": {k: c.as_dict() for k, c in absence.items()} if absence else {},
        "latency_ms": percentiles([o.latency_ms for o in answered]),
        "inference_ms": percentiles([float(o.result.inference_ms) for o in answered if o.result.success]),
        "commands": commands,
    }


def render_markdown(report: dict[str, Any], overlays: list[str]) -> str:
    """report.md: summary, metrics per split, latency, problems, one row per command."""
    c = report["counts"]
    lines = [f"# Bag replay evaluation: `{report['bag']}`", "",
             ("Protocol: generative (Hungarian matching on IoU; unmatched masks count IoU 0). "
              if report["metrics"] else "") +
             f"Rate factor {report['settings'].get('rate_factor')}, node namespace "
             f"`{report['settings'].get('namespace')}`.", "",
             "| commands | results | **without result** | failed | without image | answered on another frame |",
             "|---|---|---|---|---|---|",
             f"| {c['commands']} | {c['results']} | **{c['commands_without_result']}** | {c['failed_results']} | "
             f"{c['commands_without_image']} | {c['answered_on_another_frame']} |", ""]
    if report["metrics"]:
        lines += ["## Scores", "", "| split | gIoU | cIoU | masks | samples | count accuracy |",
                  "|---|---|---|---|---|---|"]
        for split, m in report["metrics"].items():
            lines.append(f"| {split} | {_fmt(m['giou'])} | {_fmt(m['ciou'])} | {m['masks']} | {m['samples']} | "
                         f"{_fmt(m['count_accuracy'])} |")
        lines.append("")
    else:
        lines += ["No ground truth: answers and latency only.", ""]
    lines += absence_markdown(report.get("absence"))
    lines += geometry_markdown(report.get("geometry"))
    lines += ["## Latency (ms)", "", "| | " + " | ".join(report["latency_ms"]) + " |",
              "|---|" + "---|" * len(report["latency_ms"])]
    for name, key in (("command -> result", "latency_ms"), ("node inference", "inference_ms")):
        lines.append(f"| {name} | " + " | ".join(_fmt(v, 1) for v in report[key].values()) + " |")
    lines.append("")
    problems = [(cmd["index"], p) for cmd in report["commands"] for p in cmd["problems"]]
    if problems:
        lines += ["## Problems", ""] + [f"- command {i}: {p}" for i, p in problems] + [""]
    lines += ["## Commands", "", "| # | split | command | answer | targets (IoU) | missed | ms |",
              "|---|---|---|---|---|---|---|"]
    for cmd in report["commands"]:
        answer = cmd["answer"] if cmd["success"] else f"*error: {cmd['error'] or 'no result'}*"
        if cmd.get("outcome") == "absent":
            answer += f" *(absent{': ' + cmd['missing'] if cmd.get('missing') else ''})*"
        targets = ", ".join(f"{t['label']} ({_fmt(t['iou'], 2) if t['iou'] is not None else '-'})"
                            for t in cmd["targets"]) or "-"
        missed = ", ".join(cmd["ground_truth"][g] for g in cmd["missed_ground_truth"]) or "-"
        if cmd.get("expected_absent"):
            missed = f"expected absent: {cmd.get('expected_missing') or '?'}"
        ms = _fmt(cmd["latency_ms"], 0) if cmd["latency_ms"] is not None else "-"
        lines.append(f"| {cmd['index']} | {cmd['split']} | {_md(cmd['command'])} | {_md(answer)} | {_md(targets)} | "
                     f"{_md(missed)} | {ms} |")
    if overlays:
        lines += ["", "## Overlays", "", "![contact sheet](overlays/contact_sheet.png)", "",
                  "Left: ground truth, right: the node's answer; one file per command in `overlays/`."]
    return "\n".join(lines) + "\n"


def absence_markdown(absence: dict[str, Any] | None) -> list[str]:
    """Return the section on commands about something not in view; none when the ground truth has none."""
    if not absence:
        return []
    lines = ["## Commands about something not in view", "",
             "An absent command is rejected when its result says OUTCOME_ABSENT (a success naming no "
             "target); the scores above are on the present commands alone.", "",
             "| split | absent commands | rejected | present commands | wrongly rejected |", "|---|---|---|---|---|"]
    for split, c in absence.items():
        lines.append(f"| {split} | {c['absent']} | {c['rejected']} ({_percent(c['rejected_share'])}) | "
                     f"{c['present']} | {c['wrongly_rejected']} ({_percent(c['wrongly_rejected_share'])}) |")
    return lines + [""]


def absence_summary_lines(absence: dict[str, Any] | None) -> list[str]:
    """Return one terminal line per split: absent commands rejected, present ones wrongly rejected."""
    return [f"{split:<16} absent rejected {c['rejected']}/{c['absent']} ({_percent(c['rejected_share'])}), "
            f"present wrongly rejected {c['wrongly_rejected']}/{c['present']} "
            f"({_percent(c['wrongly_rejected_share'])})" for split, c in (absence or {}).items()]


def _md(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


# --------------------------------------------------------------------------- overlays
def _caption(width: int, lines: list[str], scale: float = 0.4) -> np.ndarray:
    import cv2

    height = 8 + 16 * len(lines)
    strip = np.full((height, width, 3), 255, dtype=np.uint8)
    for i, line in enumerate(lines):
        cv2.putText(strip, line, (4, 16 + 16 * i), cv2.FONT_HERSHEY_SIMPLEX, scale, (0, 0, 0), 1, cv2.LINE_AA)
    return strip


def _wrap(text: str, width_px: int, char_px: int = 7) -> list[str]:
    import textwrap

    return textwrap.wrap(text, max(10, width_px // char_px)) or [""]


def command_overlay(image: np.ndarray, command: GroundTruthCommand | None, text: str, prediction: Prediction | None,
                    ious: list[float] | None) -> np.ndarray:
    """Ground truth | prediction side by side, the command and answer above."""
    from m2sa_core.types import Granularity, Target
    from m2sa_core.visualize import overlay_targets

    def targets(masks: Any, labels: list[str], scores: list[float]) -> list[Target]:
        return [Target(label=label, object_name="", instance=0, part_name="", granularity=Granularity.OBJECT,
                       mask=np.asarray(mask, dtype=bool), score=score)
                for mask, label, score in zip(masks, labels, scores)]

    # Small frames (the synthetic world's 256 px) are enlarged, pixels kept sharp, so labels stay legible.
    zoom = max(1, math.ceil(MIN_PANEL_HEIGHT / image.shape[0]))

    def enlarge(array: np.ndarray) -> np.ndarray:
        if zoom == 1:
            return array
        return np.repeat(np.repeat(array, zoom, axis=0), zoom, axis=1)

    image = enlarge(image)
    gt_panel = image.copy()
    if command is not None and command.targets:
        gt_panel = overlay_targets(image, targets([enlarge(m) for m in command.masks()],
                                                  [t.label for t in command.targets], [0.0] * len(command.targets)))
    pred_panel = image.copy()
    if prediction is not None and len(prediction.masks):
        shown = prediction.requested_masks()  # what was scored
        labels = [f"{label} IoU {iou:.2f}" if ious else label
                  for label, iou in zip(prediction.labels, ious or [0.0] * len(prediction.labels))]
        pred_panel = overlay_targets(image, targets([enlarge(m) for m in shown], labels,
                                                    [0.0] * len(labels)))
    gap = np.full((image.shape[0], 4, 3), 255, dtype=np.uint8)
    body = np.concatenate([gt_panel, gap, pred_panel], axis=1)
    answer = "no result" if prediction is None else (prediction.answer if prediction.success
                                                     else f"error: {prediction.error}")
    lines = _wrap(f"command: {text}", body.shape[1]) + _wrap(f"answer: {answer}", body.shape[1])
    if command is not None:
        nothing = f"nothing (no {command.missing.get('words', '')} in view)" if command.absent else "nothing"
        lines += _wrap("expected: " + (", ".join(t.label for t in command.targets) or nothing), body.shape[1])
    return np.concatenate([_caption(body.shape[1], lines), body], axis=0)


def contact_sheet(tiles: list[tuple[str, np.ndarray]], columns: int = 4, tile_width: int = 320) -> np.ndarray:
    """Return a grid of thumbnails, each titled (e.g. "#3 gIoU 0.71")."""
    import cv2

    if not tiles:
        raise ValueError("contact sheet: no tiles")
    thumbs = []
    for title, image in tiles:
        scale = tile_width / image.shape[1]
        size = (tile_width, max(1, int(round(image.shape[0] * scale))))
        thumb = cv2.resize(image, size, interpolation=cv2.INTER_AREA)
        thumbs.append(np.concatenate([_caption(tile_width, [title]), thumb], axis=0))
    height = max(t.shape[0] for t in thumbs)
    rows = []
    for start in range(0, len(thumbs), columns):
        row = [np.pad(t, ((0, height - t.shape[0]), (0, 4), (0, 0)), constant_values=255)
               for t in thumbs[start:start + columns]]
        row += [np.full((height, tile_width + 4, 3), 255, dtype=np.uint8)] * (columns - len(row))
        rows.append(np.concatenate(row, axis=1))
    return np.concatenate(rows, axis=0)


def write_overlays(out_dir: Path, bag: Path, truth: GroundTruth | None, outcomes: list[Outcome],
                   predictions: dict[int, Prediction | None], scores: Scores | None, image_topic: str) -> list[str]:
    """overlays/cmd_NNN.png per command with a frame, and overlays/contact_sheet.png."""
    import cv2

    overlay_dir = out_dir / "overlays"
    overlay_dir.mkdir(parents=True, exist_ok=True)
    stamps = {o.expected_stamp_ns for o in outcomes if o.expected_stamp_ns is not None and o.image_in_bag}
    frames = read_frames(bag, stamps, image_topic)
    written, tiles = [], []
    for o in outcomes:
        image = frames.get(o.expected_stamp_ns) if o.expected_stamp_ns is not None else None
        if image is None:
            continue
        gt = truth.commands[o.index] if truth is not None else None
        score = scores.commands.get(o.index) if scores is not None else None
        panel = command_overlay(image, gt, o.command, predictions.get(o.index), score.target_ious if score else None)
        name = f"cmd_{o.index:03d}.png"
        cv2.imwrite(str(overlay_dir / name), panel[:, :, ::-1])
        written.append(name)
        giou = f" IoU {np.mean(score.entry_ious):.2f}" if score and score.entry_ious else ""
        tiles.append((f"#{o.index}{giou}", panel))
    if tiles:
        cv2.imwrite(str(overlay_dir / "contact_sheet.png"), contact_sheet(tiles)[:, :, ::-1])
    return written


def summary_text(report: dict[str, Any]) -> str:
    """Return a few lines for the terminal: counts, scores per split, latency."""
    from m2sa_core.evaluation.metrics import format_report, SplitReport

    c = report["counts"]
    lines = [f"commands {c['commands']}, results {c['results']}, without result {c['commands_without_result']}, "
             f"failed {c['failed_results']}, without image {c['commands_without_image']}, "
             f"answered on another frame {c['answered_on_another_frame']}"]
    if report["metrics"]:
        lines.append(format_report({k: SplitReport(**v) for k, v in report["metrics"].items()}))
    lines += absence_summary_lines(report.get("absence"))
    geometry = geometry_summary_line(report.get("geometry"))
    if geometry:
        lines.append(geometry)
    lat = report["latency_ms"]
    lines.append("latency ms: " + ", ".join(f"{k} {_fmt(v, 1)}" for k, v in lat.items()))
    return "\n".join(lines)


def json_default(value: Any) -> Any:
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
