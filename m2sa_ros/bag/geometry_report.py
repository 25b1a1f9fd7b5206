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
The 3-D section of a bag evaluation's report: report.json's ``geometry`` and report.md's table.

Kept beside ``report`` (the masks, latency and overlays) so that a bag without depth
renders exactly as before plus one line saying why there are no 3-D figures.
"""

from __future__ import annotations

from dataclasses import asdict
import math
from typing import Any

from m2sa_ros.bag.geometry_scoring import GeometryScores
from m2sa_ros.bag.geometry_truth import GeometryGroundTruth


def geometry_report(geometry: GeometryGroundTruth | None, scores: GeometryScores | None, note: str | None,
                    bad_depth: dict[int, str]) -> dict[str, Any]:
    """report.json's ``geometry``: how depth was recorded, per split the errors, the pairs, the problems."""
    problems = list(scores.problems if scores is not None else ()) + list(bad_depth.values())
    if geometry is None or scores is None:
        return {"scored": False, "note": note or "no 3-D ground truth", "problems": problems}
    return {"scored": True, "encoding": geometry.encoding, "depth_codec": geometry.depth_codec,
            "artefacts": geometry.artefacts,
            "splits": scores.splits, "pairs": [asdict(p) for p in scores.pairs], "problems": problems}


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:.{digits}f}"


def geometry_markdown(section: dict[str, Any] | None) -> list[str]:
    """report.md's lines for the 3-D errors (a one-line note when they were not scored)."""
    if not section:
        return []
    if not section.get("scored"):
        lines = ["## 3-D geometry", "", f"n/a: {section.get('note', 'no 3-D ground truth')}.", ""]
    else:
        artefacts = section.get("artefacts", {}).get("level", "none")
        codec = f", compressedDepth {section['depth_codec']}" if section.get("depth_codec") else ""
        lines = ["## 3-D geometry", "",
                 f"Registered depth ({section['encoding']}{codec}, sensor artefacts: {artefacts}) against the clean "
                 "3-D ground truth, on the pairs the mask scoring matched (IoU > 0); medians. Centroid: "
                 "`Target.centroid` to the mean of the true visible points; box centre: `pose.position` to the "
                 "true box centre; normal: the pose's z axis to the true surface normal; size: the largest "
                 "in-plane difference between `size` and the true points' extents on the pose's x, y axes.", "",
                 "| split | pairs | with pose | centroid (mm) | box centre (mm) | normal (deg) | size (mm) |",
                 "|---|---|---|---|---|---|---|"]
        for split, m in section["splits"].items():
            lines.append(f"| {split} | {m['pairs']} | {_fmt(m['pose_share'] * 100 if m['pairs'] else math.nan, 0)}"
                         f" % | {_fmt(m['median_centroid_mm'])} | {_fmt(m['median_centre_mm'])} | "
                         f"{_fmt(m['median_normal_deg'])} | {_fmt(m['median_size_mm'])} |")
        if not section["splits"]:
            lines.append("| - | 0 | n/a | n/a | n/a | n/a | n/a |")
        lines.append("")
    if section.get("problems"):
        lines += ["3-D problems (left out of the figures):", ""] + [f"- {p}" for p in section["problems"]] + [""]
    return lines


def geometry_summary_line(section: dict[str, Any] | None, split: str = "all") -> str | None:
    """One terminal line: the 3-D medians of ``split`` (else of the only split), or why there are none."""
    if not section:
        return None
    if not section.get("scored"):
        return f"3-D: n/a ({section.get('note', 'no 3-D ground truth')})"
    splits = section["splits"]
    m = splits.get(split) or (next(iter(splits.values())) if len(splits) == 1 else None)
    if m is None:
        return "3-D: no matched target to score"
    return (f"3-D ({m['pairs']} targets, {_fmt(m['pose_share'] * 100, 0)} % with pose): centroid "
            f"{_fmt(m['median_centroid_mm'])} mm, box centre {_fmt(m['median_centre_mm'])} mm, normal "
            f"{_fmt(m['median_normal_deg'])} deg, size {_fmt(m['median_size_mm'])} mm (medians)")
