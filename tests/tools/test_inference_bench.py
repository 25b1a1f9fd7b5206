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

"""The inference benchmark runs (quick mode) and its two paths agree."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "bench_inference.py"


def test_quick_benchmark_runs_and_paths_agree(tmp_path):
    spec = importlib.util.spec_from_file_location("bench_inference", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    results = tmp_path / "RESULTS.md"
    profile = tmp_path / "profile.txt"
    report = bench.main(["--quick", "--results", str(results), "--profile", str(profile)])
    (row,) = report["scenarios"]
    assert row["agreement"]["token_agreement"] == 1.0
    assert row["agreement"]["mask_pixel_disagreement"] < 1e-3
    for key in ("sam_encode", "clip_encode", "prefill", "decode_per_token", "mask_decode", "postprocess"):
        assert key in row["ours_stages_ms"] and key in row["ref_stages_ms"]
    text = results.read_text()
    assert "bench_inference: preset tiny" in text and "--quick" in text
    assert "4 commands on one frame" in text
    assert report["profile"]["tokens"] == row["new_tokens"] and "Profiled generation" in text
    assert "Self CPU" in profile.read_text()  # the kernel table a tuner reads


@pytest.mark.slow
@pytest.mark.integration
def test_cpu_contention_benchmark_measures_every_set_up_with_the_threads_it_names(tmp_path):
    from bench import bench_cpu_contention

    results = tmp_path / "RESULTS.md"
    report = bench_cpu_contention.main(["--commands", "1", "--load", "1", "--results", str(results)])
    runs = report["runs"]
    assert len(runs) == 2 * len(bench_cpu_contention.CONFIGS)
    assert {r["load"] for r in runs.values()} == {0, 1}
    assert all(len(r["ms"]) == 1 and r["p50"] > 0 for r in runs.values())
    one_thread = bench_cpu_contention.CONFIGS[0][0]
    assert runs[f"{one_thread}|0"]["threads"] == 1 and runs[f"{one_thread}|1"]["threads"] == 1
    text = results.read_text()
    assert "bench_cpu_contention: m2sa-tiny-synth on cpu, idle vs 1 busy processes" in text
    assert text.count("| 1 thread (the node's default) (1) |") == 2
