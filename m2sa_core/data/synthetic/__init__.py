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
The synthetic household world: scenes, questions and the ``m2sa-synth`` CLI.

No real dataset can be downloaded on the project's machines, so this world lets a tiny
M2SA be trained and evaluated end to end: PACO-style categories and parts, several
instances per scene, occlusion, functional MMR-style questions, MMR-format JSON.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from m2sa_core.cli_errors import cli_entry
from m2sa_core.data.synthetic.absent import absent_texts
from m2sa_core.data.synthetic.questions import (
    AMODAL_ANSWERS,
    AMODAL_PHRASINGS,
    join_targets,
    MIXED_ANSWERS,
    MIXED_PHRASINGS,
    MULTI_FUNCTIONS,
    OBJECT_FUNCTIONS,
    PART_FUNCTIONS,
    VISIBLE_ANSWERS,
    VISIBLE_PHRASINGS,
)
from m2sa_core.data.synthetic.shapes import CATEGORIES
from m2sa_core.data.synthetic.world import CATEGORY_NAMES, generate_dataset, generate_image, split_of
from m2sa_core.data.templates import all_template_texts
from m2sa_core.labels import make_label
from m2sa_core.prompt import ROLES, SEP2, SYSTEM

__all__ = ["CATEGORIES", "CATEGORY_NAMES", "generate_dataset", "generate_image", "main", "split_of", "text_corpus"]


def text_corpus(max_instances: int = 4) -> list[str]:
    """
    Every question and answer text the world can produce (labels up to ``max_instances``).

    Meant for training the tiny model's tokenizer: it covers every phrasing (held-out
    ones included, so val/test text tokenizes without unknown tokens), every spoken
    name, every label ``object_N`` / ``object_N's part``, the answer templates, the
    LISA-style templates and the conversation's fixed text, and every absent command and
    the sentences that answer it (:func:`~m2sa_core.data.synthetic.absent.absent_texts`).
    """
    texts: list[str] = [SYSTEM, f"{ROLES[0]}: {ROLES[1]}: {SEP2}"]
    texts.extend(all_template_texts())
    functions = OBJECT_FUNCTIONS + PART_FUNCTIONS + MULTI_FUNCTIONS
    for spec in CATEGORIES.values():
        for name in spec.spoken:
            for fn in functions:
                if fn.targets[0][0] == spec.name or len(fn.targets) > 1:
                    texts.extend(p.replace("{name}", name) for p in fn.phrasings)
            for phrasing in AMODAL_PHRASINGS + VISIBLE_PHRASINGS:
                texts.append(phrasing.replace("{name}", name))
            for fn in PART_FUNCTIONS:
                if fn.targets[0][0] == spec.name:
                    texts.extend(p.replace("{name}", name).replace("{action}", fn.action) for p in MIXED_PHRASINGS)
        labels = [make_label(spec.name, k) for k in range(1, max_instances + 1)]
        labels += [make_label(spec.name, k, p) for k in range(1, max_instances + 1) for p in spec.parts]
        texts.extend(f"I mean the {lab}." for lab in labels[:max_instances])
        answers = tuple(a for fn in functions for a in fn.answers)
        answers += MIXED_ANSWERS + AMODAL_ANSWERS + VISIBLE_ANSWERS
        for template in dict.fromkeys(answers):
            text = template.replace("{targets}", join_targets(labels[: min(3, len(labels))]))
            texts.append(text[0].upper() + text[1:])
        texts.append(join_targets(labels))
    texts.extend(absent_texts(max_instances))
    return list(dict.fromkeys(texts))


@cli_entry("m2sa-synth")
def main(argv: list[str] | None = None) -> int:
    """``m2sa-synth --out DIR --images N --seed S [--size 256] [--absent-per-image 1]``."""
    parser = argparse.ArgumentParser(prog="m2sa-synth", description=__doc__.strip().splitlines()[0])
    parser.add_argument("--out", required=True, help="output directory (images/ and the JSON files)")
    parser.add_argument("--images", type=int, required=True, help="number of images (80/10/10 %% train/val/test)")
    parser.add_argument("--seed", type=int, default=0, help="seed; the same seed gives the same dataset")
    parser.add_argument("--size", type=int, default=256, help="image side in pixels (default 256)")
    parser.add_argument("--workers", type=int, default=min(os.cpu_count() or 1, 8),
                        help="processes rendering images side by side (default: this machine's cores, at most 8); "
                             "the files are the same for any number")
    parser.add_argument("--absent-per-image", type=int, default=1, metavar="N",
                        help="commands about things the scene does not hold (family 'absent'): N per image in val "
                             "and in each test file, N of every kind per train image (default 1; 0: none, the "
                             "files of a world without them)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    try:
        counts = generate_dataset(args.out, args.images, args.seed, args.size, progress=not args.quiet,
                                  workers=args.workers, absent_per_image=args.absent_per_image)
    except ValueError as exc:
        parser.error(str(exc))
    for name, n in counts.items():
        unit = "regions" if name.startswith("masks_") else "conversations" if name.startswith("conversations_") \
            else "questions"
        print(f"{args.out}/{name}: {n} {unit}")
    print(f"{args.images} images in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
