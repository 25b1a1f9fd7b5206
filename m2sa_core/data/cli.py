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
``m2sa-data``: look at a dataset file before training on it.

``m2sa-data stats FILE.json [--out stats.png]`` prints and plots the statistics of the
MMR paper's Figure 3 (targets per answer, object- vs part-level mentions, most frequent
object and part categories); ``m2sa-data show FILE.json --index K --out x.png`` draws
record K: the image, its masks in answer order and the question and answer;
``m2sa-data tokens --tokenizer DIR --question Q --answer A`` prints the token ids and
pieces of exactly that training conversation (JSON), so a researcher sees what the model sees.
"""

from __future__ import annotations

import argparse
from collections import Counter
from dataclasses import dataclass
import json
from pathlib import Path
import sys

from m2sa_core.cli_errors import cli_entry
from m2sa_core.data.readers import read_dataset
from m2sa_core.data.records import DataError, SegDataset, SegRecord
from m2sa_core.types import Granularity
import numpy as np

PALETTE = np.array([(230, 25, 75), (60, 180, 75), (0, 130, 200), (245, 130, 48), (145, 30, 180),
                    (70, 240, 240), (240, 50, 230), (210, 245, 60)], np.uint8)


@dataclass
class DatasetStats:
    records: int
    images: int
    skipped: int
    targets_per_answer: Counter
    granularity: Counter  # "object" / "part" mentions
    objects: Counter  # object categories over all targets
    parts: Counter  # "object:part" categories of part-level targets

    def text(self, top: int = 10) -> str:
        total = sum(self.granularity.values()) or 1
        lines = [f"records (questions): {self.records}", f"images: {self.images}",
                 f"skipped entries: {self.skipped}", "targets per answer:"]
        lines += [f"  {k:>2}: {v}" for k, v in sorted(self.targets_per_answer.items())]
        lines.append("mentions: " + ", ".join(
            f"{k} {v} ({100 * v / total:.1f}%)" for k, v in sorted(self.granularity.items())))
        lines.append(f"most frequent object categories (top {top}):")
        lines += [f"  {name}: {n}" for name, n in self.objects.most_common(top)]
        lines.append(f"most frequent part categories (top {top}):")
        lines += [f"  {name}: {n}" for name, n in self.parts.most_common(top)]
        return "\n".join(lines)


def compute_stats(dataset: SegDataset) -> DatasetStats:
    per_answer: Counter = Counter()
    gran: Counter = Counter()
    objects: Counter = Counter()
    parts: Counter = Counter()
    images = set()
    for rec in dataset:
        images.add(rec.image_id)
        per_answer[len(rec.targets)] += 1
        for t in rec.targets:
            is_part = t.granularity == Granularity.PART
            gran["part" if is_part else "object"] += 1
            objects[t.object_name] += 1
            if is_part:
                parts[f"{t.object_name}:{t.part_name}"] += 1
    return DatasetStats(len(dataset), len(images), len(dataset.problems), per_answer, gran, objects, parts)


def plot_stats(stats: DatasetStats, out: Path, title: str, top: int = 10) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(20, 4.5))
    k = sorted(stats.targets_per_answer)
    axes[0].bar([str(x) for x in k], [stats.targets_per_answer[x] for x in k], color="#4878d0")
    axes[0].set(title="targets per answer", xlabel="targets", ylabel="answers")
    labels = sorted(stats.granularity)
    axes[1].pie([stats.granularity[g] for g in labels], labels=labels, autopct="%1.1f%%",
                colors=["#ee854a", "#6acc64"][: len(labels)])
    axes[1].set(title="object vs part mentions")
    for ax, counter, name in ((axes[2], stats.objects, "object categories"), (axes[3], stats.parts, "part categories")):
        items = counter.most_common(top)[::-1]
        ax.barh([n for n, _ in items], [v for _, v in items], color="#956cb4")
        ax.set(title=f"most frequent {name}")
        ax.tick_params(axis="y", labelsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)


def render_record(record: SegRecord, out: Path, amodal: bool = False) -> None:
    """Image with each target's mask in its own colour, labels and the question/answer."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.patches import Patch
    import matplotlib.pyplot as plt

    image = record.load_image().astype(np.float32)
    handles = []
    for i, target in enumerate(record.targets):
        mask = target.amodal_mask(record.height, record.width) if amodal else None
        if mask is None:
            mask = target.mask(record.height, record.width)
        colour = PALETTE[i % len(PALETTE)].astype(np.float32)
        image[mask] = 0.45 * image[mask] + 0.55 * colour
        handles.append(Patch(color=colour / 255, label=f"{i + 1}: {target.label}"))
    ignore = record.ignore_mask()
    if ignore is not None:
        image[ignore] = 0.5 * image[ignore] + 0.5 * 128
    fig, ax = plt.subplots(figsize=(7, 8))
    ax.imshow(image.astype(np.uint8))
    ax.axis("off")
    if handles:
        ax.legend(handles=handles, loc="upper left", fontsize=8, framealpha=0.8)
    answer = record.answer_template.replace("{seg}", "[SEG]") or "(no text answer)"
    extra = f"  [mask: {record.mask_type}]" if record.mask_type else ""
    ax.set_title(f"{record.record_id}{extra}", fontsize=9)
    fig.text(0.02, 0.02, f"Q: {record.question}\nA: {answer}", fontsize=9, wrap=True, va="bottom")
    fig.subplots_adjust(bottom=0.15)
    fig.savefig(out, dpi=100)
    plt.close(fig)


def conversation_tokens(tokenizer, question: str, answer: str) -> dict[str, list]:
    """
    ``{"ids", "pieces"}`` of the LLaVA v1 training conversation for (question, answer), as given.

    The system prompt and roles of the template, ``<im_start><image><im_end>`` when the
    tokenizer has those tokens (the authors' checkpoints do), else ``<image>``; the image
    placeholder is -200, as in LLaVA. Nothing is appended to the question or the answer.
    """
    from m2sa_core.prompt import (
        build_conversation,
        IM_END_TOKEN,
        IM_START_TOKEN,
        IMAGE_PLACEHOLDER_ID,
        IMAGE_TOKEN,
        tokenize_conversation,
    )

    vocab = tokenizer.get_vocab()
    use_im_start_end = IM_START_TOKEN in vocab and IM_END_TOKEN in vocab
    ids, _ = tokenize_conversation(tokenizer, *build_conversation(question, answer, use_im_start_end))
    pieces = [IMAGE_TOKEN if i == IMAGE_PLACEHOLDER_ID else tokenizer.convert_ids_to_tokens(i) for i in ids]
    return {"ids": ids, "pieces": pieces}


def _tokens_command(args: argparse.Namespace) -> int:
    from m2sa_core.model.llama_tokenizer import load_tokenizer, TokenizerLoadError

    try:
        tokenizer = load_tokenizer(args.tokenizer)
    except TokenizerLoadError as exc:
        print(f"m2sa-data: error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(conversation_tokens(tokenizer, args.question, args.answer), ensure_ascii=False))
    return 0


@cli_entry("m2sa-data")
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="m2sa-data", description=__doc__.strip().splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_stats = sub.add_parser("stats", help="dataset statistics as text and a PNG (MMR Figure 3)")
    p_show = sub.add_parser("show", help="draw one record: image, masks, question and answer")
    for p in (p_stats, p_show):
        p.add_argument("path", help="MMR / R2SM / AmodalReasonSeg JSON file or ReasonSeg split directory")
        p.add_argument("--image-root", default=None, help="image folder (default: images/ beside the file)")
        p.add_argument("--strict", action="store_true", help="stop at the first bad entry")
    p_stats.add_argument("--out", default=None, help="PNG path (default: FILE.stats.png)")
    p_stats.add_argument("--top", type=int, default=10, help="categories to list")
    p_show.add_argument("--index", type=int, required=True, help="record (question) index")
    p_show.add_argument("--out", required=True, help="PNG path")
    p_show.add_argument("--amodal", action="store_true", help="draw the amodal masks where present")
    p_tokens = sub.add_parser("tokens", help="token ids and pieces of one training conversation (JSON)")
    p_tokens.add_argument("--tokenizer", required=True, help="tokenizer directory (tokenizer.model alone is enough)")
    p_tokens.add_argument("--question", required=True, help="the user's turn, as given")
    p_tokens.add_argument("--answer", required=True, help="the assistant's answer with its [SEG] tokens, as given")
    args = parser.parse_args(argv)
    if args.command == "tokens":
        return _tokens_command(args)
    try:
        dataset = read_dataset(args.path, args.image_root, strict=args.strict)
        if args.command == "stats":
            stats = compute_stats(dataset)
            print(stats.text(args.top))
            for problem in dataset.problems[:20]:
                print(f"skipped: {problem}", file=sys.stderr)
            out = Path(args.out) if args.out else Path(str(Path(args.path).with_suffix("")) + ".stats.png")
            plot_stats(stats, out, Path(args.path).name, args.top)
            print(f"plot: {out}")
        else:
            if not 0 <= args.index < len(dataset):
                raise DataError(f"--index {args.index} is out of range: {args.path} has {len(dataset)} records")
            render_record(dataset[args.index], Path(args.out), args.amodal)
            print(f"wrote {args.out}")
    except (DataError, OSError) as exc:
        print(f"m2sa-data: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
