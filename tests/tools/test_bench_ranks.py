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

"""bench/bench_ranks.py: one training process against data-parallel ranks, by the real commands."""

from __future__ import annotations

import json
from pathlib import Path

from bench.bench_ranks import main, seconds_per_step
import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.integration
@pytest.mark.slow
def test_the_benchmark_runs_both_layouts_of_a_stage_and_reports_their_ratio(tmp_path, config_on_small_world):
    config, _ = config_on_small_world("training/tiny/1_sam.yaml", 40, replace={"batch_size: 8": "batch_size: 2"})
    out, results = tmp_path / "report.json", tmp_path / "RESULTS.md"
    # Four steps, each logged: steps 1-4 are the timed ones.
    assert main(["--config", str(config), "--steps", "4", "--warmup", "1", "--log-every", "1", "--repeats", "1",
                 "--threads", "2", "--no-write", "--json", str(out), "prompt_regions=2",
                 "model.tokenizer_vocab_size=600", "checkpoint_every=0"]) == 0
    report = json.loads(out.read_text())
    assert report["ranks"] == 2 and len(report["single_s"]) == len(report["ranked_s"]) == 1
    assert report["single_s"][0] > 0 and report["ranked_s"][0] > 0
    assert report["ratios"][0] == pytest.approx(report["ranked_s"][0] / report["single_s"][0])
    assert not results.exists()  # --no-write leaves the results file alone


def test_a_batch_the_ranks_cannot_split_is_refused_before_anything_trains(capsys):
    with pytest.raises(SystemExit):
        main(["--config", str(REPO / "training" / "tiny" / "1_sam.yaml"), "--ranks", "3", "--no-write"])
    assert "split the config's batch of 8" in capsys.readouterr().err


def test_seconds_a_step_come_from_the_logged_steps_after_the_warm_up(tmp_path):
    (tmp_path / "train_log.csv").write_text("step,loss,time\n10,1.0,100.0\n20,0.9,104.0\n30,0.8,109.0\n")
    assert seconds_per_step(tmp_path, warmup=20) == pytest.approx(0.5)
    assert seconds_per_step(tmp_path, warmup=0) == pytest.approx(0.45)
    with pytest.raises(SystemExit, match="no step after the warm-up"):
        seconds_per_step(tmp_path, warmup=30)
