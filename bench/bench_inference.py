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
Inference benchmark of M2SA: our path against a reference-style path, one process, one run.

Ours: frame features (SAM encoder + early fusion + CLIP) cached per frame, greedy decoding
with a KV cache, [SEG] states collected while generating. Reference-style path (what the
authors' LISA-derived inference does), built from the same modules: SAM and CLIP
recomputed for every query, no KV cache (a full forward over the whole sequence per new
token), every layer's hidden states kept. Both get the same frame, commands and forced
answers (N new tokens holding K [SEG]), so they do the same work whatever the weights;
the script checks that they agree (argmax tokens, masks) before reporting times.

Not a test: numbers go to stdout and, unless --no-write, to bench/RESULTS.md with the
command, machine and date. Examples:

    .venv/bin/python bench/bench_inference.py --preset tiny --device cpu
    python3 bench/bench_inference.py --preset 7b --device cuda --weights random
    .venv/bin/python bench/bench_inference.py --quick --no-write
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
import datetime as dt
import json
import os
from pathlib import Path
import statistics
import sys
import threading
import time

# A script's own folder is on sys.path, not the checkout, which the imports below need
# (hence their noqa: E402).
REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.common import command_line, COMMANDS, host_line, publish_report, RESULTS, RESULTS_HEADER  # noqa: E402
from m2sa_core.inference import DecodedMasks, dtype_from_name, DTYPE_NAMES, Segmenter  # noqa: E402
from m2sa_core.model.batch import toy_example  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

FILLER = " You can use the mug_1's handle and the cup_2 on the table, or the knife_1's blade next to it."


# -- helpers -------------------------------------------------------------------------------
def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def pct(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=np.float64), q)) if values else float("nan")


class PeakMemory:
    """Peak memory of a block: CUDA allocator peak, or sampled process RSS on CPU (MiB)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.peak_mib = 0.0

    def __enter__(self) -> "PeakMemory":
        if self.device.type == "cuda":
            sync(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
        else:
            import psutil

            proc = psutil.Process()
            self._stop = threading.Event()
            self._rss = [proc.memory_info().rss]

            def sample() -> None:
                while not self._stop.wait(0.002):
                    self._rss.append(proc.memory_info().rss)

            self._thread = threading.Thread(target=sample, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.device.type == "cuda":
            sync(self.device)
            self.peak_mib = torch.cuda.max_memory_allocated(self.device) / 2**20
        else:
            self._stop.set()
            self._thread.join()
            self.peak_mib = max(self._rss) / 2**20


def forced_answer(seg: Segmenter, n_tokens: int, n_targets: int) -> list[int]:
    """``n_tokens`` answer ids holding ``n_targets`` [SEG], spread evenly (the last one at the end)."""
    if n_targets > n_tokens:
        raise ValueError(f"{n_targets} targets do not fit in {n_tokens} tokens")
    filler = seg.tokenizer(FILLER, add_special_tokens=False)["input_ids"]
    ids = [filler[i % len(filler)] for i in range(n_tokens)]
    for k in range(n_targets):
        ids[(k + 1) * n_tokens // n_targets - 1] = seg.seg_token_id
    return ids


# -- the two paths -------------------------------------------------------------------------
def _masks_and_scores(decoded: DecodedMasks) -> tuple[np.ndarray, np.ndarray]:
    """Visible bool masks [n, H, W] and their scores [n]: what the agreement check compares."""
    return decoded.masks, decoded.scores


def ours(seg: Segmenter, image: np.ndarray | Sequence[np.ndarray], prompts: list[list[int]],
         forced: list[list[int]], frame_key) -> dict:
    """
    Our path for one or several commands on a frame (one batched generation).

    ``image`` may also be a list with one frame per prompt (several cameras' commands in
    one generation, as a two-camera node batches them); each frame is then cached under
    ``(frame_key, index)``, or not at all when ``frame_key`` is None.
    """
    timings: dict[str, float] = {}
    start = time.perf_counter()
    if isinstance(image, np.ndarray):
        entries = [seg.stages.encode_frame(image, frame_key, timings)] * len(prompts)
        features = entries[0].features
    else:
        entries = [seg.stages.encode_frame(frame, None if frame_key is None else (frame_key, i), timings)
                   for i, frame in enumerate(image)]
        features = [e.features for e in entries]
    gens = seg.stages.generate(features, prompts, timings, forced=forced)
    outputs = [_masks_and_scores(seg.stages.decode_masks(entry, g.seg_states, timings))
               for entry, g in zip(entries, gens)]
    sync(seg.device)
    timings["total"] = (time.perf_counter() - start) * 1e3
    return {"timings": timings, "greedy": [g.greedy for g in gens], "masks": [o[0] for o in outputs],
            "scores": [o[1] for o in outputs]}


@torch.inference_mode()
def reference(seg: Segmenter, image: np.ndarray, prompt: list[int], forced: list[int]) -> dict:
    """Reference-style path for one command: encoders per query, no KV cache, all hidden states kept."""
    model, device = seg.model, seg.device
    timings: dict[str, float] = {}
    start = time.perf_counter()
    inputs = seg.processor(image)
    sam_image = inputs["sam_image"][None].to(device)
    emb, early = model.encode_sam(sam_image)
    fused = model.fuse(emb, early)
    upsampling = model.encode_upsampling_weights(sam_image)
    sync(device)
    t1 = time.perf_counter()
    clip = model.encode_clip(inputs["clip_image"][None].to(device))
    sync(device)
    t2 = time.perf_counter()
    embeds = model.merge_image_embeddings(torch.tensor([prompt], device=device), clip)[0]
    prompt_len = embeds.shape[1]
    kept, greedy = [], []
    t_prefill = None
    for step in range(len(forced) + 1):
        out = model.llm(inputs_embeds=embeds, output_hidden_states=True, use_cache=False)
        kept.append(out.hidden_states)  # what generate(output_hidden_states=True) returns
        greedy.append(int(out.logits[0, -1].argmax()))
        if t_prefill is None:
            sync(device)
            t_prefill = time.perf_counter()
        if step == len(forced):
            break
        embeds = torch.cat([embeds, model.embed_tokens(torch.tensor([[forced[step]]], device=device))], dim=1)
    sync(device)
    t3 = time.perf_counter()
    last = kept[-1][-1][0]  # last layer (after the final norm) of the last full forward
    positions = [prompt_len + j - 1 for j, tok in enumerate(forced) if tok == seg.seg_token_id]
    timings_masks: dict[str, float] = {}
    if positions:
        from m2sa_core.inference import FrameEntry, FrameFeatures

        entry = FrameEntry(FrameFeatures(emb, early, clip, upsampling), fused, inputs["resize_size"],
                           inputs["original_size"])
        masks, scores = _masks_and_scores(seg.stages.decode_masks(entry, [last[p] for p in positions], timings_masks))
    else:
        masks, scores = np.zeros((0,)), np.zeros((0,))
    sync(device)
    end = time.perf_counter()
    n = max(len(forced), 1)
    timings.update(sam_encode=(t1 - start) * 1e3, clip_encode=(t2 - t1) * 1e3, prefill=(t_prefill - t2) * 1e3,
                   decode=(t3 - t_prefill) * 1e3, decode_per_token=(t3 - t_prefill) * 1e3 / n,
                   total=(end - start) * 1e3, **timings_masks)
    return {"timings": timings, "greedy": greedy[: len(forced)], "masks": masks, "scores": scores}


def agreement(a: dict, b: dict, index: int = 0) -> dict:
    """Return the same argmax tokens and (nearly) equal masks between our output ``a`` and reference ``b``."""
    ga, gb = a["greedy"][index] or [], b["greedy"]
    same_tokens = sum(x == y for x, y in zip(ga, gb)) / max(len(gb), 1)
    ma, mb = a["masks"][index], b["masks"]
    diff = float((ma != mb).mean()) if ma.shape == mb.shape and ma.size else (0.0 if ma.shape == mb.shape else 1.0)
    return {"token_agreement": same_tokens, "mask_pixel_disagreement": diff}


# -- GPU floor -------------------------------------------------------------------------------
def copy_bandwidth(device: torch.device, nbytes: int = 2**30, repeats: int = 10) -> float:
    """
    Bytes a second moved by a device-to-device copy of ``nbytes`` (read + written, so 2x).

    The decode floor's denominator: a batch-1 decode step reads every weight once, and a
    large copy is the fastest the memory moves on this device in this run.
    """
    x = torch.empty(nbytes, dtype=torch.uint8, device=device)
    y = torch.empty_like(x)
    for _ in range(3):
        y.copy_(x)
    sync(device)
    t = time.perf_counter()
    for _ in range(repeats):
        y.copy_(x)
    sync(device)
    bandwidth = 2 * x.numel() * repeats / (time.perf_counter() - t)
    del x, y
    return bandwidth


def matmul_peak(device: torch.device, size: int = 8192, dtype: torch.dtype = torch.bfloat16,
                repeats: int = 10) -> float:
    """FLOP/s of a square ``size`` matmul in ``dtype``: the compute floor's denominator."""
    a = torch.randn(size, size, device=device, dtype=dtype)
    for _ in range(3):
        a @ a
    sync(device)
    t = time.perf_counter()
    for _ in range(repeats):
        a @ a
    sync(device)
    flops = 2 * size**3 * repeats / (time.perf_counter() - t)
    del a
    return flops


def llm_weight_bytes(model) -> int:
    """Bytes of language-model weights a decode step reads (the embedding table is gathered, not read)."""
    return sum(p.numel() * p.element_size() for n, p in model.llm.named_parameters() if "embed_tokens" not in n)


def command_flops(seg: Segmenter, image: np.ndarray, prompt: list[int], n_targets: int, encode: bool = True) -> float:
    """
    Count the FLOPs of one command's compute-bound work: the encoders (``encode``), the prefill and the masks.

    With ``encode=False`` the frame is encoded outside the count: a command on a cached frame.
    """
    from torch.utils.flop_counter import FlopCounterMode

    device, model = seg.device, seg.model
    seg.clear_cache()
    timings: dict[str, float] = {}
    with torch.inference_mode():
        entry = None if encode else seg.stages.encode_frame(image, None, timings)
        with FlopCounterMode(display=False) as counter:
            if entry is None:
                entry = seg.stages.encode_frame(image, None, timings)
            embeds = model.merge_image_embeddings(torch.tensor([prompt], device=device),
                                                  entry.features.clip_embeds)[0]
            model.llm.model(inputs_embeds=embeds, use_cache=False)
            model.decode_masks(entry.fused, torch.zeros(n_targets, model.config.hidden_size, device=device,
                                                        dtype=model.dtype), entry.features.upsampling_weights)
    seg.clear_cache()
    return counter.get_total_flops()


def gpu_floor(seg: Segmenter, image: np.ndarray, prompt: list[int], n_tokens: int, n_targets: int) -> dict:
    """Lower bound per command: encoders + prefill + masks at matmul peak, decode at memory bandwidth."""
    device = seg.device
    bandwidth = copy_bandwidth(device)
    matmul = matmul_peak(device)
    flops = command_flops(seg, image, prompt, n_targets)
    weight_bytes = llm_weight_bytes(seg.model)
    compute_ms = flops / matmul * 1e3
    decode_ms = n_tokens * weight_bytes / bandwidth * 1e3
    return {"bandwidth_TBps": bandwidth / 1e12, "matmul_TFLOPs": matmul / 1e12, "flops_G": flops / 1e9,
            "weight_bytes_GB": weight_bytes / 1e9, "floor_ms": compute_ms + decode_ms,
            "floor_compute_ms": compute_ms, "floor_decode_ms": decode_ms}


# -- driver ----------------------------------------------------------------------------------
def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.strip().split("\n\n")[0])
    p.add_argument("--preset", default="tiny", choices=("tiny", "7b", "13b"))
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="auto", choices=("auto", *DTYPE_NAMES))
    p.add_argument("--weights", default="random", help="'random' (preset) or a checkpoint directory")
    p.add_argument("--new-tokens", default="32,96", help="forced answer lengths, comma separated")
    p.add_argument("--targets", default="1,4", help="[SEG] counts per answer, comma separated")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--decoder", default="auto", choices=("auto", "dynamic", "static", "graph"),
                   help="our path's KV cache: dynamic, static, static + CUDA graph decode step, or auto "
                        "(graph on CUDA, dynamic on CPU)")
    p.add_argument("--quantization", default="none", choices=("none", "int8", "int4"),
                   help="language model weights through bitsandbytes (see bench/bench_quantization.py); a "
                        "quantized model decodes without the CUDA graph")
    p.add_argument("--image", default="480x640", help="frame size HxW")
    p.add_argument("--no-reference", action="store_true", help="time our path only")
    p.add_argument("--quick", action="store_true", help="tiny smoke run: 8 tokens, 1 target, 1 repeat")
    p.add_argument("--no-write", action="store_true", help="do not append to bench/RESULTS.md")
    p.add_argument("--results", default=str(RESULTS))
    p.add_argument("--json", default=None, help="also write the raw numbers here")
    p.add_argument("--profile", default=None, type=Path,
                   help="also profile one warm generation and write its kernel table here")
    args = p.parse_args(argv)
    if args.quick:
        args.new_tokens, args.targets, args.repeats = "8", "1", 1
    return args


def machine(device: torch.device) -> str:
    cpu = host_line()
    gpu = f", {torch.cuda.get_device_name(device)}" if device.type == "cuda" else ""
    load = ", load average %.1f/%.1f/%.1f at start" % os.getloadavg()
    return f"{cpu}{gpu}; torch {torch.__version__}{load}"


def timed(fn: Callable[[], dict], repeats: int, device: torch.device) -> tuple[list[dict], float]:
    fn()  # warm-up
    runs = []
    with PeakMemory(device) as mem:
        for _ in range(repeats):
            runs.append(fn())
    return runs, mem.peak_mib


def stage_means(runs: list[dict]) -> dict[str, float]:
    keys = runs[0]["timings"].keys()
    return {k: statistics.fmean(r["timings"].get(k, 0.0) for r in runs) for k in keys}


def run(args: argparse.Namespace) -> dict:
    device = torch.device(args.device)
    dtype = dtype_from_name(args.dtype)
    new_tokens = [int(x) for x in args.new_tokens.split(",")]
    targets = [int(x) for x in args.targets.split(",")]
    source = args.preset if args.weights == "random" else args.weights
    t0 = time.perf_counter()
    seg = Segmenter.from_pretrained(source, device=device, dtype=dtype, max_new_tokens=max(new_tokens) + 1,
                                    decoder=args.decoder, quantization=args.quantization)
    build_s = time.perf_counter() - t0
    h, w = (int(v) for v in args.image.split("x"))
    image = toy_example(0, size=(h, w)).image
    prompts = [seg.prompt_ids(c) for c in COMMANDS]
    report = {"preset": args.preset, "weights": args.weights, "device": str(device), "dtype": str(seg.dtype),
              "decoder": args.decoder, "quantization": args.quantization,
              "machine": machine(device), "build_s": build_s, "scenarios": [], "multi": []}
    for n_tok in new_tokens:
        for n_tgt in targets:
            forced = forced_answer(seg, n_tok, n_tgt)
            row: dict = {"new_tokens": n_tok, "targets": n_tgt}

            def uncached() -> dict:
                seg.clear_cache()
                return ours(seg, image, prompts[:1], [forced], None)

            runs, row["ours_peak_mib"] = timed(uncached, args.repeats, device)
            row["ours_stages_ms"] = stage_means(runs)
            row["ours_p50_ms"] = pct([r["timings"]["total"] for r in runs], 50)
            row["ours_p95_ms"] = pct([r["timings"]["total"] for r in runs], 95)
            cached, _ = timed(lambda: ours(seg, image, prompts[:1], [forced], "frame"), args.repeats, device)
            row["ours_cached_p50_ms"] = pct([r["timings"]["total"] for r in cached], 50)
            if not args.no_reference:
                ref, row["ref_peak_mib"] = timed(lambda: reference(seg, image, prompts[0], forced), args.repeats,
                                                 device)
                row["ref_stages_ms"] = stage_means(ref)
                row["ref_p50_ms"] = pct([r["timings"]["total"] for r in ref], 50)
                row["ref_p95_ms"] = pct([r["timings"]["total"] for r in ref], 95)
                row["speedup_p50"] = row["ref_p50_ms"] / row["ours_p50_ms"]
                row["agreement"] = agreement(runs[-1], ref[-1])
            if device.type == "cuda":
                row["floor"] = gpu_floor(seg, image, prompts[0], n_tok, n_tgt)
                row["p50_over_floor"] = row["ours_p50_ms"] / row["floor"]["floor_ms"]
            report["scenarios"].append(row)
            print(json.dumps(row, default=float), flush=True)
    # Four commands on one frame: batched with the cache vs four uncached calls (and the reference).
    n_tok, n_tgt = new_tokens[0], targets[0]
    forced = forced_answer(seg, n_tok, n_tgt)
    multi: dict = {"commands": len(COMMANDS), "new_tokens": n_tok, "targets": n_tgt}

    def batched() -> dict:
        seg.clear_cache()
        return ours(seg, image, prompts, [forced] * len(prompts), "frame")

    def four_uncached() -> dict:
        start = time.perf_counter()
        for p in prompts:
            seg.clear_cache()
            ours(seg, image, [p], [forced], None)
        return {"timings": {"total": (time.perf_counter() - start) * 1e3}}

    def four_sequential_cached() -> dict:
        seg.clear_cache()
        start = time.perf_counter()
        for p in prompts:
            ours(seg, image, [p], [forced], "frame")
        return {"timings": {"total": (time.perf_counter() - start) * 1e3}}

    b_runs, _ = timed(batched, args.repeats, device)
    u_runs, _ = timed(four_uncached, args.repeats, device)
    s_runs, _ = timed(four_sequential_cached, args.repeats, device)
    multi["batched_cached_ms"] = pct([r["timings"]["total"] for r in b_runs], 50)
    multi["sequential_cached_ms"] = pct([r["timings"]["total"] for r in s_runs], 50)
    multi["uncached_x4_ms"] = pct([r["timings"]["total"] for r in u_runs], 50)
    multi["speedup_vs_uncached"] = multi["uncached_x4_ms"] / multi["batched_cached_ms"]
    if not args.no_reference:
        def four_reference() -> dict:
            start = time.perf_counter()
            for p in prompts:
                reference(seg, image, p, forced)
            return {"timings": {"total": (time.perf_counter() - start) * 1e3}}

        r_runs, _ = timed(four_reference, max(1, args.repeats // 2), device)
        multi["reference_x4_ms"] = pct([r["timings"]["total"] for r in r_runs], 50)
        multi["speedup_vs_reference"] = multi["reference_x4_ms"] / multi["batched_cached_ms"]
    report["multi"].append(multi)
    print(json.dumps(multi, default=float), flush=True)
    if args.profile is not None:
        from bench.decode_profile import profile_generation

        report["profile"] = profile_generation(seg, image, prompts[0], forced, args.profile)
        print(json.dumps(report["profile"], default=float), flush=True)
    return report


def to_markdown(report: dict, command: str) -> str:
    lines = [
        f"## bench_inference: preset {report['preset']} ({report['weights']} weights) on {report['device']}, "
        f"{report['dtype']}, {report['decoder']} KV cache"
        + (f", {report['quantization']} language model" if report.get("quantization", "none") != "none" else ""),
        "",
        f"- date: {dt.datetime.now(dt.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- machine: {report['machine']}",
        f"- command: `{command}`",
        f"- model build: {report['build_s']:.1f} s",
        "",
        "Per command on a new frame (stage times are means in ms; p50/p95 of the whole command):",
        "",
        "| tokens | [SEG] | path | SAM enc | CLIP enc | prefill | decode/token | mask dec | postproc | p50 | p95 |"
        " peak MiB |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in report["scenarios"]:
        for path in ("ours", "ref"):
            if f"{path}_stages_ms" not in row:
                continue
            s = row[f"{path}_stages_ms"]
            lines.append(
                f"| {row['new_tokens']} | {row['targets']} | {'ours' if path == 'ours' else 'reference'} | "
                f"{s.get('sam_encode', 0):.1f} | {s.get('clip_encode', 0):.1f} | {s.get('prefill', 0):.1f} | "
                f"{s.get('decode_per_token', 0):.2f} | {s.get('mask_decode', 0):.1f} | {s.get('postprocess', 0):.1f} | "
                f"{row[f'{path}_p50_ms']:.1f} | {row[f'{path}_p95_ms']:.1f} | {row[f'{path}_peak_mib']:.0f} |"
            )
    lines += ["", "| tokens | [SEG] | ours cached-frame p50 ms | reference/ours (p50) | token agreement |"
              " mask pixels differing | floor ms | ours p50 / floor |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for row in report["scenarios"]:
        ag = row.get("agreement", {})
        floor = row.get("floor", {})
        lines.append(
            f"| {row['new_tokens']} | {row['targets']} | {row['ours_cached_p50_ms']:.1f} | "
            f"{row.get('speedup_p50', float('nan')):.2f}x | {ag.get('token_agreement', float('nan')):.3f} | "
            f"{ag.get('mask_pixel_disagreement', float('nan')):.5f} | "
            f"{floor.get('floor_ms', float('nan')):.1f} | {row.get('p50_over_floor', float('nan')):.2f} |"
        )
    for m in report["multi"]:
        lines += [
            "",
            f"{m['commands']} commands on one frame ({m['new_tokens']} tokens, {m['targets']} [SEG] each), p50 ms: "
            f"batched with the cache {m['batched_cached_ms']:.1f}; sequential with the cache "
            f"{m['sequential_cached_ms']:.1f}; 4 uncached calls {m['uncached_x4_ms']:.1f} "
            f"(**{m['speedup_vs_uncached']:.2f}x**)"
            + (f"; reference x4 {m['reference_x4_ms']:.1f} ({m['speedup_vs_reference']:.2f}x)"
               if "reference_x4_ms" in m else "") + ".",
        ]
    prof = report.get("profile")
    if prof is not None:
        busy = ("" if prof["device_busy_share"] is None else
                f", device busy {prof['device_busy_ms']:.1f} ms ({prof['device_busy_share']:.0%}: below 100% "
                "the loop is host-bound)")
        lines += ["", f"Profiled generation ({prof['tokens']} forced tokens): wall {prof['wall_ms']:.1f} ms"
                      f"{busy}; kernel table in `{prof['table']}`."]
    floors = [r["floor"] for r in report["scenarios"] if "floor" in r]
    if floors:
        f = floors[0]
        lines += ["", f"Floor inputs measured in the run: {f['bandwidth_TBps']:.2f} TB/s copy bandwidth, "
                      f"{f['matmul_TFLOPs']:.0f} TFLOP/s bf16 matmul, {f['weight_bytes_GB']:.2f} GB of LLM weights "
                      "read per decoded token."]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> dict:
    args = parse_args(argv)
    report = run(args)
    text = to_markdown(report, command_line(argv, "bench_inference.py"))
    publish_report(text, report, args.results, write=not args.no_write, json_path=args.json, header=RESULTS_HEADER)
    return report


if __name__ == "__main__":
    main()
