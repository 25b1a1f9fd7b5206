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
scripts/refresh_doc_excerpts.py and the excerpts it keeps in docs/.

* The docs and the script name the same excerpts, and the docs' excerpts are of the model
  in models/ today (its weights' digest is in them): after the next training this fails
  until the script is run again.
* The excerpts of one doc and the other come from one run (the same gIoU table).
* The script cuts its excerpts from what ``m2sa-bag-eval`` really writes: a report.md
  rendered by m2sa_ros.bag.tracking_report from a small report, so a renamed section of
  the tool's report fails here and not in the docs.
* Rewriting touches the marked regions only, and an unknown or unclosed region is an error.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
from pathlib import Path
import re
import sys

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "refresh_doc_excerpts.py"


def _load():
    spec = importlib.util.spec_from_file_location("refresh_doc_excerpts", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


refresh = _load()


def _regions(path: Path) -> dict[str, str]:
    text = path.read_text(encoding="utf-8")
    found = [(m["name"], m["body"]) for m in refresh.REGION.finditer(text)]
    names = [name for name, _ in found]
    assert len(names) == len(set(names)), f"{path.name}: an excerpt appears twice: {names}"
    return dict(found)


def test_the_docs_hold_every_excerpt_of_todays_model():
    regions = {name: body for doc in refresh.DOCS for name, body in _regions(doc).items()}
    assert set(regions) == set(refresh.RENDERERS)
    weights = ROOT / "models" / "m2sa-tiny-synth" / "model.safetensors"
    digest = hashlib.sha256(weights.read_bytes()).hexdigest()[:12]
    for name, body in regions.items():
        if name != "track-report":  # the short table's model is named by the paragraph after it
            assert digest in " ".join(body.split()), (
                f"excerpt '{name}' is not of the shipped model (weights {digest}): run scripts/refresh_doc_excerpts.py")


def test_both_docs_show_one_run():
    short = _regions(refresh.DOCS[0])["track-report"]
    long = _regions(refresh.DOCS[1])["track-report-long"]
    table = [line for line in short.splitlines() if line.startswith("| 0 (answer)") or line.startswith("| **tracked")]
    assert len(table) == 2 and all(line in long.splitlines() for line in table)


def _small_report() -> dict:
    frame = {"giou": 0.5, "ciou": 0.6, "masks": 2, "samples": 1, "results": 1, "inference_ms_p50": 30.0}
    ms = {"p50": 30.0, "p90": 40.0, "p95": 41.0, "p99": 42.0, "mean": 33.0, "max": 43.0}
    split = {"pairs": 2, "with_pose": 2, "pose_share": 1.0, "median_centroid_mm": 4.0, "median_centre_mm": 5.0,
             "median_normal_deg": 1.0, "median_size_mm": 6.0}
    sequences = [{"index": k, "split": "object", "motion": "pan", "command": f"command {k}", "answer": f"answer {k}",
                  "error": "", "reason": "cancelled", "problems": [],
                  "frames": [{"frame": t, "giou": 0.5, "has_result": True, "problems": []} for t in range(3)]}
                 for k in range(5)]
    return {
        "bag": "track_bag", "settings": {"use_previous_mask": False, "lost_frames": 0, "rate_factor": 1.0,
                                         "namespace": "/m2sa_eval"},
        "counts": {"sequences": 5, "goals_accepted": 5, "final_results": 5, "goals_without_final_result": 0,
                   "frames_tracked": 10, "frames_with_result": 10, "frames_without_result": 0,
                   "frames_after_track_end": 0, "tracked_on_another_frame": 0},
        "per_frame": [dict(frame, frame=t) for t in range(3)],
        "overall": {"giou": 0.55, "ciou": 0.65, "masks": 4},
        "geometry": {"scored": True, "encoding": "32FC1", "artefacts": {"level": "mild"}, "problems": [],
                     "splits": {"frame_0": split, "frame_1": split, "frame_2": dict(split, median_centre_mm=9.0),
                                "after_first": split},
                     "pairs": [{"split": "frame_1", "has_pose": True, "iou": 0.9, "centre_mm": 3.0},
                               {"split": "frame_2", "has_pose": True, "iou": 0.5, "centre_mm": 20.0}]},
        "ms_per_tracked_frame": ms, "tracked_frame_latency_ms": ms, "answer_inference_ms": dict(ms, p50=90.0),
        "answer_latency_ms": ms, "end_reasons": {"cancelled": 5}, "sequences": sequences,
    }


@pytest.fixture
def reports():
    pytest.importorskip("rosbags")  # the bag tools' report renderer
    from m2sa_ros.bag.tracking_report import render_tracking_markdown

    track = _small_report()
    protocol = {"sequences": 12, "frames": 6, "motion": "mixed", "seed": 4242,
                "modes": {"prompts": {"ms_per_frame": 30.0, "overall": {"giou": 0.6}},
                          "previous_mask": {"ms_per_frame": 31.0, "overall": {"giou": 0.58}},
                          "rerun": {"ms_per_frame": 90.0, "overall": {"giou": 0.61}}}}
    return refresh.Reports(track, render_tracking_markdown(track, []), protocol, "`models/x`", "0123456789ab", 2, 0.4)


def test_excerpts_are_cut_from_the_tools_own_report(reports):
    regions = {name: render(reports) for name, render in refresh.RENDERERS.items()}
    short = regions["track-report"]
    assert short.startswith("```\n| frame | gIoU | cIoU | masks | results | node ms (p50) |")
    assert short.endswith("```\n")
    assert "| **tracked frames (1..)** | **0.5500** |" in short and "| cancelled | 5 |" in short
    long = regions["track-report-long"]
    assert "0123456789ab" in long and "| 5 | 5 | 5 | **0** | 10 | 10 | **0** | 0 | 0 |" in long
    rows = [line for line in long.splitlines() if re.match(r"\| \d \| object \|", line)]
    assert len(rows) == refresh.SEQUENCE_ROWS and "...\n```" in long  # the first sequences, then "..."
    assert "re-running took 3.0x as long" in regions["tracking-protocol"]
    assert "gIoU 60.0 tracked" in " ".join(regions["tracking-protocol"].split())
    assert "frame 2 (gIoU 0.50, box centre 9.0 mm)" in " ".join(regions["track-geometry-long"].split())
    assert "shared with other work" not in regions["track-summary"]  # load 0.4 on 2 cores: a quiet CPU
    busy = dataclasses.replace(reports, load=6.0)
    assert "shared with other work (load average 6.0 while it ran)" in " ".join(refresh.track_summary(busy).split())
    assert all(len(line) <= refresh.WIDTH for name in ("track-summary", "track-geometry")
               for line in regions[name].splitlines())


def test_rewrite_touches_the_marked_regions_only():
    text = ("before\n<!-- excerpt:a old note -->\nold body\n<!-- /excerpt:a -->\nbetween\n"
            "<!-- excerpt:b -->\nx\n<!-- /excerpt:b -->\nafter\n")
    new, found = refresh.rewrite(text, {"a": "new a\n", "b": "new b\n"}, "doc.md")
    assert found == ["a", "b"]
    assert new == (f"before\n<!-- excerpt:a{refresh.NOTE}-->\nnew a\n<!-- /excerpt:a -->\nbetween\n"
                   f"<!-- excerpt:b{refresh.NOTE}-->\nnew b\n<!-- /excerpt:b -->\nafter\n")
    with pytest.raises(refresh.ExcerptError, match="unknown excerpt 'b'"):
        refresh.rewrite(text, {"a": "x\n"}, "doc.md")
    with pytest.raises(refresh.ExcerptError, match="without their closing"):
        refresh.rewrite("<!-- excerpt:a -->\nbody\n", {"a": "x\n"}, "doc.md")


def test_a_renamed_section_of_the_report_is_an_error(reports):
    broken = dataclasses.replace(reports, track_md=reports.track_md.replace("## How the tracks ended", "## Endings"))
    with pytest.raises(refresh.ExcerptError, match="How the tracks ended"):
        refresh.track_report_short(broken)
