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

    # Idle only (--load 0): each set-up is still a fresh process with the threads it names;
    # the busy processes beside it are checked on their own below, a model load cheaper.
    results = tmp_path / "RESULTS.md"
    report = bench_cpu_contention.main(["--commands", "1", "--load", "0", "--results", str(results)])
    runs = report["runs"]
    assert len(runs) == len(bench_cpu_contention.CONFIGS)
    assert {r["load"] for r in runs.values()} == {0}
    assert all(len(r["ms"]) == 1 and r["p50"] > 0 for r in runs.values())
    one_thread = bench_cpu_contention.CONFIGS[0][0]
    assert runs[f"{one_thread}|0"]["threads"] == 1
    text = results.read_text()
    assert "bench_cpu_contention: m2sa-tiny-synth on cpu, idle vs 0 busy processes" in text
    assert text.count("| 1 thread (the node's default) (1) |") == 1


@pytest.mark.integration
def test_cpu_contention_busy_processes_run_while_held_and_are_gone_after():
    import psutil

    from bench import bench_cpu_contention

    with bench_cpu_contention.busy_processes(2):
        busy = [p for p in psutil.Process().children() if p.cmdline()[-1:] == ["while True: pass"]]
        assert len(busy) == 2 and all(p.is_running() for p in busy)
    assert all(not p.is_running() or p.status() == psutil.STATUS_ZOMBIE for p in busy)


def test_cpu_contention_report_has_a_row_per_set_up_and_load_against_one_thread():
    from bench import bench_cpu_contention

    names = [name for name, _, _ in bench_cpu_contention.CONFIGS]
    runs = {f"{name}|{load}": {"threads": 1 if i == 0 else 2, "p50": 100.0 * (i + 1) * (1 + load),
                               "p90": 1.0, "max": 1.0}
            for i, name in enumerate(names) for load in (0, 3)}
    text = bench_cpu_contention.to_markdown({"model": "/m/tiny", "commands": 1, "load": 3, "runs": runs}, "cmd")
    rows = [line for line in text.splitlines() if line.startswith("| ") and "busy processes |" not in line]
    assert len(rows) == 2 * len(names)
    assert rows[0].startswith(f"| {names[0]} (1) | 0 | 100 |") and rows[0].endswith("| 1.00x |")
    assert rows[1].startswith(f"| {names[1]} (2) | 0 | 200 |") and rows[1].endswith("| 2.00x |")
    assert rows[len(names)].startswith(f"| {names[0]} (1) | 3 | 400 |")
