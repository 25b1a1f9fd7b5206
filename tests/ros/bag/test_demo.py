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

"""``make demo``: the printed table, and a small run end to end through the live node."""

from __future__ import annotations

import json
from pathlib import Path

from m2sa_ros.bag.demo import DEFAULT_MODEL, DEFAULT_OUT, main, results_table
import pytest

ROOT = Path(__file__).resolve().parents[3]


def test_make_demo_runs_the_shipped_model_and_writes_to_runs_demo():
    # Resolved from the installed module (the venv links it to the checkout): a module
    # move once sent `make demo` to a models/ folder inside the package, where no model
    # is, and it fell back to random weights.
    assert DEFAULT_MODEL == ROOT / "models" / "m2sa-tiny-synth"
    assert (DEFAULT_MODEL / "config.json").is_file() and (DEFAULT_MODEL / "model.safetensors").is_file()
    assert DEFAULT_OUT == ROOT / "runs" / "demo"


def _command(index, **kw):
    entry = {"index": index, "split": "test_mixed", "command": f"command {index}", "has_result": True,
             "success": True, "error": "", "answer": "", "targets": [], "ground_truth": [],
             "missed_ground_truth": [], "problems": []}
    entry.update(kw)
    return entry


def test_results_table_shows_answers_targets_ious_and_problems():
    report = {"commands": [
        _command(0, answer="Press the remote_control_1's button.",
                 targets=[{"label": "remote_control_1's button", "iou": 0.8125, "score": 0.9, "matched_gt": 0}],
                 ground_truth=["remote_control_1's button", "television_set_1's button"], missed_ground_truth=[1]),
        _command(1, success=False, error="no image yet: nothing received on /ns/image (waited 0.0 s)",
                 problems=["its image (stamp 5 ns) is not in the bag on /camera/image_raw before it"]),
        _command(2, has_result=False, success=False),
    ]}
    table = results_table(report)
    lines = table.splitlines()
    assert lines[0].startswith("#0") and "command 0" in lines[0]
    assert "-> Press the remote_control_1's button." in table
    assert "remote_control_1's button" in lines[2] and "IoU 0.81" in lines[2] and lines[2].startswith("        ")
    assert "missed: television_set_1's button" in table
    assert "-> error: no image yet" in table and "! its image (stamp 5 ns)" in table
    assert "-> NO RESULT" in table
    assert all(len(line) <= 120 for line in lines)


@pytest.mark.integration
@pytest.mark.ros
@pytest.mark.slow  # two demo runs, each starting the node: 20-45 s on 2 cores
def test_demo_end_to_end_small(tmp_path, capsys):
    out = tmp_path / "demo"
    code = main(["--out", str(out), "--images", "20", "--commands", "3", "--rate-factor", "10",
                 "--storage", "sqlite3"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    report = json.loads((out / "report.json").read_text())
    assert report["counts"]["commands"] == 3 and report["counts"]["commands_without_result"] == 0
    for cmd in report["commands"]:
        assert f"#{cmd['index']}" in printed and cmd["command"][:30] in printed
    assert "gIoU" in printed and "latency ms" in printed
    assert (out / "report.md").is_file() and (out / "overlays" / "contact_sheet.png").is_file()
    # The bag carries registered depth: the node fills every matched target's pose, and the
    # report gives the 3-D errors against the synthetic world's ground truth.
    geometry = report["geometry"]
    assert geometry["scored"] and geometry["problems"] == [] and geometry["artefacts"]["level"] == "mild"
    overall = geometry["splits"].get("all") or next(iter(geometry["splits"].values()))
    measured = [(c["index"], [(t["label"], t["has_centroid"], t["has_pose"]) for t in c["targets"]])
                for c in report["commands"]]
    depth_lines = [line for line in (out / "node.log").read_text().splitlines() if "depth" in line]
    assert overall["pairs"] >= 1 and overall["pose_share"] == 1.0, (measured, depth_lines[-10:])
    assert 0 <= overall["median_normal_deg"] < 20 and 0 <= overall["median_centroid_mm"] < 50
    assert "3-D (" in printed and "mm" in printed.split("3-D (")[1].splitlines()[0]
    md = (out / "report.md").read_text()
    assert "## 3-D geometry" in md and "| split | pairs | with pose | centroid (mm) |" in md
    assert len(list((out / "overlays").glob("cmd_*.png"))) == 3
    # A second run starts clean instead of failing on the previous outputs.
    assert main(["--out", str(out), "--images", "20", "--commands", "1", "--rate-factor", "10"]) == 0
    assert json.loads((out / "report.json").read_text())["counts"]["commands"] == 1
