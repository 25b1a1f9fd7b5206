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
``m2sa-eval``: gIoU / cIoU of a model on MMR-format data, under either protocol.

    m2sa-eval --model models/m2sa-tiny-synth --data data/synth/MMR_test_mixed.json \
              --image-root data/synth/images --protocol generative --out runs/eval.json
    torchrun --nproc-per-node 4 -m training.evaluate ...   # shards, same numbers

teacher-forced (the paper's Table 2 protocol): the ground-truth answer, one [SEG] per
target, is fed in; masks pair with ground truth by order. It measures mask quality
given the right answer. generative (what a robot sees): the model answers freely;
predictions and ground truth pair by Hungarian matching on IoU, unmatched entries score
0, and target-count accuracy says how often it found as many targets as there are.
Each free answer, the targets it named and the true ones, and its kind of mistake go to
``OUT.answers.jsonl`` (``--out OUT.json``), one line a question in question order. Each
ground-truth target, what it is ("mug's handle"), its area and the IoU it was given go to
``OUT.targets.jsonl``, summarised by target kind and by COCO size range in the report.

The per-split gIoU/cIoU score the mask each command asked for (``Target.requested_mask``: the
visible one, or the complete one when the command asks for the complete shape). Beside
them, on data that has the ground truth: visible gIoU/cIoU, amodal gIoU/cIoU over all
targets and over occluded ones only (the amodal mask has pixels outside the visible
one), and mask-type accuracy (R2SM, the synthetic world's amodal questions).

Commands about something that is not there (a record whose meta says what is ``missing``:
no targets, a refusal for an answer) never enter gIoU/cIoU, the answer errors or the target
and amodal breakdowns, so a world with them scores its present commands exactly as the same
world without them. Each split reports instead, beside gIoU/cIoU (``m2sa_core.evaluation.rejection``):
``absent_rejected`` (the share of absent commands rejected, ``absent_rejected_count`` of
``absent_commands``), ``present_rejected`` (the share of present commands wrongly rejected,
``present_rejected_count`` of ``present_commands``), ``absent_named`` (generative: of the
absent commands rejected, the share whose answer names the record's missing words),
``absent_first_token`` (teacher-forced: the share of absent commands whose argmax at the
answer's first position is the gold refusal's first token) and ``absent_by_kind`` (category,
part, instance, property). Rejected means, generative: the free
answer holds no [SEG]; teacher-forced: for a present command, the argmax at the first gold
[SEG] position is not [SEG]; for an absent one, the argmax is [SEG] at no position of the fed
absent answer. A share with nothing to count (a split without absent commands) is null.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
import json
import logging
from pathlib import Path
import random
import sys
from typing import Iterable, Sequence

from m2sa_core.cli_errors import cli_entry
from m2sa_core.data.builder import SampleBuilder
from m2sa_core.evaluation.answer_errors import AnswerErrorCounter
from m2sa_core.evaluation.answer_errors import markdown as answer_errors_markdown
from m2sa_core.evaluation.answer_errors import markdown_by_number, markdown_by_question, report_by_question
from m2sa_core.evaluation.metrics import AmodalEvaluator, format_report, pair_masks, SegmentationEvaluator, SplitReport
from m2sa_core.evaluation.rejection import is_absent, missing_of, RejectionCounter, same_words
from m2sa_core.evaluation.rejection import markdown as rejection_markdown
from m2sa_core.evaluation.rejection import teacher_forced_first_token, teacher_forced_rejects
from m2sa_core.evaluation.target_breakdown import markdown as targets_markdown
from m2sa_core.evaluation.target_breakdown import score_targets
from m2sa_core.evaluation.target_breakdown import summarise as summarise_targets
from m2sa_core.evaluation.target_breakdown import target_kind
from m2sa_core.inference import DEFAULT_MAX_NEW_TOKENS, dtype_from_name, DTYPE_NAMES, Segmenter
from m2sa_core.inference.absence import absence_of
from m2sa_core.model.batch import collate
from m2sa_core.model.quantization import MODES as QUANTIZATION_MODES
from m2sa_core.prompt import sanitize_command
from m2sa_core.types import MaskType
import numpy as np
import torch
from tqdm import tqdm
from training.config import DataSourceConfig
from training.distributed import DistInfo, init_distributed, shutdown
from training.sources import open_source
from training.tracking_eval import add_tracking_arguments, run_tracking_protocol

log = logging.getLogger(__name__)
REASONSEG_QUERIES = ("first", "all")
CLI_PROTOCOLS = {"teacher-forced": "teacher_forced", "generative": "generative",
                 "teacher_forced": "teacher_forced"}
# Split names as the MMR release names its files, in the paper's Table 2 order.
TABLE_ORDER = ("val", "test_obj_only", "test_part_only", "test_mixed")
TABLE_TITLES = {"val": "val", "test_obj_only": "test (obj-only)", "test_part_only": "test (part-only)",
                "test_mixed": "test (mixed)", "all": "all"}


def select_queries(records: Sequence, reasonseg_queries: str = "first") -> list:
    """
    Keep the queries the authors score: the first of each ReasonSeg image ("first"), or all.

    ReasonSeg images carry several queries; the authors score only the first of each image.
    """
    if reasonseg_queries not in REASONSEG_QUERIES:
        raise ValueError(f"reasonseg_queries must be one of {REASONSEG_QUERIES}, got {reasonseg_queries!r}")
    if reasonseg_queries == "all":
        return list(records)
    return [r for r in records if r.source != "reasonseg" or r.question_index == 0]


def eval_command(builder: SampleBuilder, record) -> str:
    """
    Return the user's command for a record, fixed per record so every run asks the same thing.

    ReasonSeg queries are wrapped in LISA's question templates, as LISA's evaluation does;
    every other dataset's question is already what a user would say to the robot, so it
    is asked as it is (the templates would be words the model was never trained on).
    A checkpoint with the authors' prompt conventions is asked the authors' validation
    question; the Segmenter appends its segmentation request.
    """
    if builder.authors:
        return builder.eval_user_text(record)
    if record.source == "reasonseg":
        return builder.command_for(record, random.Random(record.record_id))
    return sanitize_command(record.question)


@dataclass
class Predictions:
    """What the model gives for one record: the asked-for masks plus both outputs and intents."""

    requested: list[np.ndarray]  # Target.requested_mask per target: visible, or complete when asked for
    visible: list[np.ndarray]
    amodal: list[np.ndarray]
    mask_types: list[str]
    scores: list[float] | None = None  # the model's predicted IoU of each requested mask (Target.score or amodal_score)
    rejected: bool | None = None  # the command rejected (m2sa_core.evaluation.rejection)
    first_token: bool | None = None  # teacher-forced: the argmax at the answer's first position is the gold token


@torch.no_grad()
def teacher_forced_predictions(segmenter: Segmenter, builder: SampleBuilder, record) -> Predictions:
    """Masks for the ground-truth answer fed in (one per [SEG], in answer order)."""
    sample = builder.build(record, rng=random.Random(record.record_id))
    model = segmenter.model
    batch = collate([sample], segmenter.processor, segmenter.pad_token_id)
    batch = {k: (v.to(segmenter.device) if isinstance(v, torch.Tensor) else
                 [None if t is None else t.to(segmenter.device) for t in v] if k.startswith("gt_") else v)
             for k, v in batch.items()}
    for key in ("sam_images", "clip_images"):
        batch[key] = batch[key].to(segmenter.dtype)
    out = model(batch)
    visible = list((out.pred_masks[0].float() > segmenter.mask_threshold).cpu().numpy())
    amodal = list((out.pred_amodal_masks[0].float() > segmenter.mask_threshold).cpu().numpy())
    types = [MaskType.from_logits(m, a) for m, a in out.pred_mask_types[0].float().tolist()]
    # Scores clamped to 0..1 as the Segmenter gives them (Target.score).
    visible_scores = out.pred_ious[0].float().clamp(0, 1).tolist()
    amodal_scores = out.pred_amodal_ious[0].float().clamp(0, 1).tolist()
    chosen = [(a, sa) if t == MaskType.AMODAL else (v, sv)
              for v, a, sv, sa, t in zip(visible, amodal, visible_scores, amodal_scores, types)]
    requested, scores = [mask for mask, _ in chosen], [score for _, score in chosen]
    logits, labels = out.logits[0], batch["labels"][0]
    rejected = teacher_forced_rejects(logits, labels, builder.seg_token_id, is_absent(record))
    return Predictions(requested, visible, amodal, types, scores, rejected, teacher_forced_first_token(logits, labels))


@torch.no_grad()
def generative_predictions(segmenter: Segmenter, image: np.ndarray, command: str, frame_key: str):
    """Return (Result, Predictions) of a free answer; both masks of every target are decoded."""
    timings: dict[str, float] = {}
    entry = segmenter.stages.encode_frame(image, frame_key, timings)
    (generation,) = segmenter.stages.generate(entry.features, [segmenter.prompt_ids(command)], timings)
    decoded = segmenter.stages.decode_masks(entry, generation.seg_states, timings, amodal=True)
    result = segmenter.stages.build_result(generation, decoded, timings, amodal=True)
    kept = result.seg_indices  # without the instances merged as named twice
    preds = Predictions([t.requested_mask for t in result.targets], [decoded.masks[i] for i in kept],
                        [decoded.amodal_masks[i] for i in kept], [decoded.mask_types[i] for i in kept],
                        [t.requested_score for t in result.targets])
    return result, preds


def score_amodal(evaluator: AmodalEvaluator, preds: Predictions, record, requested_gts: list[np.ndarray]) -> None:
    """
    Add one record's visible, amodal and mask-type scores where it has their ground truth.

    ``mask_rle`` is the mask the command asks for, so it is the visible ground truth
    unless the command asks for the complete shape.
    """
    ignore = record.ignore_mask()
    h, w = record.height, record.width
    visible_gts = None if record.mask_type == MaskType.AMODAL else requested_gts
    if visible_gts is not None:
        evaluator.add_visible(preds.visible, visible_gts, ignore)
    if record.targets and all(t.amodal_rle is not None for t in record.targets):
        amodal_gts = [t.amodal_mask(h, w) for t in record.targets]
        evaluator.add_amodal(preds.amodal, amodal_gts, visible_gts, ignore)
    if record.mask_type is not None:
        pairs = pair_masks(preds.requested, requested_gts, evaluator.protocol, ignore)[0] if preds.requested else []
        evaluator.add_mask_types(preds.mask_types, record.mask_type, pairs, len(requested_gts))


def evaluate_records(segmenter: Segmenter, records: Sequence, protocol: str, splits: Sequence[str],
                     info: DistInfo = DistInfo(), show_dir: Path | None = None, show: int = 0,
                     progress: bool = True, amodal: AmodalEvaluator | None = None,
                     answers: AnswerErrorCounter | None = None,
                     answer_log: list[dict] | None = None,
                     target_log: list[dict] | None = None,
                     rejections: RejectionCounter | None = None) -> dict[str, SplitReport]:
    """
    Score ``records`` (this rank takes every world_size-th one) and all-reduce the sums.

    With ``amodal`` given, visible, amodal and mask-type scores are added to it as well;
    with ``answers`` given, each free answer's kind of mistake about its targets
    (generative protocol only: teacher forcing gives the true answer), and with
    ``answer_log`` also one entry per answer of this rank (:func:`gather_log`), since
    the counts alone cannot say which questions a mistake comes from. With ``target_log``
    given, one entry per ground-truth target of this rank: its kind, size and the IoU it
    was given (:mod:`m2sa_core.evaluation.target_breakdown`), which the split averages hide.
    With ``rejections`` given (built with the same ``splits``), whether each command was
    rejected. An absent command (:func:`m2sa_core.evaluation.rejection.is_absent`) goes to
    ``rejections`` and the answer log alone: none of the masks' scores sees it.
    """
    evaluator = SegmentationEvaluator(protocol, splits=sorted(set(splits)))
    builder = SampleBuilder.for_model(segmenter.tokenizer, segmenter.model.config, evaluation=True)
    mine = range(info.rank, len(records), info.world_size)
    shown = truncated = 0
    for index in tqdm(mine, desc=f"eval[{protocol}]", disable=not (progress and info.is_main), unit="q"):
        record = records[index]
        image = record.load_image()
        gts = [t.mask(record.height, record.width) for t in record.targets]
        if protocol == "teacher_forced":
            predictions = teacher_forced_predictions(segmenter, builder, record)
            result = None
        else:
            result, predictions = generative_predictions(segmenter, image, eval_command(builder, record),
                                                         str(record.image_path))
            truncated += int(result.truncated)
            predictions.rejected = absence_of(result.raw_answer) is not None
        if show_dir is not None and shown < show and result is not None:
            _save_overlay(show_dir, index, image, record, result)
            shown += 1
        if is_absent(record):
            _add_absent(record, index, predictions, result, rejections, answer_log)
            continue
        if rejections is not None:
            rejections.add_present(predictions.rejected, split=record.split)
        if result is not None:
            if answers is not None:
                kind = answers.add(result.targets, record.targets, split=record.split)
                if answer_log is not None:
                    answer_log.append({"index": index, "split": record.split, "image": str(record.image_path),
                                       "question": record.question, "answer": result.answer, "kind": kind,
                                       "predicted": [t.label for t in result.targets],
                                       "truth": [t.label for t in record.targets],
                                       **({"merged": result.merged} if result.merged else {})})
        ignore = record.ignore_mask()
        evaluator.add(predictions.requested, gts, split=record.split, ignore=ignore)
        if target_log is not None:
            kinds = [target_kind(t.object_name, t.part_name) for t in record.targets]
            target_log += [{"index": index, "split": record.split, **entry}
                           for entry in score_targets(predictions.requested, gts, kinds, protocol, ignore,
                                                      scores=predictions.scores)]
        if amodal is not None:
            score_amodal(amodal, predictions, record, gts)
    if truncated:
        log.warning("%d answers reached max_new_tokens=%d before their end (trailing targets may be missing)",
                    truncated, segmenter.max_new_tokens)
    evaluator.all_reduce()
    if amodal is not None:
        amodal.all_reduce()
    if answers is not None:
        answers.all_reduce(splits)
    if rejections is not None:
        rejections.all_reduce()
    return evaluator.report()


def _add_absent(record, index: int, predictions: Predictions, result, rejections: RejectionCounter | None,
                answer_log: list[dict] | None) -> None:
    """Count one absent command's rejection, and log its free answer (kind "absent rejected" or "absent segmented")."""
    missing = missing_of(record)
    said = result.absence.missing if result is not None and result.absence is not None else ""
    named = same_words(said, missing["words"])
    if rejections is not None:
        rejections.add_absent(missing["kind"], predictions.rejected, named, bool(predictions.first_token),
                              split=record.split)
    if answer_log is not None and result is not None:
        answer_log.append({"index": index, "split": record.split, "image": str(record.image_path),
                           "question": record.question, "answer": result.answer,
                           "kind": "absent rejected" if predictions.rejected else "absent segmented",
                           "predicted": [t.label for t in result.targets], "truth": [],
                           "missing": dict(missing), "named": said if predictions.rejected else None})


def gather_log(entries: list[dict]) -> list[dict]:
    """Every process's log entries, in question order (on every process)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        parts: list = [None] * dist.get_world_size()
        dist.all_gather_object(parts, entries)
        entries = [entry for part in parts for entry in part]
    return sorted(entries, key=lambda entry: entry["index"])  # stable: a question's targets keep their order


def _save_overlay(out_dir: Path, index: int, image: np.ndarray, record, result) -> None:
    import cv2
    from m2sa_core.visualize import overlay_targets
    from PIL import Image

    out_dir.mkdir(parents=True, exist_ok=True)
    tinted = overlay_targets(image, result.targets)
    caption = np.full((44, tinted.shape[1], 3), 255, np.uint8)
    for row, text in enumerate((f"Q: {record.question}", f"A: {result.answer}")):
        cv2.putText(caption, text[:90], (4, 16 + 20 * row), cv2.FONT_HERSHEY_SIMPLEX, 0.4, (0, 0, 0), 1, cv2.LINE_AA)
    Image.fromarray(np.vstack([tinted, caption])).save(out_dir / f"{index:05d}.png")


def markdown_table(reports: dict[str, SplitReport], title: str) -> str:
    """Laid out like the paper's Table 2: one gIoU/cIoU column pair per split."""
    splits = [s for s in TABLE_ORDER if s in reports] + [s for s in reports if s not in TABLE_ORDER]
    head = "| " + title + " | " + " | ".join(
        f"{TABLE_TITLES.get(s, s)} gIoU | {TABLE_TITLES.get(s, s)} cIoU" for s in splits) + " |"
    rule = "|---|" + "---:|---:|" * len(splits)
    row = "| " + reports[splits[0]].protocol + " | " + " | ".join(
        f"{100 * reports[s].giou:.1f} | {100 * reports[s].ciou:.1f}" for s in splits) + " |"
    lines = [head, rule, row]
    if reports[splits[0]].protocol == "generative":
        lines += ["", "| split | target-count accuracy | samples | masks |", "|---|---:|---:|---:|"]
        lines += [f"| {TABLE_TITLES.get(s, s)} | {100 * reports[s].count_accuracy:.1f} | {reports[s].samples} | "
                  f"{reports[s].masks} |" for s in splits]
    return "\n".join(lines)


def amodal_markdown(report: dict[str, dict]) -> str:
    """Visible / amodal / occluded gIoU-cIoU and mask-type accuracy; empty when no data had them."""
    titles = {"visible": "visible", "amodal": "amodal (all)", "amodal_occluded": "amodal (occluded)"}
    rows = [f"| {titles[k]} | {100 * v['giou']:.1f} | {100 * v['ciou']:.1f} | {v['masks']} |"
            for k, v in report.items() if k in titles and v["masks"]]
    lines = []
    if rows:
        lines += ["| masks | gIoU | cIoU | targets |", "|---|---:|---:|---:|"] + rows
    kind = report.get("mask_type", {})
    if kind.get("targets"):
        lines += ["", "| mask-type accuracy | targets |", "|---:|---:|",
                  f"| {100 * kind['accuracy']:.1f} | {kind['targets']} |"]
    return "\n".join(lines).strip("\n")


def evaluate_sources(model, tokenizer, sources: Iterable[DataSourceConfig], protocol: str = "generative",
                     max_items: int = 0, info: DistInfo = DistInfo()) -> dict[str, dict]:
    """Evaluate during training: the in-memory model on the configured eval sources."""
    segmenter = Segmenter(model, tokenizer, device=model.device, dtype=model.dtype)
    records = []
    for src in sources:
        dataset = open_source(src).items
        records += [dataset[i] for i in range(min(len(dataset), max_items) if max_items else len(dataset))]
    if not records:
        return {}
    splits = [r.split for r in records]
    rejections = RejectionCounter(protocol, splits=sorted(set(splits)))
    reports = evaluate_records(segmenter, records, protocol, splits, info, progress=False, rejections=rejections)
    return with_rejections(reports, rejections)


def with_rejections(reports: dict[str, SplitReport], rejections: RejectionCounter) -> dict[str, dict]:
    """Each split's gIoU/cIoU report with its rejection figures added (the keys of today, then the new ones)."""
    rejected = rejections.report()
    return {k: {**v.as_dict(), **rejected.get(k, {})} for k, v in reports.items()}


@cli_entry("m2sa-eval")
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="m2sa-eval", description=__doc__.strip(),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="checkpoint directory (our format)")
    parser.add_argument("--data", nargs="+", help="MMR-format JSON file(s) (not with --protocol tracking)")
    parser.add_argument("--image-root", default="", help="directory the JSON's file_name entries are under")
    parser.add_argument("--kind", default="mmr", help="reader: mmr | synthetic | r2sm | amodal_reasonseg | reasonseg")
    parser.add_argument("--protocol", choices=sorted([*CLI_PROTOCOLS, "tracking"]), default="generative",
                        help="tracking: follow each command over rendered camera sequences (see --sequences)")
    parser.add_argument("--out", required=True, help="JSON report; a .md table is written beside it")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--dtype", choices=("auto", *DTYPE_NAMES), default="auto",
                        help="model dtype: auto is the node's default (bfloat16 on a GPU, float32 on the CPU); "
                             "score the precision the robot will run, since the figures differ between them")
    parser.add_argument("--max-items", type=int, default=0, help="per file; 0 = all")
    parser.add_argument("--max-new-tokens", type=int, default=DEFAULT_MAX_NEW_TOKENS,
                        help="longest generated answer; answers cut at this limit are counted and reported")
    parser.add_argument("--reasonseg-queries", choices=REASONSEG_QUERIES, default="first",
                        help="ReasonSeg: the first query of each image, as the authors evaluate (default), or all")
    parser.add_argument("--show", type=int, default=0, help="write N qualitative PNGs beside --out")
    parser.add_argument("--quantization", choices=QUANTIZATION_MODES, default="none",
                        help="language model weights: none (model dtype), int8 (LLM.int8()) or int4 (NF4), "
                             "through bitsandbytes; vision tower and SAM stay in the model dtype")
    parser.add_argument("--duplicate-iou", type=float, default=None,
                        help="merge two instances of one category whose visible masks overlap by this IoU "
                             "(0 = off); default: the checkpoint's duplicate_instance_iou")
    add_tracking_arguments(parser)
    args = parser.parse_args(argv)
    if args.duplicate_iou is not None and not 0.0 <= args.duplicate_iou <= 1.0:
        parser.error(f"--duplicate-iou must be in [0, 1] (0 = off), got {args.duplicate_iou}")
    if args.protocol == "tracking":
        if args.quantization != "none":
            parser.error("--quantization is not available with --protocol tracking")
        return run_tracking_protocol(args)
    if not args.data:
        parser.error("--data is required (except with --protocol tracking)")
    protocol = CLI_PROTOCOLS[args.protocol]
    info, device = init_distributed(args.device)
    segmenter = Segmenter.from_pretrained(args.model, device=device, dtype=dtype_from_name(args.dtype),
                                          max_new_tokens=args.max_new_tokens, quantization=args.quantization,
                                          duplicate_iou=args.duplicate_iou)
    records = []
    for path in args.data:
        dataset = open_source(DataSourceConfig(kind=args.kind, path=path, image_root=args.image_root)).items
        items = select_queries([dataset[i] for i in range(len(dataset))], args.reasonseg_queries)
        records += items[: args.max_items] if args.max_items else items
    out = Path(args.out)
    amodal = AmodalEvaluator(protocol)
    answers = AnswerErrorCounter() if protocol == "generative" else None
    answer_log: list[dict] | None = [] if answers is not None else None
    target_log: list[dict] = []
    splits = [r.split for r in records]
    rejections = RejectionCounter(protocol, splits=sorted(set(splits)))
    reports = evaluate_records(segmenter, records, protocol, splits, info,
                               show_dir=out.with_suffix("") if args.show else None, show=args.show, amodal=amodal,
                               answers=answers, answer_log=answer_log, target_log=target_log,
                               rejections=rejections)
    if answer_log is not None:
        answer_log = gather_log(answer_log)
    target_log = gather_log(target_log)
    if info.is_main:
        out.parent.mkdir(parents=True, exist_ok=True)
        amodal_report = amodal.report()
        payload = {"model": str(args.model), "protocol": protocol, "data": args.data,
                   "device": str(segmenter.device), "dtype": str(segmenter.dtype).removeprefix("torch."),
                   "duplicate_iou": segmenter.duplicate_iou,
                   "splits": with_rejections(reports, rejections), "amodal": amodal_report}
        if answers is not None:
            payload["answer_errors"] = answers.report()
            payload["answers_by_number"] = answers.report_by_number()
            payload["answers_by_question"] = report_by_question([e for e in answer_log if "missing" not in e])
        payload["targets"] = summarise_targets(target_log)
        out.write_text(json.dumps(payload, indent=2))
        if answer_log is not None:  # each free answer, its targets and its kind of mistake
            out.with_suffix(".answers.jsonl").write_text("".join(json.dumps(e) + "\n" for e in answer_log))
        # each ground-truth target, what it is and the IoU it was given
        out.with_suffix(".targets.jsonl").write_text("".join(json.dumps(e) + "\n" for e in target_log))
        table = markdown_table(reports, "M2SA")
        table += ("\n\nCommands rejected (no target named), per split; absent: the target is not there "
                  "(null: no such command):\n\n")
        table += rejection_markdown(rejections.report(), TABLE_TITLES)
        extra = amodal_markdown(amodal_report)
        if extra:
            table += "\n\n" + extra
        if answers is not None:
            table += "\n\nWhat the free answers got wrong about their targets (by name, not mask):\n\n"
            table += answer_errors_markdown(payload["answer_errors"])
            table += "\n\nThe free answers by how many targets their question asks for:\n\n"
            table += markdown_by_number(payload["answers_by_number"])
            table += ("\n\nThe question sentences whose answers miss the number of targets most often "
                      "(all of them in the JSON, `answers_by_question`):\n\n")
            table += markdown_by_question(payload["answers_by_question"])
        by_target = targets_markdown(payload["targets"])
        if by_target:
            table += ("\n\ngIoU by what each target is and by its size "
                      "(targets only: extra predictions are in no row):\n\n")
            table += by_target
        out.with_suffix(".md").write_text(table + "\n")
        print(format_report(reports))
        print()
        print(table)
    shutdown(info)
    return 0


if __name__ == "__main__":
    sys.exit(main())
