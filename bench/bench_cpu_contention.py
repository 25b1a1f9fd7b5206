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
Inference latency when other processes keep every core busy, by torch thread count.

A robot's computer runs the perception node beside its drivers and planners. This script
measures what that costs one command of the model: the same commands on the same frame,
with the cores idle and then with ``--load`` processes spinning beside it, for one torch
thread (the node's ``cpu_threads`` default), for one per core (torch's own default), and
for one per core with ``OMP_WAIT_POLICY=PASSIVE`` (OpenMP threads that sleep at once at
a barrier instead of spinning first). With several threads every operation ends at a
barrier where the threads wait for each other; when another process holds the core of
the one being waited for, the command stalls. Each combination runs in a fresh process
(the OpenMP runtime reads its policy once, when torch loads). Figures are ratios within
one run.

    .venv/bin/python bench/bench_cpu_contention.py
    .venv/bin/python bench/bench_cpu_contention.py --load 4 --commands 12 --no-write
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from contextlib import contextmanager
import datetime as dt
import json
import os
from pathlib import Path
import subprocess
import sys
import time

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.common import (  # noqa: E402
    command_line,
    COMMANDS,
    host_line,
    publish_report,
    RESULTS,
    RESULTS_HEADER,
    SHIPPED_MODEL,
)
from m2sa_ros.bag.scoring import percentiles  # noqa: E402 - the latency percentiles every report uses

# (name, torch threads (0 = torch's default), OMP_WAIT_POLICY or None for the runtime's default)
CONFIGS = (("1 thread (the node's default)", 1, None), ("one per core", 0, None),
           ("one per core, OMP_WAIT_POLICY=PASSIVE", 0, "PASSIVE"))


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--load", type=int, default=(os.cpu_count() or 2) + 1,
                   help="busy processes beside the model in the loaded runs (default: one more than the cores)")
    p.add_argument("--commands", type=int, default=8, help="timed commands per run (default 8)")
    p.add_argument("--threads", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--model", default=None, help="checkpoint directory (default: the shipped model)")
    p.add_argument("--results", type=Path, default=RESULTS, help="markdown file to append to")
    p.add_argument("--no-write", action="store_true", help="print only")
    p.add_argument("--json", default=None, help="also write the report as JSON here")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def worker(args: argparse.Namespace) -> None:
    """One run: load the model, answer the commands on one frame, print the milliseconds as JSON."""
    from m2sa_core.inference import Segmenter
    from m2sa_core.model.batch import toy_example
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    segmenter = Segmenter.from_pretrained(args.model, device="cpu")
    image = toy_example(0, size=(480, 640)).image
    segmenter.segment(image, COMMANDS[0])  # warm-up: first-call allocations are not the steady state
    ms = []
    for i in range(args.commands):
        start = time.perf_counter()
        segmenter.segment(image, COMMANDS[i % len(COMMANDS)])
        ms.append(1000.0 * (time.perf_counter() - start))
    print(json.dumps({"ms": ms, "threads": torch.get_num_threads()}))


@contextmanager
def busy_processes(n: int):
    """``n`` processes that each keep one core busy, as a robot's other work would."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        time.sleep(0.5)
        yield
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait()


def timed_run(args: argparse.Namespace, threads: int, policy: str | None, load: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if policy is not None:
        env["OMP_WAIT_POLICY"] = policy
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--model", args.model,
           "--commands", str(args.commands), "--threads", str(threads)]
    with busy_processes(load):
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=REPO)
    if proc.returncode != 0:
        raise SystemExit(f"bench_cpu_contention: worker failed: {proc.stderr.strip().splitlines()[-1:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    stats = percentiles(out["ms"])
    return {"load": load, "threads": out["threads"], "ms": out["ms"], "p50": stats["p50"], "p90": stats["p90"],
            "max": stats["max"]}


def loads(report_load: int) -> tuple[int, ...]:
    """Return the busy-process counts measured: idle, then ``--load`` (idle once with ``--load 0``)."""
    return (0,) if report_load == 0 else (0, report_load)


def run(args: argparse.Namespace) -> dict:
    runs = {}
    for name, threads, policy in CONFIGS:
        for load in loads(args.load):
            print(f"[bench_cpu_contention] {name}, {load} busy processes ...", flush=True)
            runs[f"{name}|{load}"] = timed_run(args, threads, policy, load)
    return {"model": args.model, "commands": args.commands, "load": args.load, "runs": runs}


def to_markdown(report: dict, command: str) -> str:
    runs, load = report["runs"], report["load"]
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"## bench_cpu_contention: {Path(report['model']).name} on cpu, idle vs {load} busy processes",
        "",
        f"- date: {now}; machine: {host_line()}",
        f"- command: `{command}`",
        f"- {report['commands']} commands per run, one 480x640 frame, the shipped commands; each run a fresh process",
        "",
        "| torch threads | busy processes | p50 ms | p90 ms | max ms | p50 against one thread |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for n in loads(load):
        one = runs[f"{CONFIGS[0][0]}|{n}"]["p50"]
        for name, _, _ in CONFIGS:
            r = runs[f"{name}|{n}"]
            lines.append(f"| {name} ({r['threads']}) | {n} | {r['p50']:.0f} | {r['p90']:.0f} | {r['max']:.0f} "
                         f"| {r['p50'] / one:.2f}x |")
    return "\n".join(lines + [""])


def main(argv: Sequence[str] | None = None) -> dict | None:
    args = parse_args(argv)
    args.model = args.model or str(SHIPPED_MODEL)
    if args.worker:
        worker(args)
        return None
    report = run(args)
    publish_report(to_markdown(report, command_line(argv, "bench_cpu_contention.py")), report, args.results,
                   not args.no_write, args.json, header=RESULTS_HEADER)
    return report


if __name__ == "__main__":
    main()
