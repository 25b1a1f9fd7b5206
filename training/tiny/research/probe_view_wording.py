"""Which words of a visible request make a model give the complete mask instead?

Asks the model the held-out visible R2SM request and variants of it with one piece
changed at a time, each about the same object of the same held-out image, and counts
how many answers come with visible masks. A variant that flips the count names the
words the model reads the mask kind from (training/tiny/research/RUNS.md, runs 9 and 10).

    .venv/bin/python training/tiny/research/probe_view_wording.py --model models/m2sa-tiny-synth \
        --heldout data/heldout --images 15
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import cv2

from m2sa_core.data.synthetic.questions import VISIBLE_PHRASINGS, phrasings_for
from m2sa_core.inference import Segmenter

HELD_OUT = phrasings_for(VISIBLE_PHRASINGS, held_out=True)[0]  # the R2SM test's visible request
HELD_OUT_START, HELD_OUT_END = HELD_OUT.split("{name}")
VARIANTS = (
    HELD_OUT,
    "Outline the {name}, without the hidden part.",
    "Outline the {name} as it appears.",
    "Outline the {name}, without the occluded part.",
    "Segment the {name}, without the occluded part.",
    "Segment the {name}, excluding the hidden part.",
    "Segment the {name} but not the hidden part.",
    "Outline only the visible part of the {name}.",
)


def visible_requests(heldout: Path, limit: int) -> list[tuple[Path, str]]:
    """(image, spoken name) of the first ``limit`` held-out images with a visible request for all instances."""
    found = []
    for entry in json.loads((heldout / "r2sm_test.json").read_text())["images"]:
        for query in entry["queries"]:
            text = query["text"]
            if query["mask_type"] == "modal" and text.startswith(HELD_OUT_START) and text.endswith(HELD_OUT_END):
                found.append((heldout / "images" / entry["file_name"], text[len(HELD_OUT_START):-len(HELD_OUT_END)]))
                break
        if len(found) == limit:
            break
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--heldout", type=Path, default=Path("data/heldout"))
    parser.add_argument("--images", type=int, default=15)
    parser.add_argument("--variant", action="append", default=[],
                        help="another request to try, with {name} for the object (repeatable)")
    args = parser.parse_args(argv)
    variants = list(VARIANTS) + args.variant
    requests = visible_requests(args.heldout, args.images)
    if not requests:
        print(f"probe_view_wording: no held-out visible request in {args.heldout / 'r2sm_test.json'}", file=sys.stderr)
        return 1
    segmenter = Segmenter.from_pretrained(args.model, device="cpu")
    visible = dict.fromkeys(variants, 0)
    for image_path, name in requests:
        image = cv2.imread(str(image_path))[:, :, ::-1].copy()
        for variant in variants:
            result = segmenter.segment(image, variant.replace("{name}", name))
            if result.targets and all(t.mask_type == "modal" for t in result.targets):
                visible[variant] += 1
    print("| request | visible masks |\n|---|---:|")
    for variant in variants:
        print(f"| {variant.replace('{name}', 'X')} | {visible[variant]} / {len(requests)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
