"""Did stage 1b's CLIP learn what a patch shows, or its training scenes? Patch words, training against val.

Stage 1b pulls each CLIP patch towards the words of what covers it (" mug" and "2" on the
second mug from the left; ``m2sa_core.model.patch_alignment``). Its in-loop eval reads val
only, so a low "2" on second instances could mean two things: CLIP cannot tell which of
two mugs is the second, or it learned which one is in each training scene by heart. This
probe scores the same model on the first records of the world's training split and of its
val split, with the same candidate words stage 1b trained against; a wide gap between the
two is memorising, a narrow one at a low figure is a rule not learned.

    .venv/bin/python scripts/probe_patch_words.py --model runs/tiny/1b_clip/final --world data/synth

Scores any checkpoint with a CLIP (a stage-1b final, a stage-3 final, the shipped model);
the world must be the one the candidate words came from (its ``masks_train.json``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from m2sa_core.data.patch_words import PatchWordSampleBuilder
from m2sa_core.model.checkpoint import from_pretrained
from training.config import DataSourceConfig
from training.sources import open_source
from training.stage_evals import patch_word_report

SPLITS = ("train", "val")
# The columns: category word on object patches, then instance word per true instance.
COLUMNS = ("category", "instance_1", "instance_2", "instance_3")


def markdown(rows: dict[str, dict[str, float]], items: dict[str, int]) -> str:
    head = "| split | images | category | \"1\" on first instances | \"2\" on second | \"3\" on third |"
    lines = [head, "|---|---:|---:|---:|---:|---:|"]
    for split, report in rows.items():
        cells = [f"{report['category']:.3f}"]
        for column in COLUMNS[1:]:
            patches = report.get(f"patches_{column}", 0)
            cells.append(f"{report[column]:.3f} ({patches})" if patches else "-")
        lines.append(f"| {split} | {items[split]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", type=Path, required=True, help="a checkpoint directory (save_pretrained format)")
    p.add_argument("--world", type=Path, default=Path("data/synth"), help="the training world (m2sa-synth --out)")
    p.add_argument("--images", type=int, default=400, help="images scored per split (the first ones)")
    args = p.parse_args()
    model, tokenizer = from_pretrained(args.model)
    sources = {split: open_source(DataSourceConfig(kind="mask_annotations", name=split,
                                                   path=str(args.world / f"masks_{split}.json"),
                                                   image_root=str(args.world / "images")))
               for split in SPLITS}
    builder = PatchWordSampleBuilder(tokenizer, list(sources["train"].items))
    rows, items = {}, {}
    for split, source in sources.items():
        records = list(source.items)[: args.images]
        rows[split], items[split] = patch_word_report(model, tokenizer, builder, records), len(records)
    print(markdown(rows, items))


if __name__ == "__main__":
    main()
