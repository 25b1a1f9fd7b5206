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
The paper's Table 6 on the synthetic world.

Multiple vs single [SEG], with and without early local feature fusion, same data,
budget and seed.

    python -m training.ablation --config training/tiny/3_m2sa.yaml --out runs/ablation \
        --data-dir data/heldout model.init_from=runs/tiny/2_language/final

Each variant is trained by the same training loop (``seg_mode`` and
``model.overrides.use_early_fusion`` are the only differences; with the staged config
every variant starts from the same pretrained SAM and language model), then scored on the
synthetic test splits with the generative protocol against per-target ground truth
(what a robot needs: one mask per target), and by the IoU of the union of predicted
masks against the union of ground-truth masks (fair to the single-[SEG] variant, which
can only ever give one mask). Results go to ``--out``/ablation.json and a markdown table.

The variants are independent: ``--variant multi_fusion`` trains and scores one, so they
can run side by side (four processes on one GPU); each keeps its scores in
``--out``/TAG/scores.json, and a run over all variants afterwards only assembles the table
(a run naming two or more with ``--variant``, a table of those).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
import random
import sys
import time

from m2sa_core.data.builder import SampleBuilder
from m2sa_core.evaluation.metrics import IoUAccumulator, SegmentationEvaluator
from m2sa_core.inference import Segmenter
import numpy as np
from tqdm import tqdm
from training.checkpoints import checkpoint_step, latest_intact_checkpoint
from training.config import DataSourceConfig, load_config
from training.distributed import DistInfo, resolve_device
from training.sources import open_source
from training.train import train

VARIANTS = (
    ("M2SA (multiple [SEG] + early fusion)", "multi", True),
    ("multiple [SEG], no early fusion", "multi", False),
    ("single [SEG] + early fusion", "single", True),
    ("single [SEG], no early fusion (LISA-style)", "single", False),
)
TAGS = tuple(f"{seg_mode}_{'fusion' if fusion else 'nofusion'}" for _, seg_mode, fusion in VARIANTS)
TEST_FILES = ("MMR_test_obj_only.json", "MMR_test_part_only.json", "MMR_test_mixed.json")


def score(model_dir: Path, data_dir: Path, max_items: int, device: str = "cpu",
          duplicate_iou: float | None = None) -> dict:
    """
    Per-target and union scores of the variant's free answers.

    ``duplicate_iou`` as ``Segmenter``'s (None: the model's own setting).
    """
    segmenter = Segmenter.from_pretrained(model_dir, device=device, duplicate_iou=duplicate_iou)
    builder = SampleBuilder(segmenter.tokenizer)
    per_target = SegmentationEvaluator("generative")
    union = IoUAccumulator()
    for name in TEST_FILES:
        # Masks of present targets only: a command about something absent has no mask to score,
        # and leaving it out keeps the first questions scored those of a world without them.
        records = open_source(DataSourceConfig(kind="synthetic", path=str(data_dir / name),
                                               image_root=str(data_dir / "images"),
                                               exclude_families=["absent"])).items
        for i in tqdm(range(min(len(records), max_items)), desc=f"score {name}", leave=False):
            record = records[i]
            command = builder.command_for(record, random.Random(record.record_id))
            result = segmenter.segment(record.load_image(), command, frame_key=str(record.image_path))
            gts = [t.mask(record.height, record.width) for t in record.targets]
            preds = [t.mask for t in result.targets]
            per_target.add(preds, gts, split=record.split)
            pred_union = np.any(preds, axis=0) if preds else np.zeros_like(gts[0])
            union.add(pred_union, np.any(gts, axis=0))
    reports = {k: v.as_dict() for k, v in per_target.report().items()}
    return {"per_target": reports, "union": {"giou": union.giou, "ciou": union.ciou, "count": union.count},
            "duplicate_iou": segmenter.duplicate_iou}


def scores_name(duplicate_iou: float | None) -> str:
    """Scores at the model's own merging setting, or at another one, each kept apart."""
    return "scores.json" if duplicate_iou is None else f"scores_duplicate_iou_{duplicate_iou:g}.json"


def resume_step(ckpt_root: Path) -> int:
    """
    Return the step a resumed variant continues from (0 for a fresh one).

    ``train_s`` times only the invocation that finished, so the table must say which
    steps that was.
    """
    latest = latest_intact_checkpoint(ckpt_root)
    return checkpoint_step(latest) if latest is not None else 0


def run_variant(config, run_dir: Path, data_dir: Path, max_items: int, duplicate_iou: float | None = None) -> dict:
    """
    Train (or resume) one variant and score it once.

    The scores are kept beside its model, so a later run (the table over variants
    trained side by side) reuses them.
    """
    scores_file = run_dir / scores_name(duplicate_iou)
    if scores_file.exists():
        return json.loads(scores_file.read_text())
    start = time.perf_counter()
    final = run_dir / "final"
    resumed_from, trained_here = 0, not (final / "model.safetensors").exists()
    if trained_here:
        resumed_from = resume_step(run_dir / "checkpoints")
        train(config, resume=True)
    train_s = time.perf_counter() - start
    device = str(resolve_device(config.device, DistInfo()))  # score where it trained
    result = {"train_s": train_s, "trained_here": trained_here, "resumed_from": resumed_from,
              "scores": score(final, data_dir, max_items, device, duplicate_iou)}
    scores_file.write_text(json.dumps(result, indent=2))
    return result


SPLIT_COLUMNS = (("test_obj_only", "obj"), ("test_part_only", "part"), ("test_mixed", "mixed"))


def variant_config(config_path: str, overrides: list[str], out_dir: Path, seg_mode: str, fusion: bool,
                   steps: int | None):
    """
    Return the stage config with only this variant's differences: ``seg_mode`` and early fusion.

    Fusion is set as one key of ``model.overrides``, so the config's other model overrides
    (stage 3's IoU-head loss weight) stay as the shipped model trained with them; ``steps``
    None keeps the config's own schedule.
    """
    changes = [*overrides, f"out_dir={out_dir}", f"seg_mode={seg_mode}", "eval_data=[]",
               f"model.overrides.use_early_fusion={str(fusion).lower()}"]
    if steps is not None:
        changes.append(f"optim.max_steps={steps}")
    return load_config(config_path, changes)


def trained(result: dict) -> str:
    """How a variant's model came to be, in the words of the table's notes."""
    start = result.get("resumed_from", 0)
    minutes = result["train_s"] / 60
    if not result.get("trained_here", True):
        return f"{result['steps']} steps, its model trained before this run (scored here, not timed)"
    if start:
        return (f"trained {result['steps']} steps, resumed at step {start}: the last "
                f"{result['steps'] - start} in {minutes:.1f} min")
    return f"trained {result['steps']} steps in {minutes:.1f} min"


def merging(scores: dict) -> str:
    """Whether the scored answers had an instance named twice merged (scores before it: not)."""
    threshold = scores.get("duplicate_iou", 0.0)
    return f"instances named twice merged at IoU {threshold:g}" if threshold else "no instances merged"


def markdown(results: list[dict], command: str) -> str:
    split_heads = " | ".join(f"gIoU {short}" for _, short in SPLIT_COLUMNS)
    lines = [
        f"| variant | {split_heads} | gIoU (per target) | cIoU (per target) | target-count acc. | gIoU (union) "
        "| cIoU (union) |",
        "|---|" + "---:|" * (len(SPLIT_COLUMNS) + 5),
    ]
    for r in results:
        per = r["scores"]["per_target"]
        a = per["all"]
        u = r["scores"]["union"]
        splits = " | ".join(f"{100 * per[s]['giou']:.1f}" if s in per else "-" for s, _ in SPLIT_COLUMNS)
        lines.append(f"| {r['variant']} | {splits} | {100 * a['giou']:.1f} | {100 * a['ciou']:.1f} | "
                     f"{100 * a['count_accuracy']:.1f} | {100 * u['giou']:.1f} | {100 * u['ciou']:.1f} |")
    lines += ["", f"Command: `{command}`", ""]
    lines += [f"- {r['variant']}: {trained(r)}; {merging(r['scores'])}" for r in results]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="m2sa-ablation", description=__doc__.strip(),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="training/tiny/3_m2sa.yaml")
    parser.add_argument("--data-dir", default=None, help="synthetic world whose test splits score the variants "
                        "(default: the config's training world)")
    parser.add_argument("--steps", type=int, default=None,
                        help="training steps per variant (same for all; default: the config's optim.max_steps)")
    parser.add_argument("--out", default="runs/ablation")
    parser.add_argument("--max-items", type=int, default=60, help="questions per test split")
    parser.add_argument("--variant", action="append", choices=TAGS, default=None,
                        help="train and score only this variant (repeatable; default: all four); with two or "
                             "more, the table holds those")
    parser.add_argument("--duplicate-iou", type=float, default=None,
                        help="score with instances named twice merged at this IoU (0 = none; default: the "
                             "model's setting, stage 3's config); scores of each setting are kept apart")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args(argv)
    if args.duplicate_iou is not None and not 0.0 <= args.duplicate_iou <= 1.0:
        parser.error(f"--duplicate-iou must be in [0, 1] (0 = off), got {args.duplicate_iou}")
    out = Path(args.out)
    results = []
    for (title, seg_mode, fusion), tag in zip(VARIANTS, TAGS):
        if args.variant and tag not in args.variant:
            continue
        config = variant_config(args.config, args.overrides, out / tag, seg_mode, fusion, args.steps)
        data_dir = Path(args.data_dir) if args.data_dir else Path(config.data[0].path).parent
        results.append(run_variant(config, out / tag, data_dir, args.max_items, args.duplicate_iou))
        results[-1].update(variant=title, seg_mode=seg_mode, early_fusion=fusion, steps=config.optim.max_steps)
        print(f"[ablation] {title}: {results[-1]['scores']['per_target']['all']}", flush=True)
    if args.variant and len(results) < 2:  # one of several processes side by side: no table yet
        return 0
    suffix = "" if args.duplicate_iou is None else f"_duplicate_iou_{args.duplicate_iou:g}"
    (out / f"ablation{suffix}.json").write_text(json.dumps(results, indent=2))
    command = "python -m training.ablation " + " ".join(argv if argv is not None else sys.argv[1:])
    table = markdown(results, command)
    (out / f"ablation{suffix}.md").write_text(table + "\n")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
