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

"""bench/bench_refiner.py: the refiner's cost, timed against the same weights without it."""

from __future__ import annotations

import json

from bench.bench_refiner import main, SHIPPED_MODEL, without_refiner
from m2sa_core.inference import Segmenter
import torch


def test_the_plain_copy_keeps_the_weights_and_drops_only_the_refiner():
    refined = Segmenter.from_pretrained(SHIPPED_MODEL, decoder="dynamic")
    plain = without_refiner(refined)
    assert plain.model.refiner is None and refined.model.refiner is not None
    assert plain.model.config.sam.mask_grid_size * 2 == refined.model.config.sam.mask_grid_size
    ours = {k: v for k, v in refined.model.state_dict().items() if not k.startswith("refiner.")}
    assert ours.keys() == plain.model.state_dict().keys()
    assert all(torch.equal(v, plain.model.state_dict()[k]) for k, v in ours.items())


def test_the_benchmark_reports_both_models_per_target_count(tmp_path):
    out = tmp_path / "report.json"
    assert main(["--repeats", "1", "--targets", "1", "2", "--no-write", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [r["targets"] for r in rows] == [1, 2]
    assert all(r[k] > 0 for r in rows for k in ("encode_ms", "encode_plain_ms", "decode_ms", "decode_plain_ms"))
