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

"""bench/bench_train_step.py: a stage config's step, split into building the batch and the model's work."""

from __future__ import annotations

import json

from bench.bench_train_step import main


def test_the_benchmark_times_both_sides_of_a_stage_one_step(tmp_path, config_on_small_world):
    config, _ = config_on_small_world("training/tiny/1_sam.yaml", 40)
    out = tmp_path / "report.json"
    results = tmp_path / "RESULTS.md"
    assert main(["--config", str(config), "--steps", "2", "--warmup", "1", "--threads", "1", "--profile", "1",
                 "--no-write", "--json", str(out), "optim.batch_size=2", "prompt_regions=2",
                 "model.tokenizer_vocab_size=600"]) == 0
    report = json.loads(out.read_text())
    assert report["data_s"] > 0 and report["compute_s"] > 0
    assert report["batch_size"] == 2 and report["steps"] == 2
    assert not results.exists()  # --no-write leaves the results file alone
