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
Where a training step of a stage config goes: building its batch against the model's work.

The staged pipeline's budget (2 h on two CPU cores, docs/TRAINING.md) is spent in stage 1
and stage 3 steps. A step is two jobs that share the cores: the data-loader worker builds
the micro-batch (decode the image and masks, draw the prompts or the question, collate),
and the main process runs forward, backward and the optimiser. This script times both
in one process, one after the other, on the same steps of the config's own data order,
so a change to either side can be judged by the ratio it moves, not by a wall clock that
differs 1.7x between sessions' machines (bench/RESULTS.md).

    .venv/bin/python bench/bench_train_step.py --config training/tiny/1_sam.yaml
    .venv/bin/python bench/bench_train_step.py --config training/tiny/3_m2sa.yaml \
        model.init_from=models/m2sa-tiny-synth --steps 20 --profile 5
"""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path
import statistics
import sys
import tempfile
import time

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.common import command_line, host_line, publish_report, RESULTS, RESULTS_HEADER  # noqa: E402
import torch  # noqa: E402
from training import train as training_loop  # noqa: E402
from training.config import load_config  # noqa: E402
from training.distributed import shutdown  # noqa: E402


def build_batches(run: training_loop.Run, steps: int) -> tuple[list[dict], list[float]]:
    """Return the micro-batches of the run's first ``steps`` steps, and the seconds each step's took to build."""
    dataset = training_loop.micro_batch_dataset(run)
    accum = run.config.optim.grad_accum
    batches, seconds = [], []
    for step in range(steps):
        t0 = time.perf_counter()
        batches.extend(dataset[step * accum + micro] for micro in range(accum))
        seconds.append(time.perf_counter() - t0)
    return batches, seconds


def time_optimiser_steps(run: training_loop.Run, wrapped, batches: list[dict]) -> list[float]:
    """Seconds of each optimiser step (forward, backward, optimiser) over ``batches``."""
    feed = iter(batches)
    seconds = []
    for _ in range(len(batches) // run.config.optim.grad_accum):
        t0 = time.perf_counter()
        training_loop.optimisation_step(run, wrapped, feed)
        seconds.append(time.perf_counter() - t0)
    return seconds


def top_ops(run: training_loop.Run, wrapped, batches: list[dict], rows: int) -> str:
    """torch.profiler's table of the ops that took the most CPU time over the steps of ``batches``."""
    from torch.profiler import profile, ProfilerActivity

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        time_optimiser_steps(run, wrapped, batches)
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--config", default="training/tiny/1_sam.yaml")
    parser.add_argument("--steps", type=int, default=20, help="timed steps (after the warm-up)")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2, help="torch threads of the main process (the pipeline's)")
    parser.add_argument("--profile", type=int, default=0, help="profile this many more steps; print the top ops")
    parser.add_argument("--no-write", action="store_true", help="print only; do not append to bench/RESULTS.md")
    parser.add_argument("--json", default=None)
    parser.add_argument("overrides", nargs="*", help="key=value, as m2sa-train takes them")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.warmup < 0:
        parser.error("--steps must be at least 1 and --warmup at least 0")
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as scratch:
        config = load_config(args.config, [*args.overrides, f"out_dir={scratch}"])
        run = training_loop.setup(config)
        batches, build_s = build_batches(run, args.warmup + args.steps)
        wrapped = training_loop.LossParts(run.model, run.objective)
        wrapped.train()
        step_s = time_optimiser_steps(run, wrapped, batches)
        # The profile repeats the last steps' batches: the model is warm and the data drawn.
        table = top_ops(run, wrapped, batches[-args.profile * config.optim.grad_accum:], 25) if args.profile else ""
        shutdown(run.info)
    data_s, compute_s = statistics.median(build_s[args.warmup:]), statistics.median(step_s[args.warmup:])
    report = {"config": args.config, "overrides": args.overrides, "device": config.device, "steps": args.steps,
              "threads": args.threads,
              "batch_size": config.optim.batch_size, "grad_accum": config.optim.grad_accum,
              "data_s": data_s, "compute_s": compute_s}
    text = "\n".join([
        f"## bench_train_step: {args.config} on {config.device}",
        "",
        f"- date: {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC; machine: {host_line()}",
        f"- command: `{command_line(argv, 'bench_train_step.py')}`",
        f"- median of {args.steps} steps after {args.warmup} warm-up; batch {config.optim.batch_size} x "
        f"{config.optim.grad_accum} accumulation; data on one thread, the step on {args.threads}"
        + (" (and the GPU)" if config.device.startswith("cuda") else ""),
        "",
        "| build the batch, s a step | forward + backward + optimiser, s a step | data / compute |",
        "|---:|---:|---:|",
        f"| {data_s:.3f} | {compute_s:.3f} | {data_s / compute_s:.2f} |",
        "",
    ])
    publish_report(text, report, RESULTS, not args.no_write, args.json, header=RESULTS_HEADER)
    if table:
        print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
