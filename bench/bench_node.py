#!/usr/bin/env python3

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
The perception node under a robot's load: latency from command publish to result receipt.

The node runs as its own process (``m2sa-perception``) on loopback DDS; this script
publishes a 640x480 rgb8 camera stream at 30 Hz and commands at a fixed rate (2/s) for a
fixed number of commands, and reports:

* latency percentiles, command publish -> result receipt (successful commands);
* images dropped by keep-latest (expected: the node keeps only the newest frame) versus
  commands without a result (must be 0) and duplicated results (must be 0);
* the node's RSS, threads and fds sampled over time;
* which model ran: the shipped ``models/m2sa-tiny-synth`` when present, else preset
  tiny with random weights (said in the output, because its answers always run to
  ``max_new_tokens``).

Not a test: figures go to stdout and, unless ``--no-write``, to bench/RESULTS.md with the
machine, date and command. ``--quick`` is the small run the test suite does.

    .venv/bin/python bench/bench_node.py
    .venv/bin/python bench/bench_node.py --commands 200 --max-new-tokens 32
    .venv/bin/python bench/bench_node.py --quick --no-write
"""

from __future__ import annotations

import argparse
from pathlib import Path
import sys
import time
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench import node_load as load  # noqa: E402
from bench.common import COMMANDS, RESULTS  # noqa: E402

COMMAND = COMMANDS[0]  # one command at a fixed rate: latency, not content, is measured


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.strip().split("\n\n")[0])
    p.add_argument("--commands", type=int, default=60, help="commands to send (default 60)")
    p.add_argument("--rate", type=float, default=2.0, help="commands per second (default 2)")
    p.add_argument("--fps", type=float, default=30.0, help="camera frames per second (default 30)")
    p.add_argument("--clock-hz", type=float, default=0.0,
                   help="simulated time: the robot publishes /clock at this rate and the node runs with "
                        "use_sim_time (a simulator's /clock is often 1000 Hz; default 0: wall time)")
    p.add_argument("--width", type=int, default=640)
    p.add_argument("--height", type=int, default=480)
    p.add_argument("--max-new-tokens", type=int, default=16,
                   help="node parameter max_new_tokens (random weights always use all of them)")
    p.add_argument("--max-queue", type=int, default=4, help="node parameter max_queue")
    p.add_argument("--model-path", default=None, help="checkpoint directory (default: shipped model, else tiny)")
    p.add_argument("--sample-period", type=float, default=0.5, help="seconds between RSS samples")
    p.add_argument("--startup-timeout", type=float, default=180.0)
    p.add_argument("--result-timeout", type=float, default=120.0,
                   help="seconds to wait for the last results after the last command")
    p.add_argument("--quick", action="store_true",
                   help="6 commands on a 160x120 stream, 4 new tokens: the test suite's run")
    p.add_argument("--results", type=Path, default=RESULTS, help="markdown file to append to")
    p.add_argument("--no-write", action="store_true", help="print only")
    p.add_argument("--json", type=Path, default=None, help="also write the report as JSON here")
    p.add_argument("--log-dir", default=None, help="where the node's log goes (default: a temp dir)")
    args = p.parse_args(argv)
    if args.quick:
        args.commands, args.width, args.height, args.max_new_tokens = 6, 160, 120, 4
    for name in ("commands", "width", "height", "max_new_tokens", "max_queue"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.rate <= 0 or args.fps <= 0 or args.clock_hz < 0:
        p.error("--rate and --fps must be > 0, --clock-hz >= 0")
    return args


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Start the node, drive it, stop it; the report dict."""
    load.isolated_dds_env()
    model_params, model_line = load.choose_model(args.model_path)
    params = {**model_params, "max_new_tokens": args.max_new_tokens, "max_queue": args.max_queue,
              "wait_for_image": 5.0, "device": "cpu"}
    if args.clock_hz:
        params["use_sim_time"] = True
    log_path = load.log_dir(args.log_dir) / "bench_node.log"
    with load.node_under_load(params, log_path, args.width, args.height, args.fps,
                              clock_hz=args.clock_hz) as (node, robot):
        started = time.monotonic()
        robot.wait_for_node(node, args.startup_timeout)
        startup_s = time.monotonic() - started
        robot.start_camera()
        # The stream is running and the node answers from it before the first measured command.
        robot.wait_until_answering(node, args.startup_timeout)
        sampler = load.ProcessSampler(node.pid, args.sample_period, lambda: robot.results_received).start()
        t0 = time.monotonic()
        for i in range(args.commands):
            delay = t0 + i / args.rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            robot.send(f"bench {i}: {COMMAND}")
        send_s = time.monotonic() - t0
        robot.wait_outstanding(0, args.result_timeout)
        time.sleep(1.0)  # a duplicated result would arrive now
        sampler.stop()
        alive = node.alive()
        summary = load.summarise(robot)
    rss = [s.rss_mib for s in sampler.samples]
    return {
        "model": model_line,
        "revision": load.git_revision(),
        "params": params,
        "stream": f"{args.width}x{args.height} rgb8 at {args.fps:g} Hz"
                  + (f", simulated time (/clock at {args.clock_hz:g} Hz)" if args.clock_hz else ""),
        "command_rate_hz": args.rate,
        "node_startup_s": startup_s,
        "send_duration_s": send_s,
        "node_alive_at_end": alive,
        "node_exit_code": node.exit_code,
        "rss_mib": {"first": rss[0], "last": rss[-1], "max": max(rss), "min": min(rss)},
        "threads": {"first": sampler.samples[0].threads, "last": sampler.samples[-1].threads,
                    "max": max(s.threads for s in sampler.samples)},
        "fds": {"first": sampler.samples[0].fds, "last": sampler.samples[-1].fds,
                "max": max(s.fds for s in sampler.samples)},
        "rss_samples": [(round(s.t, 2), round(s.rss_mib, 1)) for s in sampler.samples],
        "node_log": str(node.log_path),
        **summary,
    }


def markdown(report: dict[str, Any], cmd: str) -> str:
    lat = report["latency_ms"]
    errors = load.error_counts(report)
    rss = report["rss_mib"]
    every = max(1, len(report["rss_samples"]) // 12)
    series = ", ".join(f"{t:.0f}s {m:.0f}" for t, m in report["rss_samples"][::every])
    return "\n".join([
        f"## bench_node: perception node on loopback DDS, {report['stream']}, "
        f"{report['command_rate_hz']:g} commands/s",
        "",
        *load.context_lines(report, cmd),
        f"- commands {report['commands']}, results {report['results']}, **without a result "
        f"{report['lost']}**, duplicated {report['duplicated']}; succeeded {report['succeeded']}, "
        f"error results: {errors}",
        f"- latency publish -> result (successful commands), ms: p50 {lat['p50']:.0f}, p90 {lat['p90']:.0f}, "
        f"p95 {lat['p95']:.0f}, p99 {lat['p99']:.0f}, max {lat['max']:.0f}",
        f"- images published {report['images_published']}, used by a command {report['frames_used']}, "
        f"dropped by keep-latest {report['images_dropped_keep_latest']} (expected: only the newest frame is kept)",
        f"- node RSS MiB: first {rss['first']:.0f}, last {rss['last']:.0f}, max {rss['max']:.0f}; "
        f"threads {report['threads']['first']} -> {report['threads']['last']}; "
        f"fds {report['fds']['first']} -> {report['fds']['last']}",
        f"- RSS over time (s MiB): {series}",
        f"- node start-up to active: {report['node_startup_s']:.1f} s",
    ])


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    report = run(args)
    text = markdown(report, load.command_line(argv, "bench_node.py"))
    load.publish(text, report, args.results, write=not args.no_write, json_path=args.json)
    return report


if __name__ == "__main__":
    rep = main()
    sys.exit(0 if rep["lost"] == 0 and rep["duplicated"] == 0 and rep["node_alive_at_end"] else 1)
