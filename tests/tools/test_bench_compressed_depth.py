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

"""bench/bench_compressed_depth.py runs and reports what RESULTS.md shows (no timing is asserted)."""

from __future__ import annotations

import json

from bench import bench_compressed_depth as bench


def test_one_scene_report(tmp_path, capsys):
    out = tmp_path / "cd.json"
    assert bench.main(["--scenes", "1", "--repeats", "1", "--no-write", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert set(rows) == {"16UC1 png", "16UC1 rvl", "32FC1 png", "32FC1 rvl"}
    for name, row in rows.items():
        assert row["decode_ms"][0] > 0 and 0 < row["kib"] < row["raw_kib"], name
    assert rows["16UC1 png"]["max_error_mm"] == rows["16UC1 rvl"]["max_error_mm"] == 0.0  # lossless
    assert 0 < rows["32FC1 png"]["max_error_mm"] == rows["32FC1 rvl"]["max_error_mm"] < 1.0  # one quantisation
    text = capsys.readouterr().out
    assert "command: `python bench/bench_compressed_depth.py --scenes 1" in text and "| 16UC1 png |" in text
