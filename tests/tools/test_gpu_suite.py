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
bench/gpu_suite.py on CPU at tiny size.

Every row of issue 78's table is in its JSON, each with a number or the reason it was skipped,
rows print as they finish, and the time budget skips rows.

Nothing here times anything: the figures are whatever the CPU gives; only their presence,
their form and the order of the output are checked.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
import subprocess
import sys

from bench.gpu_suite import ROW_NAMES
import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "gpu_suite.py"
TABLE_NAMES = (
    "decode_floor_ratio_7b", "decode_floor_ratio_13b", "cached_command_floor_ratio_7b",
    "cached_command_floor_ratio_13b", "reference_speedup_7b", "reference_speedup_13b", "int4_decode_vs_bf16_13b",
    "int4_peak_gb_13b", "track_vs_command_7b", "two_cameras_memory_7b", "two_cameras_throughput_7b",
    "sam_encode_ms_7b", "train_step_7b",
)


def run_suite(out: Path, *extra: str) -> list[str]:
    proc = subprocess.run([sys.executable, str(SCRIPT), "--tiny", "--device", "cpu", "--out", str(out), *extra],
                          cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin", "HOME": str(out.parent)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.splitlines()


@pytest.mark.integration
def test_every_row_of_the_table_has_a_number_or_a_reason_and_prints_as_it_finishes(tmp_path):
    out = tmp_path / "gpu.json"
    lines = run_suite(out)
    data = json.loads(out.read_text())
    assert set(TABLE_NAMES) == set(ROW_NAMES)
    measured = []
    for name in TABLE_NAMES:
        row = data[name]
        if "skipped" in row:
            assert isinstance(row["skipped"], str) and row["skipped"], name
        else:
            assert isinstance(row["value"], float) and math.isfinite(row["value"]) and row["value"] > 0, (name, row)
            measured.append(name)
    # On CPU only the CUDA-only rows and the one not built yet are skipped; the rest are real figures.
    assert data["int4_decode_vs_bf16_13b"]["skipped"].startswith("needs CUDA")
    assert data["int4_peak_gb_13b"]["skipped"].startswith("needs CUDA")
    assert len(measured) == len(TABLE_NAMES) - 3
    assert data["decode_floor_ratio_7b"]["floor_ms_per_token"] > 0
    assert set(data["cached_command_floor_ratio_7b"]) >= {"32_tokens", "96_tokens"}
    # One line per row, printed in the order measured and before the closing table.
    row_lines = [i for i, line in enumerate(lines) if line.split(" ")[0] in TABLE_NAMES]
    assert [lines[i].split(" ")[0] for i in row_lines] == sorted(data, key=lambda n: data[n].get("at_s", -1))[1:]
    table = lines.index(next(line for line in lines if line.startswith("## gpu_suite")))
    assert max(row_lines) < table
    assert sum(line.startswith("| `") for line in lines) == len(TABLE_NAMES)


def test_a_spent_budget_skips_the_remaining_rows_and_says_why(tmp_path, capsys):
    # In this process: with no budget no row builds a model, so the script's own start would be most of the test.
    from bench import gpu_suite

    out = tmp_path / "gpu.json"
    results = tmp_path / "RESULTS.md"
    gpu_suite.main(["--tiny", "--device", "cpu", "--out", str(out), "--budget-s", "0", "--append-results",
                    "--results", str(results)])
    lines = capsys.readouterr().out.splitlines()
    data = json.loads(out.read_text())
    for name in TABLE_NAMES:
        assert "skipped" in data[name], name
    budget_skips = [n for n in TABLE_NAMES if "time budget" in data[n]["skipped"]]
    assert len(budget_skips) == len(TABLE_NAMES) - 3  # the CUDA-only and not-built rows give their own reason
    assert any(line.startswith("decode_floor_ratio_7b") and "time budget" in line for line in lines)
    text = results.read_text()
    assert "- date:" in text and "- machine:" in text and "--budget-s 0" in text
