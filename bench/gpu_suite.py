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
Every GPU figure of issue 78 in one short prepared run: rows print and save as they finish.

GPU time here is short and rare, and earlier GPU runs were cut at their time caps before
printing anything. So this one script runs each figure as a row, smallest cost first
within a model size, prints the row the moment it is measured (flushed), rewrites the
JSON file after every row (a run cut at its cap still leaves the rows it finished) and
stops starting rows once ``--budget-s`` is spent, recording which rows it skipped.

Weights are random, drawn on the device (``Segmenter.from_pretrained(preset, device)``
builds a preset where it will run, as bench_quantization draws them): the figures are
times, peaks and ratios within the run, never quality. Each figure reuses the benchmark
that owns it: bench_inference (our path, the reference-style path, forced answers, the
floor's inputs, peak memory), bench_quantization's load from a host copy (4 bits) and
the segmenter's own tracking.

**The floor.** A batch-1 decode step reads every language-model weight once, so

    decode floor (ms a token) = LM weight bytes read per token / copy bandwidth

where the bytes are ``bench_inference.llm_weight_bytes`` (every LLM parameter but the
embedding table, which is gathered) and the bandwidth is measured in the same run by
``bench_inference.copy_bandwidth``: a large device-to-device copy (1 GiB on CUDA, 64 MiB
on CPU), counted as bytes read + written. A command on a cached frame adds its prefill
and mask decoding at the measured matmul peak:
``floor(n) = FLOPs(prefill + masks) / matmul FLOP/s + n * decode floor``.

    python bench/gpu_suite.py --append-results            # on a lent GPU: 7b and 13b, bf16, graph decoder
    .venv/bin/python bench/gpu_suite.py --tiny --out /tmp/gpu.json   # CPU: the same code at tiny size

On CPU (or with ``--tiny``) every row runs preset ``tiny`` under its 7b/13b name; the rows
that need a CUDA-only feature (4-bit kernels) say "skipped: needs CUDA" instead of a number.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
import datetime as dt
import gc
import json
from pathlib import Path
import statistics
import sys
import time
from typing import Any

# A script's own folder is on sys.path, not the checkout, which the imports below need
# (hence their noqa: E402).
REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.bench_inference import (  # noqa: E402
    command_flops,
    copy_bandwidth,
    forced_answer,
    llm_weight_bytes,
    matmul_peak,
    ours,
    pct,
    PeakMemory,
    reference,
    sync,
    timed,
)
from bench.common import append_results, command_line, COMMANDS, host_line, RESULTS, RESULTS_HEADER  # noqa: E402
from m2sa_core.inference import default_dtype, dtype_from_name, DTYPE_NAMES, Segmenter  # noqa: E402
from m2sa_core.model.batch import toy_example  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

DEFAULT_OUT = REPO / "bench" / "results" / "gpu-latest.json"
SHORT, LONG = 32, 96  # answer lengths of the cached-command rows (the issue's)


@dataclass(frozen=True)
class Row:
    """One figure of the issue's table: its name, the model size it runs on, what it is and its target."""

    name: str
    size: str
    what: str
    target: str
    cuda_only: str = ""  # the CUDA-only feature it needs; empty when it runs anywhere


ROWS: tuple[Row, ...] = (
    Row("decode_floor_ratio_7b", "7b", "bf16 decode ms a token / floor ms", "<= 1.3"),
    Row("cached_command_floor_ratio_7b", "7b", f"one command on a cached frame / floor, worst of {SHORT} and {LONG} "
        "tokens", "<= 1.5"),
    Row("reference_speedup_7b", "7b", f"reference-style path / ours, one command on a new frame, {SHORT} tokens",
        ">= 4"),
    Row("track_vs_command_7b", "7b", "full command ms / tracked frame ms", ">= 5"),
    Row("sam_encode_ms_7b", "7b", "SAM ViT-H encode of one 1024 frame, ms", "reported (~150 ms on an A100)"),
    Row("two_cameras_memory_7b", "7b", "peak memory: one model serving two cameras / two models", "<= 0.6"),
    Row("two_cameras_throughput_7b", "7b", "commands/s: two cameras batched on one model / one camera", ">= 1.5"),
    Row("train_step_7b", "7b", "one LoRA training step of the 7b config: s a step, peak GB", "reported"),
    Row("decode_floor_ratio_13b", "13b", "bf16 decode ms a token / floor ms", "<= 1.3"),
    Row("cached_command_floor_ratio_13b", "13b", f"one command on a cached frame / floor, worst of {SHORT} and "
        f"{LONG} tokens", "<= 1.5"),
    Row("reference_speedup_13b", "13b", f"reference-style path / ours, one command on a new frame, {SHORT} tokens",
        ">= 4"),
    Row("int4_decode_vs_bf16_13b", "13b", "4-bit decode ms a token / bf16's", "<= 0.6", cuda_only="4-bit kernels"),
    Row("int4_peak_gb_13b", "13b", "peak memory of 13b at 4 bits, GB", "<= 10", cuda_only="4-bit kernels"),
)
ROW_NAMES = tuple(r.name for r in ROWS)

# Not built in this change: the training step needs a data world on the device
# (bench_train_step reads a stage config's data), which a lent GPU does not have.
NOT_BUILT = {"train_step_7b": "not built yet: bench_train_step needs a stage config's data world on the device"}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.strip().split("\n\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--dtype", default="auto", choices=("auto", *DTYPE_NAMES))
    p.add_argument("--tiny", action="store_true",
                   help="run every row at preset tiny (the default when the device is not CUDA)")
    p.add_argument("--budget-s", type=float, default=480.0,
                   help="start no row after this many seconds (default 480: 8 minutes); the rest are skipped "
                        "with the reason")
    p.add_argument("--rows", default=None, help="only these rows, comma separated (default: all)")
    p.add_argument("--repeats", type=int, default=None, help="timed repeats per figure (default 3 on CUDA, 2 tiny)")
    p.add_argument("--out", default=str(DEFAULT_OUT), help="JSON file, rewritten after every row")
    p.add_argument("--append-results", action="store_true", help="append the table to bench/RESULTS.md")
    p.add_argument("--results", default=str(RESULTS))
    args = p.parse_args(argv)
    if args.rows is not None:
        unknown = set(args.rows.split(",")) - set(ROW_NAMES)
        if unknown:
            p.error(f"unknown rows {sorted(unknown)}; rows are {list(ROW_NAMES)}")
    if args.budget_s < 0:
        p.error("--budget-s must be >= 0")
    return args


# -- one model size ---------------------------------------------------------------------------
@dataclass
class Size:
    """One model size's segmenter and what its rows share (measured once, on first use)."""

    preset: str
    device: torch.device
    dtype: torch.dtype
    repeats: int
    seg: Segmenter | None = None
    image: np.ndarray = field(default_factory=lambda: toy_example(0, size=(480, 640)).image)
    shared: dict[str, Any] = field(default_factory=dict)

    def segmenter(self) -> Segmenter:
        """Return the bf16 segmenter, weights drawn on the device; the graph decoder on CUDA ("auto")."""
        if self.seg is None:
            self.seg = Segmenter.from_pretrained(self.preset, device=self.device, dtype=self.dtype,
                                                 max_new_tokens=LONG + 1, decoder="auto")
        return self.seg

    def prompt(self) -> list[int]:
        return self.segmenter().prompt_ids(COMMANDS[0])

    def free(self) -> None:
        """Drop the model before the next size is built (13b and 7b need not share the device)."""
        self.seg = None
        self.shared.clear()
        gc.collect()
        if self.device.type == "cuda":
            torch.cuda.empty_cache()


def floor_inputs(device: torch.device, dtype: torch.dtype, cache: dict[str, float]) -> dict[str, float]:
    """Return the device's copy bandwidth (B/s) and matmul peak (FLOP/s), measured once per run."""
    if not cache:
        cuda = device.type == "cuda"
        cache["bandwidth_Bps"] = copy_bandwidth(device, nbytes=2**30 if cuda else 2**26)
        cache["matmul_flops"] = matmul_peak(device, size=8192 if cuda else 512, dtype=dtype)
    return cache


def cached_decode(size: Size, n_tokens: int) -> dict[str, float]:
    """One command on a cached frame with a forced ``n_tokens`` answer: p50 total and decode ms a token."""
    key = f"cached_{n_tokens}"
    if key not in size.shared:
        seg = size.segmenter()
        forced = forced_answer(seg, n_tokens, 1)
        seg.clear_cache()
        runs, _ = timed(lambda: ours(seg, size.image, [size.prompt()], [forced], "frame"), size.repeats, size.device)
        size.shared[key] = {"p50_ms": pct([r["timings"]["total"] for r in runs], 50),
                            "decode_ms_per_token": statistics.median(r["timings"]["decode_per_token"] for r in runs)}
    return size.shared[key]


def uncached_command(size: Size) -> dict[str, Any]:
    """Our path, one command on a new frame, forced ``SHORT`` tokens with one [SEG]: p50 ms and peak MiB."""
    if "uncached" not in size.shared:
        seg = size.segmenter()
        forced = forced_answer(seg, SHORT, 1)

        def once() -> dict:
            seg.clear_cache()
            return ours(seg, size.image, [size.prompt()], [forced], None)

        runs, peak = timed(once, size.repeats, size.device)
        size.shared["uncached"] = {"p50_ms": pct([r["timings"]["total"] for r in runs], 50), "peak_mib": peak}
    return size.shared["uncached"]


def decode_floor_ratio(size: Size, floors: dict[str, float]) -> dict[str, Any]:
    """bf16 decode ms a token (the segmenter's decoder, 96-token answer) over the bandwidth floor."""
    seg = size.segmenter()
    inputs = floor_inputs(size.device, size.dtype, floors)
    floor_ms = llm_weight_bytes(seg.model) / inputs["bandwidth_Bps"] * 1e3
    measured = cached_decode(size, LONG)["decode_ms_per_token"]
    return {"value": measured / floor_ms, "decode_ms_per_token": measured, "floor_ms_per_token": floor_ms,
            "lm_weight_GB": llm_weight_bytes(seg.model) / 1e9, "copy_bandwidth_GBps": inputs["bandwidth_Bps"] / 1e9,
            "decoder": seg.decoder}


def cached_command_floor_ratio(size: Size, floors: dict[str, float]) -> dict[str, Any]:
    """
    Time one command on a cached frame, ``SHORT`` and ``LONG`` tokens, against its floor.

    The floor is prefill and masks at matmul peak plus the decode floor.
    """
    seg = size.segmenter()
    inputs = floor_inputs(size.device, size.dtype, floors)
    flops = command_flops(seg, size.image, size.prompt(), 1, encode=False)
    decode_floor_ms = llm_weight_bytes(seg.model) / inputs["bandwidth_Bps"] * 1e3
    detail: dict[str, Any] = {"prefill_and_masks_GFLOP": flops / 1e9,
                              "matmul_TFLOPs": inputs["matmul_flops"] / 1e12, "decoder": seg.decoder}
    ratios = []
    for n in (SHORT, LONG):
        floor_ms = flops / inputs["matmul_flops"] * 1e3 + n * decode_floor_ms
        measured = cached_decode(size, n)["p50_ms"]
        ratios.append(measured / floor_ms)
        detail[f"{n}_tokens"] = {"p50_ms": measured, "floor_ms": floor_ms, "ratio": measured / floor_ms}
    return {"value": max(ratios), **detail}


def reference_speedup(size: Size) -> dict[str, Any]:
    """bench_inference's reference-style path over ours, one command on a new frame, ``SHORT`` tokens."""
    seg = size.segmenter()
    forced = forced_answer(seg, SHORT, 1)
    prompt = size.prompt()
    ref, ref_peak = timed(lambda: reference(seg, size.image, prompt, forced), size.repeats, size.device)
    ours_row = uncached_command(size)
    ref_ms = pct([r["timings"]["total"] for r in ref], 50)
    return {"value": ref_ms / ours_row["p50_ms"], "reference_p50_ms": ref_ms, "ours_p50_ms": ours_row["p50_ms"],
            "reference_peak_mib": ref_peak, "ours_peak_mib": ours_row["peak_mib"]}


def track_vs_command(size: Size) -> dict[str, Any]:
    """Return a full command (new frame, ``SHORT`` tokens) over one tracked frame of its target (Segmenter.track)."""
    seg = size.segmenter()
    command = COMMANDS[0]
    forced = forced_answer(seg, SHORT, 1)
    timings: dict[str, float] = {}
    seg.clear_cache()
    with torch.inference_mode():
        entry = seg.stages.encode_frame(size.image, None, timings)
        (generation,) = seg.stages.generate(entry.features, [size.prompt()], timings, forced=[forced])
        decoded = seg.stages.decode_masks(entry, generation.seg_states, timings)
        result = seg.stages.build_result(generation, decoded, timings, False)
        # What segment(keep_prompts=True) keeps, from the forced answer: random weights emit no [SEG] of their own.
        prompts = seg._track_prompts(result, generation.seg_states, command)
    if len(prompts) == 0:
        return {"skipped": "the forced answer left no target to track"}
    frame = toy_example(1, size=size.image.shape[:2]).image

    def tracked() -> dict:
        seg.clear_cache()
        result, _ = seg.track(frame, prompts)
        return {"timings": result.timings_ms}

    runs, _ = timed(tracked, size.repeats, size.device)
    track_ms = pct([r["timings"]["total"] for r in runs], 50)
    command_ms = uncached_command(size)["p50_ms"]
    return {"value": command_ms / track_ms, "command_p50_ms": command_ms, "tracked_frame_p50_ms": track_ms,
            "targets": len(prompts)}


def sam_encode_ms(size: Size) -> dict[str, Any]:
    """
    Time SAM's image encoder alone (``encode_sam``) on one frame padded to its input.

    The input is 1024 px for ViT-H, as SAM's own ~150 ms figure counts it; the stage's time
    (with early fusion and the upsampling weights, as a command pays it) goes in the detail.
    """
    seg = size.segmenter()
    frame = toy_example(2, size=(1024, 1024)).image
    sam_image = seg.processor(frame)["sam_image"][None].to(size.device)

    @torch.inference_mode()
    def encode() -> dict:
        sync(size.device)
        start = time.perf_counter()
        seg.model.encode_sam(sam_image)
        sync(size.device)
        encoder_ms = (time.perf_counter() - start) * 1e3
        timings: dict[str, float] = {}
        seg.clear_cache()  # frames are cached by content: a second encode would be a cache hit
        seg.stages.encode_frame(frame, None, timings)
        return {"timings": {"encoder": encoder_ms, "stage": timings["sam_encode"]}}

    runs, _ = timed(encode, size.repeats, size.device)
    return {"value": statistics.median(r["timings"]["encoder"] for r in runs),
            "stage_sam_encode_ms": statistics.median(r["timings"]["stage"] for r in runs),
            "encoder_input_px": int(sam_image.shape[-1])}


def two_cameras(size: Size) -> dict[str, dict[str, Any]]:
    """
    One model answering two cameras' commands in one batched call against one camera's command.

    The in-process stand-in for bench_multicamera (which drives ROS nodes, absent on a lent
    GPU): the two-camera node's batch is ``ours`` over two frames in one generation; two
    single-camera nodes are two copies of the one-camera peak. Memory = batched peak / (2 x
    single peak); throughput = (2 / batched ms) / (1 / single ms).
    """
    seg = size.segmenter()
    forced = forced_answer(seg, SHORT, 1)
    prompt = size.prompt()
    second = toy_example(3, size=size.image.shape[:2]).image

    def pair() -> dict:
        seg.clear_cache()
        return ours(seg, [size.image, second], [prompt, prompt], [forced, forced], None)

    runs, pair_peak = timed(pair, size.repeats, size.device)
    single = uncached_command(size)
    pair_ms = pct([r["timings"]["total"] for r in runs], 50)
    memory = pair_peak / (2 * single["peak_mib"])
    throughput = 2 * single["p50_ms"] / pair_ms
    common = {"one_camera_p50_ms": single["p50_ms"], "two_cameras_p50_ms": pair_ms,
              "one_camera_peak_mib": single["peak_mib"], "two_cameras_peak_mib": pair_peak,
              "peak": "CUDA allocator peak" if size.device.type == "cuda" else "process RSS peak"}
    return {"two_cameras_memory_7b": {"value": memory, **common},
            "two_cameras_throughput_7b": {"value": throughput, **common}}


def int4_rows(size: Size) -> dict[str, dict[str, Any]]:
    """
    Return the 13b language model at 4 bits (bitsandbytes NF4, loaded from a host copy as bench_quantization does).

    Decode ms a token against bf16's, and the allocator peak of the load and the commands.
    """
    bf16 = cached_decode(size, SHORT)["decode_ms_per_token"]
    seg = size.segmenter()
    model, tokenizer = seg.model.to("cpu"), seg.tokenizer  # the host copy a quantized load stages from
    size.free()
    with PeakMemory(size.device) as peak:
        seg4 = Segmenter.from_model(model, tokenizer, device=size.device, dtype=size.dtype, quantization="int4",
                                    max_new_tokens=SHORT + 1)
        size.seg = seg4
        int4 = cached_decode(size, SHORT)["decode_ms_per_token"]
    size.free()
    del model, seg4
    common = {"bf16_decode_ms_per_token": bf16, "int4_decode_ms_per_token": int4, "int4_decoder": "dynamic"}
    return {"int4_decode_vs_bf16_13b": {"value": int4 / bf16, **common},
            "int4_peak_gb_13b": {"value": peak.peak_mib * 2**20 / 1e9, **common}}


# -- the run ----------------------------------------------------------------------------------
class Suite:
    """The rows measured so far: printed as each finishes, the JSON rewritten after each."""

    def __init__(self, out: Path, budget_s: float, meta: dict[str, Any]) -> None:
        self.out, self.budget_s, self.meta = out, budget_s, meta
        self.start = time.perf_counter()
        self.rows: dict[str, dict[str, Any]] = {}

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def record(self, name: str, row: dict[str, Any]) -> None:
        """Keep one row, print it at once and save everything so far."""
        target = next(r.target for r in ROWS if r.name == name)
        self.rows[name] = {**row, "target": target, "at_s": round(self.elapsed(), 1)}
        print(format_row(name, self.rows[name]), flush=True)
        self.save()

    def skip(self, name: str, reason: str) -> None:
        self.record(name, {"skipped": reason})

    def save(self) -> None:
        self.out.parent.mkdir(parents=True, exist_ok=True)
        data = {"meta": {**self.meta, "elapsed_s": round(self.elapsed(), 1)}, **self.rows}
        tmp = self.out.with_suffix(self.out.suffix + ".tmp")
        tmp.write_text(json.dumps(data, indent=2, default=float))
        tmp.replace(self.out)  # a run killed mid-write leaves the previous rows whole

    def over_budget(self) -> bool:
        return self.elapsed() > self.budget_s


def format_row(name: str, row: dict[str, Any]) -> str:
    if "skipped" in row:
        return f"{name:32s} skipped: {row['skipped']}"
    return f"{name:32s} {row['value']:10.3f}   target {row['target']:30s} ({row['at_s']:.1f} s)"


def run(args: argparse.Namespace) -> Suite:
    device = torch.device(args.device)
    tiny = args.tiny or device.type != "cuda"
    dtype = dtype_from_name(args.dtype) or default_dtype(device)
    repeats = args.repeats or (2 if tiny else 3)
    wanted = set(args.rows.split(",")) if args.rows else set(ROW_NAMES)
    gpu = f", {torch.cuda.get_device_name(device)}" if device.type == "cuda" else ""
    meta = {"device": str(device), "dtype": str(dtype), "tiny": tiny, "repeats": repeats, "budget_s": args.budget_s,
            "machine": f"{host_line()}{gpu}; torch {torch.__version__}",
            "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "presets": {"7b": "tiny" if tiny else "7b", "13b": "tiny" if tiny else "13b"}}
    suite = Suite(Path(args.out), args.budget_s, meta)
    floors: dict[str, float] = {}
    suite.meta["floor_inputs"] = floors
    print(f"gpu_suite on {device} ({dtype}), {'preset tiny for every row' if tiny else '7b and 13b'}, "
          f"budget {args.budget_s:.0f} s", flush=True)
    measures: dict[str, Callable[[Size], dict[str, Any]]] = {
        "decode_floor_ratio": lambda s: decode_floor_ratio(s, floors),
        "cached_command_floor_ratio": lambda s: cached_command_floor_ratio(s, floors),
        "reference_speedup": reference_speedup,
        "track_vs_command": track_vs_command,
        "sam_encode_ms": sam_encode_ms,
    }
    grouped = {"two_cameras_memory_7b": two_cameras, "two_cameras_throughput_7b": two_cameras,
               "int4_decode_vs_bf16_13b": int4_rows, "int4_peak_gb_13b": int4_rows}
    for size_name in ("7b", "13b"):
        size = Size(meta["presets"][size_name], device, dtype, repeats)
        for row in (r for r in ROWS if r.size == size_name and r.name in wanted):
            if row.name in suite.rows:  # measured together with an earlier row
                continue
            if row.name in NOT_BUILT:
                suite.skip(row.name, NOT_BUILT[row.name])
            elif row.cuda_only and device.type != "cuda":
                suite.skip(row.name, f"needs CUDA ({row.cuda_only})")
            elif suite.over_budget():
                suite.skip(row.name, f"time budget of {args.budget_s:.0f} s spent ({suite.elapsed():.0f} s elapsed)")
            else:
                try:
                    results = (grouped[row.name](size) if row.name in grouped
                               else {row.name: measures[row.name.rsplit("_", 1)[0]](size)})
                except Exception as exc:  # noqa: BLE001 - one failing row must not cost the later rows their figures
                    results = {name: {"skipped": f"failed: {exc!r}"[:300]} for name, fn in grouped.items()
                               if fn is grouped.get(row.name)} or {row.name: {"skipped": f"failed: {exc!r}"[:300]}}
                    print(f"[gpu_suite] {row.name} failed: {exc!r}", file=sys.stderr, flush=True)
                for name, result in results.items():
                    if name in wanted:
                        suite.record(name, result)
        size.free()
    return suite


def to_markdown(suite: Suite, command: str) -> str:
    meta = suite.meta
    floors = meta.get("floor_inputs") or {}
    lines = [
        f"## gpu_suite: issue 78's figures on {meta['device']}, {meta['dtype']}"
        + (" (preset tiny under every row's name)" if meta["tiny"] else ""),
        "",
        f"- date: {meta['date']}",
        f"- machine: {meta['machine']}",
        f"- command: `{command}`",
        f"- random weights drawn on the device; {meta['repeats']} timed repeats a figure after a warm-up; "
        f"{suite.elapsed():.0f} s of a {meta['budget_s']:.0f} s budget"
        + (f"; floor inputs measured in the run: copy {floors['bandwidth_Bps'] / 1e9:.1f} GB/s, matmul "
           f"{floors['matmul_flops'] / 1e12:.2f} TFLOP/s" if floors else ""),
        "",
        "| name | value | target | what |",
        "| --- | --- | --- | --- |",
    ]
    for row in ROWS:
        got = suite.rows.get(row.name)
        value = ("not run" if got is None else f"skipped: {got['skipped']}" if "skipped" in got
                 else f"{got['value']:.3f}")
        lines.append(f"| `{row.name}` | {value} | {row.target} | {row.what} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> Suite:
    args = parse_args(argv)
    suite = run(args)
    text = to_markdown(suite, command_line(argv, "gpu_suite.py"))
    print(text, flush=True)
    if args.append_results:
        append_results(args.results, text, header=RESULTS_HEADER)
    return suite


if __name__ == "__main__":
    main()
