"""Did stage 1b's CLIP learn what a patch shows, or its training scenes? Patch words, training against val.

Stage 1b pulls each CLIP patch towards the words of what covers it (" mug" and "2" on the
second mug from the left; ``m2sa_core.model.patch_alignment``). Its in-loop eval reads val
only, so a low "2" on second instances could mean two things: CLIP cannot tell which of
two mugs is the second, or it learned which one is in each training scene by heart. This
probe scores the same model on the first records of the world's training split and of its
val split, with the same candidate words stage 1b trained against; a wide gap between the
two is memorising, a narrow one at a low figure is a rule not learned.

    .venv/bin/python training/tiny/research/probe_patch_words.py --model runs/tiny/1b_clip/final --world data/synth

Scores any checkpoint with a CLIP (a stage-1b final, a stage-3 final, the shipped model);
the world must be the one the candidate words came from (its ``masks_train.json``).

``--also WORLD`` scores the training split of another world too, with the first world's
candidate words: images no stage of CLIP trained on but stage 3 may (stage 3's own world,
or a new one), so the train row can be read against both kinds of unseen image.

``--by-object`` reads the patches object by object instead, as the language model must
to count: for each object, the patches it covers more than half of ("main" patches),
grouped by how many of its category the image holds and its own number. An object with
no main patch is one CLIP cannot tell apart at its grid; a second mug none of whose
patches reads "2" is one the language model has no token to count by (RUNS.md, run 56).
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from m2sa_core.data.patch_words import PatchWordSampleBuilder
from m2sa_core.model.checkpoint import from_pretrained
from m2sa_core.model.patch_alignment import clip_grid, collate_patch_words, instance_guesses
from m2sa_core.model.preprocess import ImageProcessor
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


OBJECT_COLUMNS = ("objects", "no main patch", "some patch reads its number", "most patches read it",
                  "some patch reads a higher number")


def object_reads(model, tokenizer, builder, records: list, batch_size: int = 25) -> dict[tuple[int, int], Counter]:
    """(objects of its category in the image, its own number) -> counts of OBJECT_COLUMNS."""
    processor, grid = ImageProcessor(model.config), clip_grid(model)
    names = [tokenizer.decode([word]).strip() for word in builder.instance_candidates]
    rows: dict[tuple[int, int], Counter] = {}
    for start in range(0, len(records), batch_size):
        samples = [builder.build(r) for r in records[start:start + batch_size]]
        batch = collate_patch_words(samples, processor, grid, builder.category_candidates,
                                    builder.instance_candidates)
        guesses = instance_guesses(model, batch)  # under no_grad already
        for b, sample in enumerate(samples):
            if not len(sample.masks):
                continue
            coverage = processor.clip_patch_coverage(sample.masks, grid)
            of_category = Counter(int(c) for c in sample.category_words)
            for obj, (category, instance) in enumerate(zip(sample.category_words, sample.instance_words)):
                own = tokenizer.decode([int(instance)]).strip()
                if not own.isdigit():
                    continue
                row = rows.setdefault((of_category[int(category)], int(own)), Counter())
                row["objects"] += 1
                main = coverage[obj] > 0.5
                if not main.any():
                    row["no main patch"] += 1
                    continue
                reads = Counter(names[k] for k in guesses[b][main].tolist())
                row["some patch reads its number"] += own in reads
                row["most patches read it"] += reads.most_common(1)[0][0] == own
                row["some patch reads a higher number"] += any(r.isdigit() and int(r) > int(own) for r in reads)
    return rows


def object_markdown(rows: dict[str, dict[tuple[int, int], Counter]], items: dict[str, int]) -> str:
    lines = ["| split | images | of its category | its number | " + " | ".join(OBJECT_COLUMNS) + " |",
             "|---|---:|---:|---:|" + "---:|" * len(OBJECT_COLUMNS)]
    for split, by_group in rows.items():
        for (many, own), counts in sorted(by_group.items()):
            lines.append(f"| {split} | {items[split]} | {many} | {own} | "
                         + " | ".join(str(counts[c]) for c in OBJECT_COLUMNS) + " |")
    return "\n".join(lines)


def masks_source(world: Path, split: str):
    """One split of a world's mask annotations (``m2sa-synth --out`` layout)."""
    return open_source(DataSourceConfig(kind="mask_annotations", name=f"{world}:{split}",
                                        path=str(world / f"masks_{split}.json"), image_root=str(world / "images")))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", type=Path, required=True, help="a checkpoint directory (save_pretrained format)")
    p.add_argument("--world", type=Path, default=Path("data/synth"), help="the training world (m2sa-synth --out)")
    p.add_argument("--images", type=int, default=400, help="images scored per split (the first ones)")
    p.add_argument("--by-object", action="store_true", help="read the patches object by object (see above)")
    p.add_argument("--also", type=Path, action="append", default=[], metavar="WORLD",
                   help="score this world's training split too, with --world's candidate words (repeatable)")
    args = p.parse_args()
    model, tokenizer = from_pretrained(args.model)
    sources = {split: masks_source(args.world, split) for split in SPLITS}
    sources.update({f"train of {other}": masks_source(other, "train") for other in args.also})
    builder = PatchWordSampleBuilder(tokenizer, list(sources["train"].items))
    rows, items = {}, {}
    for split, source in sources.items():
        records = list(source.items)[: args.images]
        items[split] = len(records)
        rows[split] = (object_reads(model, tokenizer, builder, records) if args.by_object
                       else patch_word_report(model, tokenizer, builder, records))
    print(object_markdown(rows, items) if args.by_object else markdown(rows, items))


if __name__ == "__main__":
    main()
