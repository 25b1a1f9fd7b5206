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
Soak: 10,000 commands through the perception node under a 30 Hz camera stream.

What a robot running for days relies on, measured on the real node process over
loopback DDS (same harness as bench_node.py):

* every command gets exactly one result: lost and duplicated are both counted (must be 0);
* memory does not creep: node RSS after warm-up grows by less than 5 %;
* no thread or file-descriptor leak: counts after warm-up stay where they were.

Commands go out closed-loop (at most ``--window`` without a result, so the node is always
busy but its queue never overflows), each text unique so results match commands; every
``--error-every``-th command is over the node's length limit, so the error path is
soaked too. ``--max-minutes`` stops sending early (the report then says how many
commands ran, so a partial soak is never mistaken for a full one).

Not a test: figures go to stdout and, unless ``--no-write``, to bench/RESULTS.md.

    nice -n 10 .venv/bin/python bench/soak_node.py                 # 10,000 commands
    .venv/bin/python bench/soak_node.py --quick --no-write          # what the test runs
"""

from __future__ import annotations

import argparse
from pathlib import Path
import statistics
import sys
import time
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench import node_load as load  # noqa: E402
from bench.common import COMMANDS, RESULTS  # noqa: E402

MAX_COMMAND_LENGTH = 200  # node parameter; the over-long commands exceed it
RSS_LIMIT_PCT = 5.0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.strip().split("\n\n")[0])
    p.add_argument("--commands", type=int, default=10_000, help="commands to send (default 10000)")
    p.add_argument("--window", type=int, default=2, help="commands in flight at most (default 2)")
    p.add_argument("--error-every", type=int, default=50,
                   help="every Nth command is over-long and must get an error result (0 = never)")
    p.add_argument("--fps", type=float, default=30.0)
    p.add_argument("--width", type=int, default=640)
    p.add_argument("--height", type=int, default=480)
    p.add_argument("--max-new-tokens", type=int, default=8)
    p.add_argument("--model-path", default=None, help="checkpoint directory (default: shipped model, else tiny)")
    p.add_argument("--warmup", type=float, default=0.05,
                   help="fraction of the commands (at least 50) before memory is measured (default 0.05)")
    p.add_argument("--sample-period", type=float, default=2.0)
    p.add_argument("--max-minutes", type=float, default=0.0, help="stop sending after this long (0 = no limit)")
    p.add_argument("--startup-timeout", type=float, default=180.0)
    p.add_argument("--result-timeout", type=float, default=120.0,
                   help="seconds a command may go without its result before the soak gives up waiting")
    p.add_argument("--quick", action="store_true", help="30 commands on a 160x120 stream: the test suite's run")
    p.add_argument("--results", type=Path, default=RESULTS)
    p.add_argument("--no-write", action="store_true")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--log-dir", default=None)
    args = p.parse_args(argv)
    if args.quick:
        args.commands, args.width, args.height, args.max_new_tokens = 30, 160, 120, 2
        args.sample_period, args.error_every = 0.25, 5
    for name in ("commands", "window", "width", "height", "max_new_tokens"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.error_every < 0 or not 0.0 <= args.warmup < 1.0:
        p.error("--error-every must be >= 0 and --warmup in [0, 1)")
    return args


def command_text(i: int, error_every: int) -> tuple[str, bool]:
    """Return the i-th command (unique text) and whether it must fail (over the length limit)."""
    if error_every and (i + 1) % error_every == 0:
        return f"soak {i}: " + "too long " * (MAX_COMMAND_LENGTH // 9 + 1), True
    return f"soak {i}: {COMMANDS[i % len(COMMANDS)]}", False


def stability(samples: list[load.Sample], warm_results: int) -> dict[str, Any]:
    """
    RSS growth and thread/fd drift between just after warm-up and the end.

    Both ends are medians over a tenth of the post-warm-up samples (at least 3), so one
    sample taken mid-inference does not decide the verdict.
    """
    after = [s for s in samples if s.results >= warm_results] or samples[-1:]
    k = max(3, len(after) // 10)
    head, tail = after[:k], after[-k:]
    base = statistics.median(s.rss_mib for s in head)
    end = statistics.median(s.rss_mib for s in tail)
    return {
        "samples_after_warmup": len(after),
        "rss_after_warmup_mib": base,
        "rss_end_mib": end,
        "rss_max_mib": max(s.rss_mib for s in after),
        "rss_growth_pct": (end - base) / base * 100.0,
        "threads_after_warmup": statistics.median(s.threads for s in head),
        "threads_end": statistics.median(s.threads for s in tail),
        "threads_range": (min(s.threads for s in after), max(s.threads for s in after)),
        "fds_after_warmup": statistics.median(s.fds for s in head),
        "fds_end": statistics.median(s.fds for s in tail),
        "fds_range": (min(s.fds for s in after), max(s.fds for s in after)),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    load.isolated_dds_env()
    model_params, model_line = load.choose_model(args.model_path)
    params = {**model_params, "max_new_tokens": args.max_new_tokens, "max_queue": max(args.window, 1),
              "max_command_length": MAX_COMMAND_LENGTH, "wait_for_image": 5.0, "device": "cpu"}
    log_path = load.log_dir(args.log_dir) / "soak_node.log"
    expected_errors = 0
    stalled = ""
    sent = 0
    with load.node_under_load(params, log_path, args.width, args.height, args.fps) as (node, robot):
        robot.wait_for_node(node, args.startup_timeout)
        robot.start_camera()
        robot.wait_until_answering(node, args.startup_timeout)
        sampler = load.ProcessSampler(node.pid, args.sample_period, lambda: robot.results_received).start()
        t0 = time.monotonic()
        deadline = t0 + args.max_minutes * 60.0 if args.max_minutes > 0 else float("inf")
        report_every = max(1, args.commands // 20)
        for i in range(args.commands):
            if time.monotonic() > deadline:
                break
            if not robot.wait_outstanding(args.window - 1, args.result_timeout):
                stalled = f"no result for {args.result_timeout:.0f} s after command {i}"
                break
            if not node.alive():
                stalled = f"the node died after command {i}"
                break
            text, must_fail = command_text(i, args.error_every)
            robot.send(text)
            sent += 1
            expected_errors += must_fail
            if sent % report_every == 0:
                elapsed = time.monotonic() - t0
                rss = sampler.samples[-1].rss_mib if sampler.samples else float("nan")
                print(f"[soak] {sent}/{args.commands} commands, {robot.results_received} results, "
                      f"{elapsed / 60:.1f} min, node RSS {rss:.0f} MiB", flush=True)
        robot.wait_outstanding(0, args.result_timeout)
        time.sleep(1.0)
        duration = time.monotonic() - t0
        sampler.stop()
        alive = node.alive()
        summary = load.summarise(robot)
    warm = max(50, int(args.warmup * sent)) if sent > 100 else max(1, sent // 5)
    report = {
        "model": model_line,
        "revision": load.git_revision(),
        "params": params,
        "stream": f"{args.width}x{args.height} rgb8 at {args.fps:g} Hz",
        "requested": args.commands,
        "sent": sent,
        "complete": sent == args.commands and not stalled,
        "stalled": stalled,
        "expected_error_results": expected_errors,
        "duration_s": duration,
        "warmup_commands": warm,
        "node_alive_at_end": alive,
        "node_exit_code": node.exit_code,
        "node_log": str(node.log_path),
        **summary,
        **stability(sampler.samples, warm),
    }
    errors = report["errors"]
    report["unexpected_errors"] = sum(errors.values()) - errors.get("command too long", 0)
    report["passed"] = (report["lost"] == 0 and report["duplicated"] == 0 and alive
                        and errors.get("command too long", 0) == expected_errors
                        and report["unexpected_errors"] == 0
                        and report["rss_growth_pct"] < RSS_LIMIT_PCT
                        and report["threads_end"] <= report["threads_after_warmup"]
                        and report["fds_end"] <= report["fds_after_warmup"])
    return report


def markdown(report: dict[str, Any], cmd: str) -> str:
    lat = report["latency_ms"]
    errors = load.error_counts(report)
    scope = ("all requested commands" if report["complete"] else
             f"**partial: {report['sent']} of {report['requested']} commands** "
             f"({report['stalled'] or 'stopped by --max-minutes'})")
    return "\n".join([
        f"## soak_node: {report['sent']} commands, {report['stream']}",
        "",
        *load.context_lines(report, cmd),
        f"- scope: {scope}; duration {report['duration_s'] / 60:.1f} min",
        f"- results {report['results']} for {report['commands']} commands: **lost {report['lost']}, "
        f"duplicated {report['duplicated']}**; succeeded {report['succeeded']}; error results: {errors} "
        f"(expected over-long: {report['expected_error_results']})",
        f"- latency publish -> result (successful), ms: p50 {lat['p50']:.0f}, p95 {lat['p95']:.0f}, "
        f"p99 {lat['p99']:.0f}, max {lat['max']:.0f}",
        f"- images published {report['images_published']}, dropped by keep-latest "
        f"{report['images_dropped_keep_latest']} (expected)",
        f"- node RSS after warm-up ({report['warmup_commands']} commands) {report['rss_after_warmup_mib']:.1f} MiB, "
        f"at the end {report['rss_end_mib']:.1f} MiB: **growth {report['rss_growth_pct']:+.2f} %** "
        f"(limit {RSS_LIMIT_PCT:g} %); max {report['rss_max_mib']:.1f} MiB",
        f"- threads after warm-up {report['threads_after_warmup']:g}, at the end {report['threads_end']:g} "
        f"(range {report['threads_range'][0]}-{report['threads_range'][1]}); fds {report['fds_after_warmup']:g} -> "
        f"{report['fds_end']:g} (range {report['fds_range'][0]}-{report['fds_range'][1]})",
        f"- verdict: {'PASS' if report['passed'] else 'FAIL'}",
    ])


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    report = run(args)
    text = markdown(report, load.command_line(argv, "soak_node.py"))
    load.publish(text, report, args.results, write=not args.no_write, json_path=args.json)
    return report


if __name__ == "__main__":
    sys.exit(0 if main()["passed"] else 1)
