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

"""bench/bench_result_bytes.py runs and reports what RESULTS.md shows (sizes only; no timing is asserted)."""

from __future__ import annotations

import json

from bench import bench_result_bytes as bench
import pytest

pytestmark = pytest.mark.ros  # the generated messages and rclpy's serializer


def test_the_report_compares_v4_and_v5_in_one_run(tmp_path, capsys):
    out = tmp_path / "bytes.json"
    assert bench.main(["--repeats", "1", "--no-write", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    exact = report["exact depth, visible"]
    # The scene the figures stand for: two ~480x570 boxes and two small parts, 3.69 MB of v4 masks.
    assert [w >= 470 and h >= 560 for w, h in report["boxes_wh"]] == [True, True, False, False]
    assert report["no depth, visible"]["result"]["v4"] > 4 * 1280 * 720
    for name in ("exact depth", "1 mm depth noise", "no depth"):
        for shape in ("visible", "amodal"):
            entry = report[f"{name}, {shape}"]
            result, tracked = entry["result"], entry["tracked_frame"]
            assert result["v5"] < result["v4"] < result["v5_full_frame_masks"]
            assert tracked["v4"] > 2 * result["v4"] and tracked["v5"] == result["v5"] + tracked["v5_feedback"]
            assert tracked["v5_feedback"] < 4096  # no masks, no points
            assert tracked["v4"] >= 10 * tracked["v5"]
    assert exact["result"]["v4"] >= 10 * exact["result"]["v5"] and exact["png_bytes"] < 4096
    assert report["labels_bytes"] > 2 * 1280 * 720
    text = capsys.readouterr().out
    assert "command: `python bench/bench_result_bytes.py --repeats 1" in text and "| tracked frame:" in text
