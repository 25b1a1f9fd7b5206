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

"""bench/bench_target_geometry.py runs and reports what RESULTS.md shows (no timing is asserted)."""

from __future__ import annotations

import json

from bench import bench_target_geometry as bench


def test_one_scene_report_the_spill_grid_and_the_band_grid(tmp_path, capsys):
    out = tmp_path / "tg.json"
    assert bench.main(["--scenes", "1", "--repeats", "1", "--no-write", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert {(r["resolution"], r["level"]) for r in report["rows"]} == {
        (f"{w}x{h}", level) for w, h in bench.RESOLUTIONS for level in ("object", "part")}
    for row in report["rows"]:
        assert row["targets"] > 0 and row["cpu_ms_median"] > 0 and 0 < row["fit_share_median"]
        assert row["points_voxel"] <= row["points_voxel0"] and row["bytes_empty"] < row["bytes_voxel"]
    grid = report["spill"]["now"]
    assert set(grid) == {f"{w}x{h}" for w, h in bench.SPILL_SIZES}
    for shape in grid.values():
        assert shape["cases"] == 324 and shape["pose"] == 1.0
        assert shape["spilled_points"] == 0 and shape["wrong_poses"] == 0 and shape["normal_max"] < 2.0
    band = report["band"]
    assert band["pixels"] == 10800 and band["cost_ms"]["now"] > 0
    assert {(r["noise"], r["distance"]) for r in band["rows"]} == {
        *((noise, d) for noise in bench.BAND_NOISE for d in bench.BAND_DISTANCES), ("laptop", 2.13)}
    for row in band["rows"]:
        if row["noise"] in ("exact", "quiet", "laptop"):  # the other surface stays out at every range
            assert row["now"]["let_in"] == 0 and row["now"]["kept_min"] == 1.0 and row["now"]["normal_max"] < 1.0
    text = capsys.readouterr().out
    assert "command: `python bench/bench_target_geometry.py --scenes 1" in text and "| now | 160x10 |" in text
    assert "| laptop | 2.13 | 0 of 2400 |" in text
