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
Generate the synthetic household dataset: images plus MMR, R2SM and AmodalReasonSeg files.

Image ``k`` is rendered from its own seed ``(seed, k)``, so a dataset is reproducible
from ``(seed, n_images, size)`` and each split holds its own scene layouts: the first
80 % of the images are train, the next 10 % val and the rest test. Val and test also
use only the held-out paraphrase of every question (see ``questions``).

Files (all image paths relative to ``DIR/images``):

* ``MMR_train.json``, ``MMR_val.json``: every family, amodal questions included (their
  ``segmentation`` is the complete mask; ``mask_types`` says so);
* ``MMR_test_obj_only.json``, ``MMR_test_part_only.json``, ``MMR_test_mixed.json``:
  the test images' object, part and multi/mixed questions sorted by the granularity of
  their targets (no amodal questions, as in the MMR release);
* ``r2sm_test.json``: amodal and visible queries of the test images;
* ``amodal_reasonseg_test.json``: the test images' questions with visible and amodal
  masks per target;
* ``masks_train.json``, ``masks_val.json`` and ``conversations_train.json``: the
  pretraining sets (every object and part with its masks; the train images' questions
  answered in words), see
  :mod:`m2sa_core.data.synthetic.pretraining`;
* ``knowledge_train.json``, ``knowledge_seg_train.json``: what the world's things are for,
  in many words, tied to the train images, in words and with masks
  (:mod:`m2sa_core.data.synthetic.knowledge`);
* ``views_train.json``: the train images' visible/complete questions about several
  instances, asked again for one named instance each, as R2SM asks
  (``questions.named_view_questions``);
* ``view_words_train.json``: the same visible/complete requests worded afresh from the
  view lexicon, without any clause of the held-out phrasings (:mod:`wording.view`);
* ``mixed_words_train.json``: an object and the spot of one of its part's actions, asked
  for together without the word "part" (:mod:`wording.mixed`);
* ``view_twins_train.json``: each train visible/complete request with its twin of the
  other kind, the same words turned by a negation, about the same targets
  (:mod:`wording.view_twins`);
* ``level_words_train.json``: per category in view, one of its part's actions asked for
  the object that has the part and then for the part itself, worded from a lexicon
  without any clause of the held-out phrasings (:mod:`wording.level`);
* ``absent_twins_train.json`` (with the absent commands only): the absent commands' own
  train phrasings asked about an instance, a colour or a part the scene holds, with its
  masks (:mod:`wording.absent_twins`).

Every annotation also carries ``amodal_segmentation``, the complete mask.

Every MMR file also holds commands about things the scene does not hold (family
``absent``, :mod:`m2sa_core.data.synthetic.absent`): no annotations, an answer that names
what is missing, and a ``missing`` list parallel to the questions (``null`` for a present
question, ``{"kind", "words"}`` for an absent one) in each entry that has one. They are
drawn from a random stream of their own and follow the image's present questions, so
that those stay what a world without them holds; ``absent_per_image=0`` writes none.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
import json
import multiprocessing
from pathlib import Path
from typing import Any

import cv2
from m2sa_core.data.rle import encode_mask
from m2sa_core.data.synthetic.absent import absent_questions, TEST_SPLIT
from m2sa_core.data.synthetic.knowledge import knowledge_entry, knowledge_questions, object_and_part_questions
from m2sa_core.data.synthetic.pretraining import conversation_entry, mask_annotation_entry, text_answer
from m2sa_core.data.synthetic.questions import name_instance, named_view_questions, Question, sample_questions
from m2sa_core.data.synthetic.scene import render_scene, Scene
from m2sa_core.data.synthetic.shapes import CATEGORIES
from m2sa_core.data.synthetic.wording.absent_twins import absent_twin_questions
from m2sa_core.data.synthetic.wording.level import worded_level_questions
from m2sa_core.data.synthetic.wording.mixed import worded_mixed_questions
from m2sa_core.data.synthetic.wording.view import worded_view_questions
from m2sa_core.data.synthetic.wording.view_twins import twin_view_questions
from m2sa_core.labels import category_of, make_label
from m2sa_core.types import mask_bbox, MaskType
import numpy as np

MMR_FILES = ("train", "val", "test_obj_only", "test_part_only", "test_mixed")
TEST_FAMILIES = ("object", "part", "multi", "mixed")
CATEGORY_NAMES: tuple[str, ...] = tuple(
    sorted(list(CATEGORIES) + [category_of(c, p) for c, spec in CATEGORIES.items() for p in spec.parts])
)
CATEGORY_IDS = {name: i + 1 for i, name in enumerate(CATEGORY_NAMES)}

WordedQuestions = Callable[[Scene, list[Question], np.random.Generator], list[Question]]


def _per_question(ask: Callable[[Scene, Question, np.random.Generator], list[Question]]) -> WordedQuestions:
    """Word requests from each of an image's functional questions, in their order."""
    return lambda scene, questions, rng: [w for q in questions for w in ask(scene, q, rng)]


def _per_image(ask: Callable[[Scene, np.random.Generator], list[Question]]) -> WordedQuestions:
    """Word requests from the scene alone."""
    return lambda scene, questions, rng: ask(scene, rng)


# The train split's files of worded requests (MMR layout, stage 3): file name, the random
# stream of each image it draws from, and what it asks of an image. Each file has its own
# stream (seed, image, stream), so adding or rewording one leaves every other file as it was.
WORDED_TRAIN_FILES: tuple[tuple[str, int, WordedQuestions], ...] = (
    ("views_train.json", 3, _per_question(named_view_questions)),
    ("view_words_train.json", 4, _per_question(worded_view_questions)),
    ("mixed_words_train.json", 5, _per_image(worded_mixed_questions)),
    ("view_twins_train.json", 6, _per_question(twin_view_questions)),
    ("level_words_train.json", 7, _per_image(worded_level_questions)),
)
# Written with the absent commands only (absent_per_image > 0): their own phrasings asked
# about things the scene holds (wording.absent_twins). Stream 8 is the absent commands'.
ABSENT_TWINS_FILE: tuple[str, int, WordedQuestions] = ("absent_twins_train.json", 9,
                                                       _per_image(absent_twin_questions))


def worded_train_files(absent_per_image: int) -> tuple[tuple[str, int, WordedQuestions], ...]:
    """Return the worded train files a world writes: the absent commands' twins only with them."""
    return WORDED_TRAIN_FILES + ((ABSENT_TWINS_FILE,) if absent_per_image > 0 else ())


def split_of(index: int, n_images: int) -> str:
    """Return "train" for the first 80 % of images, "val" for the next 10 %, "test" for the rest."""
    n_train = int(round(0.8 * n_images))
    n_val = int(round(0.1 * n_images))
    if n_images >= 3:
        n_train = min(n_train, n_images - 2)
        n_val = max(1, n_val)
    if index < n_train:
        return "train"
    return "val" if index < n_train + n_val else "test"


def image_rng(seed: int, index: int) -> np.random.Generator:
    """Independent stream per image: any image can be regenerated alone."""
    return np.random.default_rng(np.random.SeedSequence([seed, index]))


@dataclass
class GeneratedImage:
    index: int
    split: str
    scene: Scene
    questions: list[Question]
    file_name: str
    image_id: int
    extra: dict[str, Any] = field(default_factory=dict)


def generate_image(seed: int, index: int, n_images: int, size: int = 256) -> GeneratedImage:
    """Render image ``index`` of a dataset and choose its questions."""
    rng = image_rng(seed, index)
    split = split_of(index, n_images)
    scene = render_scene(rng, size)
    held_out = split != "train"
    questions = sample_questions(scene, rng, held_out)
    return GeneratedImage(index, split, scene, questions, f"{index:06d}.png", index + 1)


def _annotation(gen: GeneratedImage, obj_index: int, part: str, mask_type: str) -> dict[str, Any]:
    obj = gen.scene.objects[obj_index]
    visible = obj.parts_visible[part] if part else obj.visible
    amodal = obj.parts_amodal[part] if part else obj.amodal
    seg = amodal if mask_type == MaskType.AMODAL else visible
    name = category_of(obj.category, part)
    return {
        "bbox": [float(v) for v in mask_bbox(seg)],
        "segmentation": encode_mask(seg),
        "amodal_segmentation": encode_mask(amodal),
        "category_name": name,
        "category_id": CATEGORY_IDS[name],
        "image_id": gen.image_id,
        "sorted_category_id": CATEGORY_IDS[name] - 1,
    }


def granularity_split(question: Question) -> str:
    """test_obj_only / test_part_only / test_mixed by the targets' granularity (an absent command's by its form)."""
    if question.missing is not None:
        return TEST_SPLIT[question.function]
    parts = {bool(p) for _, p in question.targets}
    if parts == {False}:
        return "test_obj_only"
    return "test_part_only" if parts == {True} else "test_mixed"


def mmr_entry(gen: GeneratedImage, questions: list[Question]) -> dict[str, Any]:
    """One image entry with the MMR release keys (plus mask_types, question_families)."""
    h, w = gen.scene.image.shape[:2]
    present = {CATEGORY_IDS[o.category] for o in gen.scene.objects}
    entry = {
        "file_name": gen.file_name,
        "height": h,
        "width": w,
        "image_id": gen.image_id,
        "questions": [q.question for q in questions],
        "answers": [[_annotation(gen, i, p, q.mask_type) for i, p in q.targets] for q in questions],
        "text_answers": [q.answer for q in questions],
        "raw_answers": [q.answer.replace(" {seg}", "") for q in questions],
        "coco_url": "",
        "neg_category_ids": sorted(CATEGORY_IDS[c] for c in CATEGORIES if CATEGORY_IDS[c] not in present),
        "not_exhaustive_category_ids": [],
        "mask_types": [q.mask_type for q in questions],
        "question_families": [q.family for q in questions],
    }
    if any(q.missing is not None for q in questions):
        entry["missing"] = [q.missing for q in questions]
    return entry


def r2sm_entry(gen: GeneratedImage) -> dict[str, Any] | None:
    """Single-target amodal/visible queries in the project's R2SM layout."""
    queries = []
    for q in gen.questions:
        if q.family not in ("amodal", "visible"):
            continue
        for i, part in q.targets:
            ann = _annotation(gen, i, part, q.mask_type)
            obj = gen.scene.objects[i]
            label = make_label(obj.category, obj.instance)
            # One target per R2SM query: a question about several instances names one.
            text = name_instance(q.question, label) if len(q.targets) > 1 else q.question
            queries.append({"text": text, "mask_type": q.mask_type, "category_name": ann["category_name"],
                            "label": label, "segmentation": ann["segmentation"],
                            "bbox": ann["bbox"]})
    if not queries:
        return None
    h, w = gen.scene.image.shape[:2]
    return {"image_id": gen.image_id, "file_name": gen.file_name, "height": h, "width": w, "queries": queries}


def amodal_reasonseg_entry(gen: GeneratedImage) -> dict[str, Any] | None:
    """Text answers with visible and amodal masks per target (project layout)."""
    items = []
    for q in gen.questions:
        if q.family not in TEST_FAMILIES:
            continue
        targets = []
        for i, part in q.targets:
            ann = _annotation(gen, i, part, "modal")
            targets.append({"category_name": ann["category_name"], "visible_segmentation": ann["segmentation"],
                            "amodal_segmentation": ann["amodal_segmentation"], "bbox": ann["bbox"]})
        items.append({"question": q.question, "answer": q.answer, "targets": targets})
    if not items:
        return None
    h, w = gen.scene.image.shape[:2]
    return {"image_id": gen.image_id, "file_name": gen.file_name, "height": h, "width": w, "questions": items}


@dataclass
class ImageEntries:
    """What one image adds to each file of the dataset (None or empty where it adds nothing)."""

    split: str
    mmr: dict[str, dict[str, Any]] = field(default_factory=dict)
    mask_entry: dict[str, Any] | None = None
    conversation: dict[str, Any] | None = None
    knowledge: dict[str, Any] | None = None
    knowledge_seg: dict[str, Any] | None = None
    worded: dict[str, dict[str, Any]] = field(default_factory=dict)
    r2sm: dict[str, Any] | None = None
    amodal: dict[str, Any] | None = None


# The random stream of each image's absent commands (after the worded files' 3-7).
ABSENT_STREAM = 8


def image_entries(out_dir: Path, seed: int, n_images: int, size: int, index: int,
                  absent_per_image: int = 1) -> ImageEntries:
    """
    Render image ``index``, write its PNG and return its entries of every file.

    A pure function of ``(seed, index, n_images, size, absent_per_image)``: every random
    stream it draws is seeded from them, so images can be made in any order, by any
    number of processes.
    """
    gen = generate_image(seed, index, n_images, size)
    cv2.imwrite(str(out_dir / "images" / gen.file_name), gen.scene.image[:, :, ::-1])
    entries = ImageEntries(gen.split)
    rng = np.random.default_rng(np.random.SeedSequence([seed, index, ABSENT_STREAM]))
    absent = absent_questions(gen.scene, rng, gen.split, index, absent_per_image)
    if gen.split in ("train", "val"):
        entries.mmr[gen.split] = mmr_entry(gen, gen.questions + absent.get(gen.split, []))
        entries.mask_entry = mask_annotation_entry(gen.scene, gen.image_id, gen.file_name)
        if gen.split == "train":
            answers = [(q.question, text_answer(q.answer)) for q in gen.questions]
            # Its own stream: the images and questions stay those of earlier versions.
            rng = np.random.default_rng(np.random.SeedSequence([seed, index, 1]))
            entries.conversation = conversation_entry(gen.scene, rng, gen.image_id, gen.file_name, answers)
            rng = np.random.default_rng(np.random.SeedSequence([seed, index, 2]))
            items = knowledge_questions(gen.scene, rng)
            entries.knowledge = knowledge_entry(gen.scene, gen.image_id, gen.file_name, items)
            # Drawn after the worded items, which stay those of earlier versions.
            both = object_and_part_questions(gen.scene, rng)
            entries.knowledge_seg = mmr_entry(gen, [it for it in items if isinstance(it, Question)] + both)
            for name, stream, worded in worded_train_files(absent_per_image):
                rng = np.random.default_rng(np.random.SeedSequence([seed, index, stream]))
                questions = worded(gen.scene, gen.questions, rng)
                if questions:
                    entries.worded[name] = mmr_entry(gen, questions)
        return entries
    by_split: dict[str, list[Question]] = {}
    for q in gen.questions:
        if q.family in TEST_FAMILIES:
            by_split.setdefault(granularity_split(q), []).append(q)
    for name, qs in absent.items():
        by_split.setdefault(name, []).extend(qs)
    entries.mmr = {name: mmr_entry(gen, by_split[name]) for name in MMR_FILES if name in by_split}
    entries.r2sm, entries.amodal = r2sm_entry(gen), amodal_reasonseg_entry(gen)
    return entries


def _entries_in_order(out_dir: Path, seed: int, n_images: int, size: int, workers: int,
                      absent_per_image: int = 1) -> Iterator[ImageEntries]:
    """Every image's entries in index order, made by ``workers`` processes (1: this one)."""
    make = partial(image_entries, out_dir, seed, n_images, size, absent_per_image=absent_per_image)
    if workers <= 1 or n_images < 2 * workers:
        yield from map(make, range(n_images))
        return
    # spawn, not fork: a caller may hold torch's or OpenCV's thread pools, which a forked
    # child can inherit locked; this module imports in a quarter of a second.
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        yield from pool.imap(make, range(n_images), chunksize=8)


def generate_dataset(out_dir: str | Path, n_images: int, seed: int = 0, size: int = 256,
                     progress: bool = False, workers: int = 1, absent_per_image: int = 1) -> dict[str, int]:
    """
    Write the whole dataset under ``out_dir``; returns the number of questions per file.

    ``workers`` processes render the images side by side; the files are byte for byte
    those of one process (each image is drawn from its own seed, and its entries are
    gathered in index order). ``absent_per_image`` absent commands go to each val and
    test file per image, and that many rounds of every kind to train
    (:func:`m2sa_core.data.synthetic.absent.absent_questions`); 0 writes none, and the
    files are then those of a world without them.
    """
    if n_images < 1:
        raise ValueError(f"n_images must be at least 1, got {n_images}")
    if size < 128:
        raise ValueError(f"size must be at least 128 pixels for the objects to fit, got {size}")
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    if absent_per_image < 0:
        raise ValueError(f"absent_per_image must be 0 or more, got {absent_per_image}")
    out_dir = Path(out_dir)
    (out_dir / "images").mkdir(parents=True, exist_ok=True)
    mmr: dict[str, list] = {name: [] for name in MMR_FILES}
    r2sm, amodal = [], []
    masks: dict[str, list] = {"train": [], "val": []}
    conversations_train, knowledge_train, knowledge_seg_train = [], [], []
    worded_train: dict[str, list] = {name: [] for name, _, _ in worded_train_files(absent_per_image)}
    entries_of_images = _entries_in_order(out_dir, seed, n_images, size, workers, absent_per_image)
    if progress:
        from tqdm import tqdm

        entries_of_images = tqdm(entries_of_images, total=n_images, desc="m2sa-synth", unit="img")
    for entries in entries_of_images:
        for name, entry in entries.mmr.items():
            mmr[name].append(entry)
        if entries.mask_entry is not None:
            masks[entries.split].append(entries.mask_entry)
        for collected, entry in ((conversations_train, entries.conversation), (knowledge_train, entries.knowledge),
                                 (knowledge_seg_train, entries.knowledge_seg), (r2sm, entries.r2sm),
                                 (amodal, entries.amodal)):
            if entry is not None:
                collected.append(entry)
        for name, entry in entries.worded.items():
            worded_train[name].append(entry)
    counts = {}
    for name, entries in mmr.items():
        _write_json(out_dir / f"MMR_{name}.json", entries)
        counts[f"MMR_{name}.json"] = sum(len(e["questions"]) for e in entries)
    generator = {"seed": seed, "images": n_images, "size": size}
    _write_layout(out_dir / "r2sm_test.json", "r2sm", "test", generator, r2sm)
    _write_layout(out_dir / "amodal_reasonseg_test.json", "amodal_reasonseg", "test", generator, amodal)
    for split, entries in masks.items():
        _write_layout(out_dir / f"masks_{split}.json", "mask_annotations", split, generator, entries)
        counts[f"masks_{split}.json"] = sum(len(e["annotations"]) for e in entries)
    for name, entries in (("conversations_train.json", conversations_train), ("knowledge_train.json", knowledge_train)):
        _write_layout(out_dir / name, "image_conversations", "train", generator, entries)
        counts[name] = sum(len(e["conversations"]) for e in entries)
    for name, entries in (("knowledge_seg_train.json", knowledge_seg_train), *worded_train.items()):
        _write_json(out_dir / name, entries)
        counts[name] = sum(len(e["questions"]) for e in entries)
    counts["r2sm_test.json"] = sum(len(e["queries"]) for e in r2sm)
    counts["amodal_reasonseg_test.json"] = sum(len(e["questions"]) for e in amodal)
    return counts


def _write_layout(path: Path, dataset: str, split: str, generator: dict[str, int], images: list) -> None:
    """Write a file of the project layouts: one header (docs/DATASETS.md), then the image entries."""
    _write_json(path, {"dataset": dataset, "version": 1, "split": split, "generator": generator, "images": images})


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_suffix(".json.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, separators=(",", ":"))
    tmp.replace(path)


__all__ = ["CATEGORY_NAMES", "generate_dataset", "generate_image", "split_of"]
