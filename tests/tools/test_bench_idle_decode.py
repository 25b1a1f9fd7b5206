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

"""bench/bench_idle_decode.py: both image callbacks of a real node, measured block by block (no timing asserted)."""

from __future__ import annotations

import json

import pytest

pytestmark = [pytest.mark.ros, pytest.mark.integration]


def test_the_benchmark_times_both_paths_in_alternating_blocks_and_reports_their_ratio(tmp_path, capsys):
    from bench.bench_idle_decode import main

    out = tmp_path / "report.json"
    assert main(["--frames", "2", "--blocks", "2", "--no-write", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert set(report["ms_per_frame"]) == {"on arrival", "on demand"}
    assert all(len(blocks) == 2 and all(ms > 0 for ms in blocks) for blocks in report["ms_per_frame"].values())
    assert report["ratio"] == pytest.approx(report["median_ms"]["on demand"] / report["median_ms"]["on arrival"])
    assert "| on demand |" in capsys.readouterr().out
