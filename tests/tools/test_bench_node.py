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
bench/bench_node.py and bench/soak_node.py run (quick mode) and count correctly.

No timed assertions: the figures belong in bench/RESULTS.md. What is checked is what a
reader of those figures relies on: every command sent is counted, its single result is
matched to it, and a lost or duplicated result would be reported as such.
"""

from __future__ import annotations

from pathlib import Path
import threading
import types

from bench import node_load
import pytest

ROOT = Path(__file__).resolve().parents[2]


def _fake_robot(outcomes: dict, images: int = 10, unknown: int = 0):
    return types.SimpleNamespace(lock=threading.Condition(), outcomes=outcomes, unknown_results=unknown,
                                 images_published=images)


def test_summary_reports_lost_duplicated_and_keep_latest_drops():
    Outcome = node_load.Outcome
    outcomes = {
        "a": Outcome(sent_at=1.0, results=[(1.5, True, "", 100, 2)]),
        "b": Outcome(sent_at=2.0, results=[(2.1, False, "queue full: 4 commands already waiting", 100, 0)]),
        "c": Outcome(sent_at=3.0, results=[(3.2, True, "", 200, 1), (3.3, True, "", 200, 1)]),
        "d": Outcome(sent_at=4.0),
    }
    s = node_load.summarise(_fake_robot(outcomes, images=10, unknown=1))
    assert (s["commands"], s["results"], s["lost"], s["duplicated"]) == (4, 4, 1, 1)
    assert s["lost_examples"] == ["d"] and s["duplicated_examples"] == ["c"]
    assert s["succeeded"] == 2 and s["errors"] == {"queue full": 1} and s["unknown_results"] == 1
    assert s["latency_ms"]["p50"] == pytest.approx(350.0)  # 500 ms and 200 ms (first result of c)
    assert s["frames_used"] == 2 and s["images_dropped_keep_latest"] == 8
    assert s["targets_total"] == 3


def test_soak_stability_uses_post_warmup_medians():
    from bench import soak_node

    S = node_load.Sample
    samples = [S(t, 100.0, 30, 18, r) for t, r in enumerate(range(0, 5))]  # warm-up: ignored
    samples += [S(10 + t, 200.0 + t * 0.1, 31, 19, 10 + t) for t in range(40)]
    st = soak_node.stability(samples, warm_results=10)
    assert st["samples_after_warmup"] == 40
    assert st["rss_after_warmup_mib"] == pytest.approx(200.15)
    assert st["rss_end_mib"] == pytest.approx(203.75)
    assert st["rss_growth_pct"] == pytest.approx((203.75 - 200.15) / 200.15 * 100)
    assert (st["threads_after_warmup"], st["threads_end"], st["fds_range"]) == (31, 31, (19, 19))


@pytest.mark.integration
@pytest.mark.ros
@pytest.mark.slow
def test_bench_node_quick_runs_and_every_command_has_one_result(tmp_path):
    from bench import bench_node

    results = tmp_path / "RESULTS.md"
    report = bench_node.main(["--quick", "--results", str(results), "--log-dir", str(tmp_path)])
    assert report["commands"] == 6 and report["results"] == 6
    assert report["lost"] == 0 and report["duplicated"] == 0 and report["unknown_results"] == 0
    assert report["succeeded"] + sum(report["errors"].values()) == 6
    assert report["node_alive_at_end"] and report["node_exit_code"] == 0
    assert report["images_published"] > 0 and report["frames_used"] >= 1
    assert report["rss_mib"]["max"] > 0 and report["threads"]["first"] > 0
    text = results.read_text()
    assert "bench_node: perception node on loopback DDS, 160x120" in text
    assert "--quick" in text and "without a result 0" in text and report["model"] in text


@pytest.mark.integration
@pytest.mark.ros
@pytest.mark.slow
def test_bench_node_on_simulated_time_answers_every_command(tmp_path):
    """
    With --clock-hz the robot publishes /clock and the node runs on it, as under a simulator.

    There a 5 ms GIL switch interval once stalled every command for seconds.
    """
    from bench import bench_node

    # A queue as long as the run (6 commands): on a loaded CI core the answers can fall behind
    # the 2 commands/s and a "queue full" would say nothing about the simulated clock.
    report = bench_node.main(["--quick", "--clock-hz", "100", "--max-queue", "6", "--no-write",
                              "--log-dir", str(tmp_path)])
    assert report["params"]["use_sim_time"] is True and "/clock at 100 Hz" in report["stream"]
    assert report["results"] == 6 and report["lost"] == 0 and report["duplicated"] == 0
    assert report["succeeded"] == 6, report["errors"]  # frames stamped on the simulated clock pass the age check
    assert report["node_alive_at_end"] and report["node_exit_code"] == 0


@pytest.mark.integration
@pytest.mark.ros
@pytest.mark.slow
def test_soak_quick_counts_lost_duplicated_and_expected_errors(tmp_path):
    from bench import soak_node

    results = tmp_path / "RESULTS.md"
    report = soak_node.main(["--quick", "--results", str(results), "--log-dir", str(tmp_path)])
    assert report["complete"] and report["sent"] == 30 == report["commands"] == report["results"]
    assert report["lost"] == 0 and report["duplicated"] == 0
    assert report["expected_error_results"] == 6
    assert report["errors"].get("command too long") == 6, report["errors"]
    assert report["succeeded"] == 24
    assert report["threads_end"] > 0 and report["fds_end"] > 0
    assert "soak_node: 30 commands" in results.read_text()
