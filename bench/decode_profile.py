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
Where one forced answer's generation time goes, for the next person tuning the decode loop.

The per-token gap to the bandwidth floor is either device work (kernels slower than the
weights' read time) or host work (the device idles while Python launches the next step).
``device busy share`` = kernel time / wall time of the generation tells the two apart:
near 1 means the kernels are the cost, well below 1 means the loop is host-bound. The
kernel table says which ops dominate.
"""

from __future__ import annotations

from pathlib import Path
import time
from typing import Any

from m2sa_core.inference import Segmenter
import numpy as np
import torch
from torch.profiler import profile, ProfilerActivity


def _self_device_us(event: Any) -> float:
    for name in ("self_device_time_total", "self_cuda_time_total"):  # renamed across torch releases
        value = getattr(event, name, None)
        if value is not None:
            return float(value)
    return 0.0


def profile_generation(seg: Segmenter, image: np.ndarray, prompt: list[int], forced: list[int], out: Path,
                       rows: int = 30) -> dict[str, Any]:
    """Profile one warm generation (frame cached, graph captured) and write the kernel table to ``out``."""
    timings: dict[str, float] = {}
    entry = seg.stages.encode_frame(image, "profiled-frame", timings)
    seg.stages.generate(entry.features, [prompt], timings, forced=[forced])  # warm-up: graph capture, allocator
    cuda = seg.device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        if cuda:
            torch.cuda.synchronize(seg.device)
        start = time.perf_counter()
        seg.stages.generate(entry.features, [prompt], timings, forced=[forced])
        if cuda:
            torch.cuda.synchronize(seg.device)
        wall_ms = (time.perf_counter() - start) * 1e3
    events = prof.key_averages()
    device_ms = sum(_self_device_us(e) for e in events) / 1e3 if cuda else None
    sort_by = "self_cuda_time_total" if cuda else "self_cpu_time_total"
    table = events.table(sort_by=sort_by, row_limit=rows)
    summary = {
        "tokens": len(forced),
        "wall_ms": wall_ms,
        "per_token_ms": timings.get("decode_per_token"),
        "device_busy_ms": device_ms,
        "device_busy_share": device_ms / wall_ms if device_ms is not None and wall_ms > 0 else None,
        "table": str(out),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    busy = ("n/a on CPU" if device_ms is None
            else f"{device_ms:.1f} ms of {wall_ms:.1f} ms ({summary['device_busy_share']:.0%})")
    out.write_text(f"generation of {len(forced)} forced tokens on {seg.device}, decoder {seg.decoder}: "
                   f"wall {wall_ms:.1f} ms, device busy {busy}\n\n{table}\n")
    return summary
