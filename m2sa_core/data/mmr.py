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
Reader for the MMR release (MMR_{train,val,test_obj_only,test_part_only,test_mixed}.json).

The file is a list of image entries: ``file_name``, ``height``, ``width``, ``image_id``,
``questions`` (list of str), ``answers`` (per question, a list of annotation dicts with
``bbox``, ``segmentation`` (COCO RLE), ``category_name``, ``category_id``, ``image_id``,
``sorted_category_id``), ``text_answers`` (per question, one ``{seg}`` per annotation,
in annotation order), ``raw_answers``, ``coco_url``, ``neg_category_ids`` and
``not_exhaustive_category_ids``. Each question becomes one :class:`SegRecord`, paired
with *its own* answer and annotations (the authors' loader pairs sampled questions
with the first answers; we do not).

Extra keys the synthetic world writes and this reader understands:
``amodal_segmentation`` per annotation (kept as ``amodal_rle``), and ``mask_types`` /
``question_families`` per image (one entry per question). ``missing`` per image, one
entry per question, marks commands about something the image does not hold: ``null``
for a present question, ``{"kind": K, "words": W}`` for an absent one, whose answers
are ``[]`` and whose text answer names W with no ``{seg}``. An absent question becomes a
record with no targets and ``meta["missing"]``; a record is absent exactly when
``"missing" in record.meta``. Entries without the list (the MMR release) read as before.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from m2sa_core.data.records import (
    check_rle_field,
    DataError,
    entry_image_id,
    load_json,
    ProblemLog,
    require,
    require_image_file,
    require_size,
    SegDataset,
    SegRecord,
    TargetAnnotation,
)
from m2sa_core.labels import label_segments, make_label, parse_label_before, split_category
from m2sa_core.types import MASK_TYPES

SEG_PLACEHOLDER = "{seg}"
# What an absent question may say is missing (docs/DATASETS.md, absent commands).
MISSING_KINDS = ("category", "part", "instance", "property")
MMR_SPLITS = ("train", "val", "test_obj_only", "test_part_only", "test_mixed")
_IMAGE_KEYS = ("coco_url", "neg_category_ids", "not_exhaustive_category_ids")


class MMRDataset(SegDataset):
    """Records of one MMR JSON file (one per question)."""


def split_from_path(path: Path) -> str:
    """Return "test_mixed" for ".../MMR_test_mixed.json"; the file stem otherwise."""
    stem = path.stem
    return stem[4:] if stem.startswith("MMR_") else stem


def target_from_annotation(
    ann: Any, text_before: str, height: int, width: int, what: str
) -> TargetAnnotation:
    """
    Return a TargetAnnotation from one MMR-style annotation dict and the answer text before its {seg}.

    Granularity comes from the PACO category ("object:part" is a part) or, when the
    category is a bare object name, from the answer's ``object_N's part`` label.
    """
    category = require(ann, "category_name", str, what)
    if not category:
        raise ValueError(f"{what}['category_name'] is empty")
    rle = check_rle_field(require(ann, "segmentation", dict, what), height, width, f"{what}['segmentation']")
    amodal = ann.get("amodal_segmentation")
    if amodal is not None:
        amodal = check_rle_field(amodal, height, width, f"{what}['amodal_segmentation']")
    bbox = ann.get("bbox", [])
    if not isinstance(bbox, list) or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in bbox):
        raise ValueError(f"{what}['bbox'] must be a list of numbers")
    obj, part = split_category(category)
    parsed = parse_label_before(text_before)
    instance = 0
    if parsed is not None and parsed.object_name == obj:
        instance = parsed.instance
        if not part:
            part = parsed.part_name
    if parsed is not None and parsed.object_name == obj and parsed.part_name == part:
        label = parsed.label
    else:
        label = make_label(obj, instance, part)
    return TargetAnnotation.named(label, category, obj, instance, part, rle, amodal, bbox)


def read_mmr(json_path: str | Path, image_root: str | Path, strict: bool = False, split: str | None = None,
             source: str | None = None) -> MMRDataset:
    """
    Read one MMR JSON file; images are resolved under ``image_root`` but not loaded.

    ``split`` defaults to the file name ("MMR_test_mixed.json" -> "test_mixed");
    ``source`` defaults to "synthetic" for entries written by the synthetic world (they
    carry ``question_families``) and "mmr" otherwise, so mixtures can be weighted.

    Lenient mode (default) skips bad entries and lists them in ``.problems``; strict
    mode raises :class:`~m2sa_core.data.records.DataError` at the first one.
    """
    json_path = Path(json_path)
    image_root = Path(image_root)
    split = split or split_from_path(json_path)
    log = ProblemLog(json_path, strict)
    data = load_json(json_path)
    if not isinstance(data, list):
        raise DataError(f"{json_path}: top level must be a list of image entries, got {type(data).__name__}")
    records: list[SegRecord] = []
    for index, entry in enumerate(data):
        image_id = entry_image_id(entry, index)
        try:
            image = _parse_image(entry, index, image_root)
        except ValueError as exc:
            log.report(image_id, None, str(exc))
            continue
        for q_index, question in enumerate(image["questions"]):
            what = f"answers[{q_index}]"
            try:
                origin = source or ("synthetic" if "question_families" in entry else "mmr")
                record = _parse_question(entry, image, q_index, question, what, split, origin)
            except ValueError as exc:
                log.report(image_id, q_index, str(exc))
                continue
            records.append(record)
    return MMRDataset(records, log.problems, json_path)


def _parse_image(entry: Any, index: int, image_root: Path) -> dict[str, Any]:
    """Validate the image-level fields shared by all questions of an entry."""
    what = f"entry {index}"
    image_id = require(entry, "image_id", (int, str), what)
    file_name = require(entry, "file_name", str, what)
    height, width = require_size(entry, what)
    questions = require(entry, "questions", list, what)
    answers = require(entry, "answers", list, what)
    text_answers = require(entry, "text_answers", list, what)
    if not (len(questions) == len(answers) == len(text_answers)):
        raise ValueError(
            f"{what} has {len(questions)} questions, {len(answers)} answers and "
            f"{len(text_answers)} text_answers; they must match one to one"
        )
    image_path = require_image_file(image_root, file_name, what)
    for key in ("mask_types", "question_families", "missing"):
        if key in entry and (not isinstance(entry[key], list) or len(entry[key]) != len(questions)):
            raise ValueError(f"{what}['{key}'] must be a list with one entry per question")
    return {
        "image_id": image_id,
        "image_path": image_path,
        "height": height,
        "width": width,
        "questions": questions,
        "answers": answers,
        "text_answers": text_answers,
    }


def _missing(entry: dict, q_index: int) -> dict[str, str] | None:
    """Return ``{"kind", "words"}`` when question ``q_index`` is about something absent, else None."""
    if "missing" not in entry or entry["missing"][q_index] is None:
        return None
    value = entry["missing"][q_index]
    where = f"missing[{q_index}]"
    if not isinstance(value, dict) or set(value) != {"kind", "words"}:
        raise ValueError(f"{where} must be null or an object with exactly the keys 'kind' and 'words', got {value!r}")
    if value["kind"] not in MISSING_KINDS:
        raise ValueError(f"{where}['kind'] must be one of {MISSING_KINDS}, got {value['kind']!r}")
    if not isinstance(value["words"], str) or not value["words"].strip():
        raise ValueError(f"{where}['words'] must be a non-empty string, got {value['words']!r}")
    return {"kind": value["kind"], "words": value["words"]}


def _parse_question(entry: dict, image: dict, q_index: int, question: Any, what: str, split: str,
                    source: str) -> SegRecord:
    if not isinstance(question, str) or not question.strip():
        raise ValueError(f"questions[{q_index}] must be a non-empty string")
    template = image["text_answers"][q_index]
    if not isinstance(template, str):
        raise ValueError(f"text_answers[{q_index}] must be a string, got {type(template).__name__}")
    annotations = image["answers"][q_index]
    missing = _missing(entry, q_index)
    if missing is not None:
        if annotations != []:
            raise ValueError(f"{what} must be an empty list: missing[{q_index}] says the question's target is absent")
        if not template.strip():
            raise ValueError(f"text_answers[{q_index}] must name what is missing (missing[{q_index}]), got ''")
    elif not isinstance(annotations, list) or not annotations:
        raise ValueError(f"{what} must be a non-empty list of annotations")
    n_seg = template.count(SEG_PLACEHOLDER)
    if n_seg != len(annotations):
        raise ValueError(
            f"text_answers[{q_index}] has {n_seg} {SEG_PLACEHOLDER} placeholders but "
            f"{len(annotations)} annotations"
        )
    before = label_segments(template, SEG_PLACEHOLDER)
    targets = [
        target_from_annotation(ann, before[i], image["height"], image["width"], f"{what}[{i}]")
        for i, ann in enumerate(annotations)
    ]
    mask_type = None
    if "mask_types" in entry:
        mask_type = entry["mask_types"][q_index]
        if mask_type not in MASK_TYPES:
            raise ValueError(f"mask_types[{q_index}] must be one of {MASK_TYPES}, got {mask_type!r}")
    meta: dict[str, Any] = {k: entry[k] for k in _IMAGE_KEYS if k in entry}
    meta["file_name"] = entry["file_name"]
    raw = entry.get("raw_answers")
    if isinstance(raw, list) and len(raw) == len(image["questions"]):
        meta["raw_answer"] = raw[q_index]
    if "question_families" in entry:
        meta["family"] = entry["question_families"][q_index]
    if missing is not None:
        meta["missing"] = missing
    return SegRecord(
        source=source,
        split=split,
        image_path=image["image_path"],
        image_id=image["image_id"],
        question_index=q_index,
        question=question.strip(),
        answer_template=template.strip(),
        targets=targets,
        height=image["height"],
        width=image["width"],
        mask_type=mask_type,
        meta=meta,
    )
