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

r"""
One training process with every core against data-parallel ranks that share them out.

On a 2-core machine the staged pipeline (scripts/train_tiny.sh) spends its time in stage 1
and stage 3 steps, and one process with two torch threads leaves much of both cores idle:
a step is thousands of small ops, each split in two and joined again. Two ranks of one thread
each (``RANKS=2``: torchrun, gloo) run the same samples a step (training/mixture.py, slots)
with half the batch each, and join only once a step, in the gradient all-reduce. This script
runs the real commands, ``m2sa-train`` and ``torchrun -m training.train``, for a few hundred
steps of a stage config, alternating the two so that a noisy machine's drift falls on both,
and reads each run's seconds a step from its ``train_log.csv`` (steps after the warm-up).

    .venv/bin/python bench/bench_ranks.py --config training/tiny/1_sam.yaml
    .venv/bin/python bench/bench_ranks.py --config training/tiny/3_m2sa.yaml \
        model.init_from=models/m2sa-tiny-synth
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import os
from pathlib import Path
import statistics
import subprocess
import sys
import tempfile

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.common import command_line, host_line, publish_report, RESULTS, RESULTS_HEADER  # noqa: E402
from training.config import load_config  # noqa: E402


def seconds_per_step(out_dir: Path, warmup: int) -> float:
    """Mean wall seconds a step after ``warmup`` steps, from the run's own log."""
    rows = list(csv.DictReader((out_dir / "train_log.csv").open()))
    times = {int(row["step"]): float(row["time"]) for row in rows}
    first = min((step for step in times if step >= warmup), default=None)
    last = max(times)
    if first is None or last <= first:
        raise SystemExit(f"bench_ranks: {out_dir / 'train_log.csv'} logs no step after the warm-up ({warmup})")
    return (times[last] - times[first]) / (last - first)


def train(config: str, batch: int, ranks: int, steps: int, out_dir: Path, overrides: list[str], threads: int,
          log_every: int = 10) -> None:
    """
    Run ``steps`` steps of ``config`` (a step's batch ``batch``) as one process or as torchrun ranks.

    One process for ``ranks`` 1, else ``ranks`` torchrun ranks with ``batch / ranks`` each.
    """
    common = [f"out_dir={out_dir}", f"optim.max_steps={steps}", "eval_every=0", f"log_every={log_every}", *overrides]
    bin_dir = Path(sys.executable).parent
    if ranks == 1:
        command = [str(bin_dir / "m2sa-train"), "--config", config, *common]
        env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    else:
        command = [str(bin_dir / "torchrun"), "--standalone", "--nproc-per-node", str(ranks), "-m", "training.train",
                   "--config", config, *common, f"optim.batch_size={batch // ranks}"]
        env = {**os.environ, "OMP_NUM_THREADS": str(max(1, threads // ranks))}
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["(no output)"]
        raise SystemExit(f"bench_ranks: {' '.join(command[:2])} ... failed: {tail[0]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--config", default="training/tiny/1_sam.yaml")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="cores to share out (the pipeline's)")
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3, help="pairs of runs, alternating")
    parser.add_argument("--log-every", type=int, default=10,
                        help="steps between the logged times the figure is read from (fewer lines than steps)")
    parser.add_argument("--no-write", action="store_true", help="print only; do not append to bench/RESULTS.md")
    parser.add_argument("--json", default=None)
    parser.add_argument("overrides", nargs="*", help="key=value, as m2sa-train takes them")
    args = parser.parse_args(argv)
    batch = load_config(args.config, args.overrides).optim.batch_size
    if args.ranks < 2 or batch % args.ranks:
        parser.error(f"--ranks must be 2 or more and split the config's batch of {batch}")
    if args.log_every < 1:
        parser.error("--log-every must be 1 or more")
    if args.steps <= args.warmup + args.log_every:
        parser.error(f"--steps must exceed --warmup by more than one log interval ({args.log_every})")
    single, ranked = [], []
    with tempfile.TemporaryDirectory() as scratch:
        for repeat in range(args.repeats):
            for ranks, times in ((1, single), (args.ranks, ranked)):
                out_dir = Path(scratch) / f"r{repeat}_ranks{ranks}"
                train(args.config, batch, ranks, args.steps, out_dir, args.overrides, args.threads, args.log_every)
                times.append(seconds_per_step(out_dir, args.warmup))
                print(f"[bench_ranks] repeat {repeat + 1}: {ranks} rank(s) {times[-1]:.3f} s a step", flush=True)
    ratios = [r / s for s, r in zip(single, ranked)]
    report = {"config": args.config, "overrides": args.overrides, "ranks": args.ranks, "threads": args.threads,
              "steps": args.steps, "warmup": args.warmup, "single_s": single, "ranked_s": ranked, "ratios": ratios}
    rows = [f"| {i + 1} | {s:.3f} | {r:.3f} | {q:.2f} |" for i, (s, r, q) in enumerate(zip(single, ranked, ratios))]
    text = "\n".join([
        f"## bench_ranks: {args.config}, 1 process x {args.threads} threads against {args.ranks} ranks x "
        f"{max(1, args.threads // args.ranks)}",
        "",
        f"- date: {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC; machine: {host_line()}",
        f"- command: `{command_line(argv, 'bench_ranks.py')}`",
        f"- seconds a step over steps {args.warmup}-{args.steps} of each run (its train_log.csv), the two alternating; "
        f"batch {batch} a step either way ({batch // args.ranks} a rank)",
        "",
        "| pair | 1 process, s a step | ranks, s a step | ranks / 1 process |",
        "|---:|---:|---:|---:|",
        *rows,
        f"| median | {statistics.median(single):.3f} | {statistics.median(ranked):.3f} | "
        f"**{statistics.median(ratios):.2f}** |",
        "",
    ])
    publish_report(text, report, RESULTS, not args.no_write, args.json, header=RESULTS_HEADER)
    return 0


if __name__ == "__main__":
    sys.exit(main())
