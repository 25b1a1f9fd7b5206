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

r"""
Probe (RUNS.md, run 83): does the model's free answer give what the command's own words ask for.

Runs 80-82 learnt presence from features and stopped near half of the held-out world's absent
commands. Looking at the answers themselves: in the held-out phrasings the model answers a
command about a missing thing with the nearest thing it knows ("Mark the pipe that belongs to
the TV." -> "television_set_1"; "Find the third bottle, counting from the left." ->
"bottle_1"). The command says what it wants in words a robot's user says too, so three checks
read the command against the answer, with no training:

* **part**: the command names a part (a part name of the world's label vocabulary, plural
  too) and no target of the answer is that part ("left button" is a button);
* **ordinal**: the command names the n-th instance ("third") and no target is instance n;
* **colour**: the command names a colour and none of the answer's masks shows it (under one
  pixel in a hundred, the world's own rule for an absent colour: ``absent.mask_colour_share``);
* **looks** (with ``--prototypes``): no target's mask looks like the object it is named for.
  SAM's fused image embedding averaged under each ground-truth mask of the training images
  gives one prototype per label kind (object, or object and part); a target whose mask is
  nearest (cosine) to another object's prototype is not what it is called. A command about a
  missing category is answered with the nearest thing's name ("knife_1" on the bottle), so
  its answer's masks look like something else.

An answer with no ``[SEG]`` is the model's own refusal. Per kind, the share each check
rejects, and all of them with the refusals.

    .venv/bin/python training/tiny/research/consistency_checks.py --model models/m2sa-tiny-synth \
        --data data/heldout11/MMR_test_{obj_only,part_only,mixed}.json --image-root data/heldout11/images
"""

from __future__ import annotations

import argparse
from collections import Counter, defaultdict
import json
import re
import sys

from m2sa_core.data.builder import SampleBuilder
from m2sa_core.data.mmr import MISSING_KINDS
from m2sa_core.data.rle import decode_rle
from m2sa_core.data.synthetic.absent import ABSENT_SHARE, ASKABLE_PARTS, COLOURS, mask_colour_share, ORDINALS, \
    spoken_part
from m2sa_core.data.synthetic.shapes import CATEGORIES
from m2sa_core.evaluation.metrics import mask_iou
from m2sa_core.evaluation.rejection import is_absent, missing_of
from m2sa_core.inference import Segmenter
from m2sa_core.types import Result
import numpy as np
import torch
from tqdm import tqdm
from training.config import DataSourceConfig
from training.evaluate import eval_command
from training.sources import open_source

PART_WORDS = sorted({spoken_part(p) for spec in CATEGORIES.values() for p in spec.parts} | set(ASKABLE_PARTS),
                    key=len, reverse=True)
CHECKS = ("refused", "part", "ordinal", "colour", "looks")


def pooled_embedding(fused: torch.Tensor, mask: np.ndarray) -> torch.Tensor:
    """Return the unit-length mean of ``fused`` ([1, P, g, g]) under ``mask`` (any size, resampled to g x g)."""
    side = fused.shape[-1]
    weights = torch.nn.functional.adaptive_avg_pool2d(torch.from_numpy(mask[None].astype(np.float32)), side)
    mean = (weights.flatten()[:, None] * fused[0].flatten(1).T.float()).sum(0) / weights.sum().clamp(min=1e-6)
    return torch.nn.functional.normalize(mean, dim=0)


class Prototypes:
    """One mean embedding per (object, part) of the training masks: what each named thing looks like."""

    def __init__(self, segmenter: Segmenter, records: list, images: int) -> None:
        sums: dict[tuple[str, str], torch.Tensor] = {}
        seen: set[str] = set()
        for record in tqdm([r for r in records if r.targets], unit="q", desc="prototypes"):
            key = str(record.image_path)
            if key not in seen and len(seen) == images:
                break
            seen.add(key)
            entry = segmenter.stages.encode_frame(record.load_image(), key, {})
            for target in record.targets:
                mask = decode_rle(target.mask_rle)
                if mask.any():
                    name = (target.object_name, target.part_name)
                    sums[name] = sums.get(name, 0) + pooled_embedding(entry.fused, mask)
        self.names = list(sums)
        self.matrix = torch.nn.functional.normalize(torch.stack([sums[n] for n in self.names]), dim=1)

    def object_of(self, embedding: torch.Tensor) -> str:
        """Return the object whose prototype is nearest to ``embedding``."""
        return self.names[int((self.matrix @ embedding).argmax())][0]


def asked_parts(command: str) -> list[str]:
    """Part names in ``command``, the longest reading only ("left button", not also "button")."""
    found = [p for p in PART_WORDS if re.search(rf"\b{re.escape(p)}s?\b", command)]
    return [p for p in found if not any(p != q and re.search(rf"\b{re.escape(p)}\b", q) for q in found)]


def part_given(asked: str, named: str) -> bool:
    """Return whether the answer's part ``named`` is the ``asked`` one: every asked word is one of its words."""
    return set(asked.split()) <= set(named.split())


def failed_checks(command: str, image: np.ndarray, result: Result, fused: torch.Tensor | None = None,
                  prototypes: Prototypes | None = None) -> dict[str, bool]:
    """Which of :data:`CHECKS` find that ``result`` does not give what ``command`` asks for."""
    low = command.lower()
    targets = result.targets
    named = [spoken_part(t.part_name) for t in targets if t.part_name]
    parts = asked_parts(low)
    ordinals = [n for n, word in enumerate(ORDINALS, 1) if re.search(rf"\b{word}\b", low)]
    colours = [c for c in COLOURS if re.search(rf"\b{c}\b", low)]
    return {
        "refused": not targets,
        "part": bool(targets and parts) and not any(part_given(p, n) for p in parts for n in named),
        "ordinal": bool(targets and ordinals) and not any(t.instance in ordinals for t in targets),
        "colour": bool(targets and colours) and all(
            mask_colour_share(image, np.asarray(t.mask, bool), c) < ABSENT_SHARE for t in targets for c in colours),
        "looks": prototypes is not None and bool(targets) and all(
            prototypes.object_of(pooled_embedding(fused, np.asarray(t.mask, bool))) != t.object_name for t in targets),
    }


def union_iou(result: Result, record) -> float:
    """Return the IoU of the union of the answer's masks with the union of the record's target masks."""
    truth = np.zeros((record.height, record.width), bool)
    for target in record.targets:
        truth |= decode_rle(target.mask_rle)
    answer = np.zeros_like(truth)
    for target in result.targets:
        answer |= np.asarray(target.mask, bool)
    return mask_iou(answer, truth)


def _records(paths: list[str], image_root: str) -> list:
    records = []
    for path in paths:
        items = open_source(DataSourceConfig(kind="mmr", path=path, image_root=image_root)).items
        records += [items[i] for i in range(len(items))]
    return records


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--data", nargs="+", required=True)
    parser.add_argument("--image-root", required=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--max-items", type=int, default=0, help="the first N commands only (0: all)")
    parser.add_argument("--out", default="", help="a JSON file for the shares and the present commands rejected")
    parser.add_argument("--prototypes", nargs="*", default=[], help="training files for the looks check")
    parser.add_argument("--prototype-root", default="data/synth/images")
    parser.add_argument("--prototype-images", type=int, default=600)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    segmenter = Segmenter.from_pretrained(args.model, device="cpu")
    builder = SampleBuilder.for_model(segmenter.tokenizer, segmenter.model.config, evaluation=True)
    records = _records(args.data, args.image_root)
    records = records[: args.max_items] if args.max_items else records
    prototypes = (Prototypes(segmenter, _records(args.prototypes, args.prototype_root), args.prototype_images)
                  if args.prototypes else None)
    counts: dict[str, Counter] = defaultdict(Counter)
    wrongly: list[dict] = []
    for record in tqdm(records, unit="q"):
        command = eval_command(builder, record)
        image = record.load_image()
        result = segmenter.segment(image, command, frame_key=str(record.image_path))
        fused = segmenter.stages.encode_frame(image, str(record.image_path), {}).fused if prototypes else None
        kind = missing_of(record)["kind"] if is_absent(record) else "present"
        failed = [name for name, hit in failed_checks(command, image, result, fused, prototypes).items() if hit]
        counts[kind]["commands"] += 1
        counts[kind].update(failed)
        counts[kind]["any"] += bool(failed)
        if kind == "present":
            iou = union_iou(result, record)
            counts[kind]["iou_rejected" if failed else "iou_kept"] += iou
            if failed:
                wrongly.append({"command": command, "answer": result.raw_answer, "iou": iou, "checks": failed})
    shares = {kind: {name: counts[kind][name] / counts[kind]["commands"] for name in (*CHECKS, "any")}
              | {"commands": counts[kind]["commands"]} for kind in ("present", *MISSING_KINDS) if counts[kind]}
    print(f"| kind | commands | {' | '.join(CHECKS)} | any |")
    print("|---|---:|" + "---:|" * (len(CHECKS) + 1))
    for kind, row in shares.items():
        print(f"| {kind} | {row['commands']} | " + " | ".join(f"{row[n]:.3f}" for n in (*CHECKS, "any")) + " |")
    absent = [k for k in MISSING_KINDS if k in shares]
    if absent:
        commands = sum(shares[k]["commands"] for k in absent)
        caught = sum(shares[k]["any"] * shares[k]["commands"] for k in absent) / commands
        print(f"absent rejected {caught:.3f}")
    if "present" in shares:
        present = counts["present"]
        rejected = present["any"]
        print(f"present wrongly rejected {shares['present']['any']:.3f}; IoU of the answer's masks with the truth: "
              f"{present['iou_rejected'] / max(rejected, 1):.3f} where rejected, "
              f"{present['iou_kept'] / max(present['commands'] - rejected, 1):.3f} where kept")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"shares": shares, "present_rejected": wrongly}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
