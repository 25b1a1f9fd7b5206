"""Which targets does the model miss with the right answer given, and whose region does it draw?

Teacher-forces every question of a synthetic split (the ground-truth answer, one [SEG] per
target, as `m2sa-eval --protocol teacher-forced` scores it) and lists each target whose mask
has IoU below ``--below`` with its own ground truth, with the other target of the same
question that the mask overlaps most. A low teacher-forced gIoU can come from two failures.
Either SAM's masks are poor (the mask sits on the right part but is ragged), or a part's
[SEG] names another instance's part ("pan_3's bottom" drawn on pan_4's). They call for
different fixes, and the split's mean cannot tell them apart (training/tiny/research/RUNS.md, run 63).

    .venv/bin/python training/tiny/research/probe_instance_misses.py --model models/m2sa-tiny-synth \
        --data data/heldout/MMR_test_part_only.json --image-root data/heldout/images
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from m2sa_core.inference import Segmenter


def misses(segmenter: Segmenter, records, below: float) -> tuple[list[dict], int]:
    """(one entry per target under ``below``, the number of targets scored)."""
    from m2sa_core.data.builder import SampleBuilder
    from m2sa_core.evaluation.metrics import mask_iou
    from training.evaluate import teacher_forced_predictions

    builder = SampleBuilder.for_model(segmenter.tokenizer, segmenter.model.config, evaluation=True)
    found, scored = [], 0
    for record in records:
        predicted = teacher_forced_predictions(segmenter, builder, record).requested
        truths = [t.mask(record.height, record.width) for t in record.targets]
        for k, (target, mask) in enumerate(zip(record.targets, predicted)):
            scored += 1
            own = mask_iou(mask, truths[k])
            if own >= below:
                continue
            others = [(mask_iou(mask, truth), record.targets[j].label) for j, truth in enumerate(truths) if j != k]
            best_iou, best_label = max(others, default=(0.0, None))
            found.append({"question": record.question, "target": target.label, "iou": own,
                          "other": best_label, "other_iou": best_iou, "targets": len(truths)})
    return found, scored


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="a checkpoint directory of ours")
    parser.add_argument("--data", required=True, help="a synthetic split (MMR_*.json of m2sa-synth)")
    parser.add_argument("--image-root", required=True)
    parser.add_argument("--below", type=float, default=0.3, help="list targets whose IoU is under this")
    parser.add_argument("--questions", type=int, default=0, help="only the first N questions (0: all)")
    parser.add_argument("--family", action="append", default=[],
                        help="only questions of this family (part, object, mixed, ...; repeatable): e.g. the "
                             "part questions of a training split, to compare seen images with unseen ones")
    args = parser.parse_args(argv)
    for path in (Path(args.model), Path(args.data), Path(args.image_root)):
        if not path.exists():
            print(f"probe_instance_misses: {path} does not exist", file=sys.stderr)
            return 2
    # The model stack is imported once the arguments hold: a wrong path is told in a moment.
    from m2sa_core.inference import Segmenter
    from training.config import DataSourceConfig
    from training.sources import EmptySourceError, open_source

    try:
        records = open_source(DataSourceConfig(kind="synthetic", path=args.data, image_root=args.image_root,
                                               families=args.family)).items
    except EmptySourceError as err:  # every entry malformed: say which and why, in one line
        print(f"probe_instance_misses: {err}", file=sys.stderr)
        return 2
    if args.questions:
        records = records[: args.questions]
    found, scored = misses(Segmenter.from_pretrained(args.model), records, args.below)
    print(f"{args.model} on {len(records)} questions of {args.data}: {len(found)} of {scored} targets "
          f"under IoU {args.below} with the answer given")
    print("| question | target | IoU | drawn on (IoU) |\n|---|---|---:|---|")
    for m in found:
        drawn = f"{m['other']} ({m['other_iou']:.2f})" if m["other"] else "no other target"
        print(f"| {m['question']} | {m['target']} | {m['iou']:.2f} | {drawn} |")
    on_other = sum(1 for m in found if m["other_iou"] > m["iou"])
    print(f"\n{on_other} of {len(found)} overlap another target of their question more than their own")
    return 0


if __name__ == "__main__":
    sys.exit(main())
