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
Quantized loading benchmark: int8 / int4 language model against the unquantized one.

Loads the same weights once per mode (``none`` first, the reference), answers the same
commands on the same frames greedily, and reports per mode: the language model's linear
weights in memory, peak memory (CUDA allocator peak on a GPU), load time, per-command
latency, and against the reference the token agreement (position by position over the
longer answer), the share of identical answers and the mask IoU (targets paired in
answer order; a target only one side has counts as IoU 0).

Inputs are the demo's: synthetic scenes held out from the shipped model's training
(seed 2026 onwards) with held-out question phrasings. With ``--weights random`` (the
default for ``--preset 7b/13b``) the weights are drawn once, on the device, and every mode
loads its own host copy (a quantized load stages on the host, so the reference does
too). Their answers are noise: the peaks and latencies are the figures, agreement needs
trained weights (bench/RESULTS.md). Examples:

    .venv/bin/python bench/bench_quantization.py                      # shipped tiny model, CPU
    python bench/bench_quantization.py --preset 13b --device cuda --modes int8
    python bench/bench_quantization.py --preset 7b --device cuda --modes int4
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
import copy
from dataclasses import dataclass, field
import datetime as dt
import gc
import json
from pathlib import Path
import statistics
import sys
import time

# A script's own folder is on sys.path, not the checkout, which the imports below need
# (hence their noqa: E402).
REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.common import command_line, host_line, publish_report, RESULTS, RESULTS_HEADER, SHIPPED_MODEL  # noqa: E402
from m2sa_core.inference import default_dtype, dtype_from_name, DTYPE_NAMES, Segmenter  # noqa: E402
from m2sa_core.model.checkpoint import from_pretrained as load_checkpoint  # noqa: E402
from m2sa_core.model.presets import build_preset  # noqa: E402
from m2sa_core.model.quantization import (  # noqa: E402
    language_model_weight_bytes,
    MODES,
)
import numpy as np  # noqa: E402
import torch  # noqa: E402

DEMO_SEED = 2026  # m2sa_ros.bag.demo's seed: scenes the shipped model was not trained on


@dataclass
class Answer:
    """One command's output: generated ids (EOS excluded), visible masks and latency."""

    tokens: list[int]
    masks: list[np.ndarray]
    total_ms: float


@dataclass
class ModeRun:
    """Everything measured for one quantization mode."""

    mode: str
    answers: list[Answer] = field(default_factory=list)
    lm_weight_bytes: int = 0
    load_s: float = 0.0
    peak_mib: float | None = None


def demo_inputs(scenes: int, seed: int = DEMO_SEED) -> list[tuple[np.ndarray, str]]:
    """(frame, command) pairs: one question of each family on ``scenes`` held-out synthetic scenes."""
    from m2sa_core.data.synthetic.questions import sample_questions
    from m2sa_core.data.synthetic.scene import render_scene

    pairs = []
    for i in range(scenes):
        rng = np.random.default_rng(seed + i)
        scene = render_scene(rng)
        pairs.extend((scene.image, q.question) for q in sample_questions(scene, rng, held_out=True))
    return pairs


def load(source: str, mode: str, device: torch.device, dtype: torch.dtype, max_new_tokens: int,
         seed: int = 0, host_model: tuple | None = None) -> Segmenter:
    """
    Return a segmenter of ``source`` (checkpoint directory or preset) in ``mode``.

    The reference (``none``) is built on the host and then moved, exactly as a quantized
    load stages it, so that random presets get the same weights in every mode.
    ``host_model``: (model, tokenizer) of a preset's random weights, already in host memory;
    each mode gets its own copy, so a 7b/13b run draws its weights once and the load time is
    the move and quantization alone. Every mode decodes with the dynamic KV cache, as every
    quantized model does (no CUDA graph).
    """
    if host_model is None and mode != "none":
        return Segmenter.from_pretrained(source, device=device, dtype=dtype, max_new_tokens=max_new_tokens,
                                         seed=seed, quantization=mode)
    if host_model is not None:
        model, tokenizer = copy.deepcopy(host_model[0]), host_model[1]
    elif Path(source).is_dir():
        model, tokenizer = load_checkpoint(source, device="cpu", dtype=dtype)
    else:
        model, tokenizer = build_preset(source, device="cpu", dtype=dtype, seed=seed)
    return Segmenter.from_model(model, tokenizer, device=device, dtype=dtype, quantization=mode,
                                max_new_tokens=max_new_tokens, decoder="dynamic")


def answer_all(seg: Segmenter, inputs: Sequence[tuple[np.ndarray, str]]) -> list[Answer]:
    """Each command's generated ids, visible masks and total latency (one call per command, cache cleared)."""
    captured: list[list[int]] = []
    build_result = seg.stages.build_result

    def keep_tokens(generation, *args, **kwargs):
        captured.append(list(generation.tokens))
        return build_result(generation, *args, **kwargs)

    seg.stages.build_result = keep_tokens
    answers = []
    try:
        for image, command in inputs:
            seg.clear_cache()
            result = seg.segment(image, command)
            answers.append(Answer(captured[-1], [t.mask for t in result.targets], result.timings_ms["total"]))
    finally:
        seg.stages.build_result = build_result
    return answers


def run_mode(source: str, mode: str, inputs: Sequence[tuple[np.ndarray, str]], device: torch.device,
             dtype: torch.dtype, max_new_tokens: int, seed: int = 0, host_model: tuple | None = None) -> ModeRun:
    """Load ``source`` in ``mode``, answer ``inputs`` once to warm up and once measured, free it."""
    run = ModeRun(mode)
    if device.type == "cuda":
        gc.collect()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    start = time.perf_counter()
    progress(f"{mode}: loading {source}")
    seg = load(source, mode, device, dtype, max_new_tokens, seed, host_model)
    run.load_s = time.perf_counter() - start
    progress(f"{mode}: loaded in {run.load_s:.1f} s")
    run.lm_weight_bytes = language_model_weight_bytes(seg.model)
    answer_all(seg, inputs[:1])  # warm-up
    run.answers = answer_all(seg, inputs)
    progress(f"{mode}: {len(inputs)} commands answered, {time.perf_counter() - start:.1f} s since the load began")
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        run.peak_mib = torch.cuda.max_memory_allocated(device) / 2**20
    del seg
    gc.collect()
    return run


def progress(message: str) -> None:
    """
    Print one line on stderr at each phase, so a run stopped at a time cap shows where its time went.

    A 7b/13b run on an H200 once stopped before its first row (bench/RESULTS.md).
    """
    print(f"[bench_quantization] {message}", file=sys.stderr, flush=True)


def mask_iou(a: np.ndarray, b: np.ndarray) -> float:
    union = np.logical_or(a, b).sum()
    return 1.0 if union == 0 else float(np.logical_and(a, b).sum() / union)


def compare(reference: ModeRun, other: ModeRun) -> dict[str, float]:
    """Token agreement, identical answers and mask IoU of ``other`` against ``reference``, and the ratios."""
    agree = total = identical = 0
    ious: list[float] = []
    for ref, ans in zip(reference.answers, other.answers, strict=True):
        length = max(len(ref.tokens), len(ans.tokens))
        agree += sum(a == b for a, b in zip(ref.tokens, ans.tokens))
        total += length
        identical += ref.tokens == ans.tokens
        for k in range(max(len(ref.masks), len(ans.masks))):
            both = k < len(ref.masks) and k < len(ans.masks)
            ious.append(mask_iou(ref.masks[k], ans.masks[k]) if both else 0.0)
    return {
        "token_agreement": agree / total if total else 1.0,
        "identical_answers": identical / len(reference.answers),
        "mask_iou": statistics.fmean(ious) if ious else 1.0,
        "masks_compared": len(ious),
        "size_ratio": reference.lm_weight_bytes / other.lm_weight_bytes,
        "latency_ratio": p50(other) / p50(reference),
    }


def p50(run: ModeRun) -> float:
    return float(np.percentile([a.total_ms for a in run.answers], 50))


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.strip().split("\n\n")[0])
    p.add_argument("--preset", default="tiny", choices=("tiny", "7b", "13b"))
    p.add_argument("--weights", default="auto",
                   help="'random' (preset), a checkpoint directory, or 'auto': the shipped model for tiny, "
                        "random otherwise")
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="auto", choices=("auto", *DTYPE_NAMES))
    p.add_argument("--modes", default="int8,int4", help="quantized modes to compare with 'none', comma separated")
    p.add_argument("--scenes", type=int, default=6, help="held-out synthetic scenes (several commands each)")
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--no-write", action="store_true", help="do not append to bench/RESULTS.md")
    p.add_argument("--results", default=str(RESULTS))
    p.add_argument("--json", default=None, help="also write the raw numbers here")
    args = p.parse_args(argv)
    for mode in args.modes.split(","):
        if mode not in MODES or mode == "none":
            p.error(f"--modes takes {MODES[1:]}, got {mode!r}")
    return args


def run(args: argparse.Namespace) -> dict:
    device = torch.device(args.device)
    dtype = dtype_from_name(args.dtype) or default_dtype(device)
    weights = args.weights
    if weights == "auto":
        weights = str(SHIPPED_MODEL) if args.preset == "tiny" and SHIPPED_MODEL.is_dir() else "random"
    source = args.preset if weights == "random" else weights
    inputs = demo_inputs(args.scenes)
    gpu = f", {torch.cuda.get_device_name(device)}" if device.type == "cuda" else ""
    report = {"preset": args.preset, "weights": weights, "device": str(device), "dtype": str(dtype),
              "commands": len(inputs), "max_new_tokens": args.max_new_tokens,
              "machine": f"{host_line()}{gpu}; torch {torch.__version__}", "modes": {}}
    host_model = None
    if weights == "random":
        start = time.perf_counter()
        progress(f"drawing preset {source}'s random weights on {device} ({dtype}), then copying them to the host")
        # Drawn on the device and copied to the host: a 7b drawn on an H200 host's CPU took over
        # 3.5 min (bench/RESULTS.md), on the GPU seconds. The allocator peak is reset per mode.
        model, tokenizer = build_preset(source, device=device, dtype=dtype)
        host_model = (model.to("cpu"), tokenizer)
        del model
        report["host_build_s"] = time.perf_counter() - start
        progress(f"built in {report['host_build_s']:.1f} s")
    reference = run_mode(source, "none", inputs, device, dtype, args.max_new_tokens, host_model=host_model)
    runs = [reference] + [run_mode(source, m, inputs, device, dtype, args.max_new_tokens, host_model=host_model)
                          for m in args.modes.split(",")]
    del host_model
    for r in runs:
        row = {"lm_weight_mib": r.lm_weight_bytes / 2**20, "load_s": r.load_s, "p50_ms": p50(r),
               "peak_mib": r.peak_mib, "mean_tokens": statistics.fmean(len(a.tokens) for a in r.answers)}
        if r is not reference:
            row.update(compare(reference, r))
        report["modes"][r.mode] = row
        print(json.dumps({r.mode: row}, default=float), flush=True)
    return report


def to_markdown(report: dict, command: str) -> str:
    lines = [
        f"## bench_quantization: preset {report['preset']} ({Path(report['weights']).name} weights) on "
        f"{report['device']}, {report['dtype']}",
        "",
        f"- date: {dt.datetime.now(dt.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- machine: {report['machine']}",
        f"- command: `{command}`",
        f"- inputs: {report['commands']} commands on held-out synthetic scenes (seed {DEMO_SEED}+), greedy, "
        f"up to {report['max_new_tokens']} new tokens, dynamic KV cache in every mode",
        *([f"- random weights drawn once on {report['device']} and copied to the host in "
           f"{report['host_build_s']:.1f} s; each mode loads its own copy, so 'load s' is the move to the device "
           "(and the quantization) alone"] if "host_build_s" in report else []),
        "",
        "| mode | LM linear weights MiB | size vs none | peak MiB | load s | p50 ms | latency vs none |"
        " token agreement | identical answers | mask IoU (targets) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for mode, row in report["modes"].items():
        peak = "-" if row["peak_mib"] is None else f"{row['peak_mib']:.0f}"
        if mode == "none":
            lines.append(f"| none | {row['lm_weight_mib']:.2f} | 1x | {peak} | {row['load_s']:.1f} | "
                         f"{row['p50_ms']:.1f} | 1x | - | - | - |")
            continue
        lines.append(
            f"| {mode} | {row['lm_weight_mib']:.2f} | {row['size_ratio']:.2f}x smaller | {peak} | "
            f"{row['load_s']:.1f} | {row['p50_ms']:.1f} | {row['latency_ratio']:.2f}x | "
            f"{row['token_agreement']:.3f} | {row['identical_answers']:.2f} | "
            f"{row['mask_iou']:.3f} ({row['masks_compared']}) |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> dict:
    args = parse_args(argv)
    report = run(args)
    publish_report(to_markdown(report, command_line(argv, "bench_quantization.py")), report, args.results,
                   not args.no_write, args.json, header=RESULTS_HEADER)
    return report


if __name__ == "__main__":
    main()
