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
The in-loop evaluation of each training objective (``eval_every``, and after the last step).

Each stage measures what it trains: M2SA its generative gIoU and cIoU, SAM's promptable
stage its box- and point-prompt mIoU, the patch-alignment stage CLIP's nearest-word
accuracy. Every report goes to one console line, ``eval_stepN.json`` in the run's
directory and TensorBoard, so a stage's progress reads the same way whatever it trains.
"""

from __future__ import annotations

import json
from pathlib import Path

from training.config import TrainConfig
from training.distributed import DistInfo
from training.eval_mode import eval_mode


def report_eval(config: TrainConfig, step: int, report: dict[str, dict[str, float]], line: str, writer,
                prefix: str = "") -> None:
    """One console line, ``eval_stepN.json`` and a TensorBoard scalar per number of the report."""
    print(f"[eval] step {step}: {line}", flush=True)
    (Path(config.out_dir) / f"eval_step{step:08d}.json").write_text(json.dumps(report, indent=2))
    if writer is not None:
        for name, r in report.items():
            for key, value in r.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    writer.add_scalar(f"eval/{name}/{prefix}{key}", value, step)


def m2sa_eval(model, tokenizer, config: TrainConfig, step: int, info: DistInfo, writer, builder) -> None:
    """Log the generative gIoU and cIoU (and the rejections of absent commands) on the eval sources, across ranks."""
    from training.evaluate import evaluate_sources

    with eval_mode(model):
        report = evaluate_sources(model, tokenizer, config.eval_data, protocol="generative",
                                  max_items=config.eval_max_items, info=info)
    if info.is_main:
        line = " ".join(f"{split}: gIoU {r['giou']:.3f} cIoU {r['ciou']:.3f}" + _rejection_words(r)
                        for split, r in report.items())
        report_eval(config, step, report, line, writer)


def _rejection_words(split: dict) -> str:
    """Return the shares of absent commands rejected and present ones wrongly rejected, when there are absent ones."""
    if split.get("absent_rejected") is None:
        return ""
    return f" absent rejected {split['absent_rejected']:.3f} present rejected {split['present_rejected'] or 0.0:.3f}"


def promptable_eval(model, tokenizer, config: TrainConfig, step: int, info: DistInfo, writer, builder) -> None:
    """Box- and point-prompt mIoU on the eval sources (mask_annotations files), on rank 0."""
    from training.promptable_eval import evaluate_promptable
    from training.sources import open_source

    if not info.is_main:
        return
    report = {}
    for src in config.eval_data:
        report[src.name or src.kind] = evaluate_promptable(model, open_source(src).items, config.eval_max_items)
    line = " ".join(f"{name}: box mIoU {r.get('box_miou', 0):.3f} (parts {r.get('box_miou_part', 0):.3f}, "
                    f"small {r.get('box_miou_small', 0):.3f}) "
                    f"point mIoU {r.get('point_miou', 0):.3f} amodal {r.get('box_amodal_miou', 0):.3f}"
                    for name, r in report.items())
    report_eval(config, step, report, line, writer)


def patch_word_report(model, tokenizer, builder, records: list) -> dict[str, float]:
    """
    Return the nearest-word accuracy of CLIP's patch tokens over ``records`` as one batch.

    Against ``builder``'s candidate words, per true instance word as well (``instance_2``...).
    """
    from m2sa_core.model.patch_alignment import clip_grid, collate_patch_words, patch_word_accuracy
    from m2sa_core.model.preprocess import ImageProcessor
    import torch

    batch = collate_patch_words([builder.build(r) for r in records], ImageProcessor(model.config),
                                clip_grid(model), builder.category_candidates, builder.instance_candidates)
    names = [tokenizer.decode([word]).strip() for word in builder.instance_candidates]
    with torch.no_grad():
        return patch_word_accuracy(model, batch, names)


def patch_word_eval(model, tokenizer, config: TrainConfig, step: int, info: DistInfo, writer, builder) -> None:
    """
    Nearest-word accuracy of CLIP's patch tokens on the eval sources, on rank 0.

    The candidate words are the training builder's, so the eval asks the question the
    loss trains: which of the world's words covers this patch.
    """
    from m2sa_core.data.patch_words import INSTANCE_WORD_NAMES
    from training.sources import open_source

    if not info.is_main:
        return
    report = {}
    with eval_mode(model):
        for src in config.eval_data:
            records = list(open_source(src).items)[: config.eval_max_items or None]
            report[src.name or src.kind] = patch_word_report(model, tokenizer, builder, records)
    said = INSTANCE_WORD_NAMES[config.patch_instance_words]
    line = " ".join(f"{name}: category {r['category']:.3f} background {r['background']:.3f} "
                    f"{said} {r['instance']:.3f}" + (f" ({said} 2: {r['instance_2']:.3f})" if "instance_2" in r else "")
                    for name, r in report.items())
    report_eval(config, step, report, line, writer, prefix="patch_")
