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

"""bench/common.py: the one way every benchmark appends its section to RESULTS.md."""

from __future__ import annotations

import json

from bench import node_load
from bench.common import append_results, publish_report, RESULTS_HEADER


def test_sections_are_appended_with_one_blank_line_between_them_whatever_came_before(tmp_path):
    results = tmp_path / "RESULTS.md"
    append_results(results, "## first\n\n- a\n", header=RESULTS_HEADER)
    append_results(results, "## second\n- b", header=RESULTS_HEADER)  # the header only starts a new file
    with results.open("a", encoding="utf-8") as fh:
        fh.write("a line added by hand, no newline")
    append_results(results, "\n\n## third\n", header=RESULTS_HEADER)
    assert results.read_text(encoding="utf-8") == (
        RESULTS_HEADER + "## first\n\n- a\n\n## second\n- b\na line added by hand, no newline\n\n## third\n")


def test_node_benchmarks_publish_through_the_same_function(tmp_path, capsys):
    """
    The node benchmarks and the in-process ones leave the same file and the same JSON.

    bench_node, soak_node and bench_multicamera publish through node_load.publish, the
    in-process benchmarks through publish_report.
    """
    import numpy as np

    report = {"p50_ms": np.float64(41.5), "log": tmp_path / "log"}
    for name, publish in (("a", node_load.publish), ("b", publish_report)):
        results, dump = tmp_path / f"{name}.md", tmp_path / f"{name}.json"
        results.write_text("# Benchmark results\n", encoding="utf-8")
        publish("## section\n- p50 41.5 ms", report, results, True, dump)
        assert results.read_text(encoding="utf-8") == "# Benchmark results\n\n## section\n- p50 41.5 ms\n"
        assert json.loads(dump.read_text()) == {"p50_ms": 41.5, "log": str(tmp_path / "log")}
    assert capsys.readouterr().out.count("## section") == 2
