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

"""bench/bench_frame_transform.py runs and reports what RESULTS.md shows (no timing is asserted)."""

from __future__ import annotations

import json

from bench import bench_frame_transform as bench
import pytest

pytestmark = pytest.mark.ros  # tf2_ros and the generated messages


def test_one_scene_report(tmp_path, capsys):
    out = tmp_path / "ft.json"
    assert bench.main(["--scenes", "1", "--repeats", "1", "--waits", "1", "--no-write", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    cost = report["cost"]
    assert cost["results"] == 1 and cost["targets"] > 0 and cost["points"] > 0
    assert all(ms[0] > 0 for ms in (cost["lookup_ms"], cost["move_ms"], cost["apply_ms"]))
    assert set(report["waits"]) == {"frame_transform", "tf2_ros lookup_transform"}
    for wait in report["waits"].values():
        assert wait["missing_overrun_ms"][0] > -1.0  # it waited the timeout out (no early give-up)
    sizes = report["sizes"]
    assert sizes["result_base_link"] < sizes["result_optical"] < sizes["result_transform_error"]
    assert sizes["merged_cloud"] > 16 * sizes["points"]
    text = capsys.readouterr().out
    assert "command: `python bench/bench_frame_transform.py --scenes 1" in text and "| frame_transform |" in text
