"""Does the model see what is in the image? Its answers to the world's questions about it.

Asks the scene questions of a world's conversation file (what is in view, how many of a
category, what is far left and far right, what is hidden) on its first images and counts
exact answers per kind, the counts of two or more apart. A language model that reads
nothing from its image tokens answers these from its priors alone: "There is 1" for
every count, the same object for every scene (training/tiny/research/RUNS.md, run 13). Works on
any stage from stage 2 on, and on the held-out world's conversations, which no stage
trains on.

    .venv/bin/python training/tiny/research/probe_seeing.py --model runs/tiny/2_language/final \
        --conversations data/heldout/conversations_train.json --images 60
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path

import cv2

from m2sa_core.data.synthetic.pretraining import COUNT, DESCRIBE, HIDDEN, LEFTMOST, RIGHTMOST
from m2sa_core.inference import Segmenter

KINDS = {"describe": DESCRIBE, "count": COUNT, "leftmost": LEFTMOST, "rightmost": RIGHTMOST, "hidden": HIDDEN}


def question_kind(question: str) -> str | None:
    for kind, templates in KINDS.items():
        for template in templates:
            start, _, end = template.partition("{name}")
            if question == template or (end and question.startswith(start) and question.endswith(end)):
                return kind
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--conversations", type=Path, default=Path("data/heldout/conversations_train.json"))
    parser.add_argument("--images", type=int, default=60)
    args = parser.parse_args(argv)
    entries = json.loads(args.conversations.read_text())["images"][: args.images]
    segmenter = Segmenter.from_pretrained(args.model, device="cpu")
    asked, exact = Counter(), Counter()
    for entry in entries:
        image = cv2.imread(str(args.conversations.parent / "images" / entry["file_name"]))[:, :, ::-1].copy()
        for turn in entry["conversations"]:
            kind = question_kind(turn["question"])
            if kind is None:
                continue
            if kind == "count" and not re.match(r"There is 1:", turn["answer"]):
                kind = "count of 2+"
            answer = (segmenter.segment(image, turn["question"]).raw_answer or "").strip()
            asked[kind] += 1
            exact[kind] += answer == turn["answer"]
    print(f"{args.model} on {len(entries)} images of {args.conversations}")
    print("| question | exact answers |\n|---|---:|")
    for kind in ("describe", "count", "count of 2+", "leftmost", "rightmost", "hidden"):
        if asked[kind]:
            print(f"| {kind} | {exact[kind]} / {asked[kind]} ({exact[kind] / asked[kind]:.0%}) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
