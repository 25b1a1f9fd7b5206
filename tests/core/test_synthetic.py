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
The synthetic household world.

Determinism, mask sanity, answer/annotation agreement, held-out phrasings, instance
numbering, and the m2sa-synth CLI.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
import re
import time

from m2sa_core.data.rle import decode_rle
from m2sa_core.data.synthetic import CATEGORIES, generate_dataset, main, text_corpus
from m2sa_core.data.synthetic.questions import (
    AMODAL_PHRASINGS,
    MIXED_PHRASINGS,
    MULTI_FUNCTIONS,
    OBJECT_FUNCTIONS,
    PART_FUNCTIONS,
    VISIBLE_PHRASINGS,
)
from m2sa_core.data.synthetic.world import MMR_FILES
from m2sa_core.labels import label_segments, parse_label_before, split_category
import numpy as np
import pytest

N_IMAGES = 30
MMR_KEYS = {"file_name", "height", "width", "image_id", "questions", "answers", "text_answers", "raw_answers",
            "coco_url", "neg_category_ids", "not_exhaustive_category_ids"}
ANN_KEYS = {"bbox", "segmentation", "category_name", "category_id", "image_id", "sorted_category_id"}


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("world")
    generate_dataset(out, N_IMAGES, seed=11)
    return out


def load(world: Path, name: str):
    return json.loads((world / name).read_text())


def digest(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_worker_processes_write_the_same_files_byte_for_byte(world, tmp_path):
    """m2sa-synth renders on every core by default; a world must not depend on how many."""
    side_by_side = tmp_path / "two_workers"
    generate_dataset(side_by_side, N_IMAGES, seed=11, workers=2)
    assert digest(side_by_side) == digest(world)
    with pytest.raises(ValueError, match="workers must be at least 1"):
        generate_dataset(tmp_path / "none", N_IMAGES, seed=11, workers=0)


def test_same_seed_same_dataset_other_seed_other_dataset(world, tmp_path):
    again = tmp_path / "again"
    start = time.process_time()  # CPU time: other jobs on the machine do not count
    generate_dataset(again, N_IMAGES, seed=11)
    elapsed = time.process_time() - start
    assert digest(again) == digest(world)
    other = tmp_path / "other"
    generate_dataset(other, N_IMAGES, seed=12)
    assert digest(other)["MMR_train.json"] != digest(world)["MMR_train.json"]
    # 1000 images must take well under a couple of minutes: ~100 ms per image is the
    # most that leaves room for it on a 2-core machine.
    assert elapsed / N_IMAGES < 0.1, f"{elapsed / N_IMAGES * 1000:.0f} ms CPU per image"


def test_files_have_the_mmr_release_keys_and_split_by_granularity(world):
    names = {f"MMR_{s}.json" for s in MMR_FILES} | {"r2sm_test.json", "amodal_reasonseg_test.json"}
    assert names <= {p.name for p in world.iterdir()}
    assert len(list((world / "images").glob("*.png"))) == N_IMAGES
    for split in MMR_FILES:
        entries = load(world, f"MMR_{split}.json")
        assert entries, split
        for e in entries:
            assert MMR_KEYS <= set(e)
            for anns, family in zip(e["answers"], e["question_families"]):
                if family == "absent":  # no targets (test_synthetic_absent.py)
                    assert anns == []
                    continue
                parts = set()
                for a in anns:
                    assert ANN_KEYS <= set(a) and "amodal_segmentation" in a
                    parts.add(":" in a["category_name"])
                if split == "test_obj_only":
                    assert parts == {False}
                elif split == "test_part_only":
                    assert parts == {True}
                elif split == "test_mixed":
                    assert parts == {False, True}
    train_ids = {e["image_id"] for e in load(world, "MMR_train.json")}
    val_ids = {e["image_id"] for e in load(world, "MMR_val.json")}
    test_ids = {e["image_id"] for s in MMR_FILES[2:] for e in load(world, f"MMR_{s}.json")}
    assert not (train_ids & val_ids) and not (train_ids & test_ids) and not (val_ids & test_ids)


def test_masks_inside_image_amodal_contains_visible_every_seg_annotated(world):
    families = set()
    for split in MMR_FILES:
        for e in load(world, f"MMR_{split}.json"):
            h, w = e["height"], e["width"]
            assert (h, w) == (256, 256)
            for q, template, anns, mask_type, family in zip(e["questions"], e["text_answers"], e["answers"],
                                                            e["mask_types"], e["question_families"]):
                if family == "absent":  # no targets (test_synthetic_absent.py)
                    assert template.count("{seg}") == len(anns) == 0
                    continue
                assert template.count("{seg}") == len(anns) >= 1
                assert 1 <= len(anns) <= 6
                for before, a in zip(label_segments(template), anns):
                    seg = decode_rle(a["segmentation"], h, w)  # size checked against the image
                    amodal = decode_rle(a["amodal_segmentation"], h, w)
                    assert seg.any()
                    assert not (seg & ~amodal).any()
                    if mask_type == "amodal":
                        assert np.array_equal(seg, amodal)
                    x, y, bw, bh = a["bbox"]
                    assert 0 <= x and 0 <= y and x + bw <= w and y + bh <= h
                    # The text names the annotated target right before its {seg}.
                    parsed = parse_label_before(before)
                    obj, part = split_category(a["category_name"])
                    assert parsed is not None and (parsed.object_name, parsed.part_name) == (obj, part), before
                    assert obj in CATEGORIES and (not part or part in CATEGORIES[obj].parts)
            families.update(e["question_families"])
    assert families == {"object", "part", "multi", "mixed", "amodal", "visible", "absent"}


def test_some_objects_are_occluded(world):
    hidden = 0
    for e in load(world, "MMR_train.json"):
        for anns in e["answers"]:
            for a in anns:
                hidden += int(decode_rle(a["amodal_segmentation"]).sum() > decode_rle(a["segmentation"]).sum())
    assert hidden > 0


def test_instances_are_numbered_left_to_right(world):
    checked = 0
    for e in load(world, "MMR_train.json"):
        centres: dict[str, dict[int, float]] = {}
        for template, anns in zip(e["text_answers"], e["answers"]):
            for before, a in zip(label_segments(template), anns):
                parsed = parse_label_before(before)
                if not parsed.part_name:
                    xs = np.flatnonzero(decode_rle(a["amodal_segmentation"]).any(axis=0))
                    centres.setdefault(parsed.object_name, {})[parsed.instance] = float(xs.mean())
        for by_instance in centres.values():
            if len(by_instance) > 1:
                order = [by_instance[k] for k in sorted(by_instance)]
                assert order == sorted(order)
                checked += 1
    assert checked > 0


def _held_out_texts() -> set[str]:
    texts = set()
    for spec in CATEGORIES.values():
        for name in spec.spoken:
            for fn in OBJECT_FUNCTIONS + PART_FUNCTIONS + MULTI_FUNCTIONS:
                texts.add(fn.phrasings[-1].replace("{name}", name))
            for phrasing in (AMODAL_PHRASINGS[-1], VISIBLE_PHRASINGS[-1]):
                texts.add(phrasing.replace("{name}", name))
            for fn in PART_FUNCTIONS:
                texts.add(MIXED_PHRASINGS[-1].replace("{name}", name).replace("{action}", fn.action))
    return texts


def test_mixed_words_train_asks_for_each_object_and_its_part_without_the_word_part(world):
    """
    The object-and-part requests joined without "part".

    For every train image, per category in view, every instance followed by the part
    that serves the action named in the question, with that instance's and part's
    masks; no wording says "part" or "where I" or carries a clause of the held-out
    mixed phrasing, so the held-out test still measures generalisation.
    """
    from m2sa_core.data.synthetic.wording.mixed import HELD_OUT_CLAUSES

    assert HELD_OUT_CLAUSES == ("point out the", "and also where i")
    masks = {e["image_id"]: {a["label"]: a for a in e["annotations"]}
             for e in load(world, "masks_train.json")["images"]}
    train_ids = {e["image_id"] for e in load(world, "MMR_train.json")}
    held_out = _held_out_texts()
    parts_by_action = {fn.action: fn.targets[0] for fn in PART_FUNCTIONS}
    wordings, asked = set(), 0
    entries = load(world, "mixed_words_train.json")
    assert entries and {e["image_id"] for e in entries} <= train_ids
    for entry in entries:
        image = masks[entry["image_id"]]
        for question, answer, anns, kind, family in zip(entry["questions"], entry["text_answers"], entry["answers"],
                                                        entry["mask_types"], entry["question_families"]):
            assert (kind, family) == ("modal", "mixed")
            lowered = question.lower()
            assert question not in held_out and "part" not in lowered and "where i" not in lowered, question
            assert not any(clause in lowered for clause in HELD_OUT_CLAUSES), question
            action = next(a for a in parts_by_action if question.rstrip(".?").endswith(a))
            category, part = parts_by_action[action]
            instances = sorted((lab for lab, a in image.items() if a["category_name"] == category),
                               key=lambda lab: int(lab.rsplit("_", 1)[1]))
            labels = [lab for obj in instances for lab in (obj, f"{obj}'s {part}")]
            assert re.findall(r"the ([^,{]+?) \{seg\}", answer) == labels
            assert [a["segmentation"] for a in anns] == [image[lab]["segmentation"] for lab in labels]
            for name in sorted(CATEGORIES[category].spoken, key=len, reverse=True):
                question = question.replace(f"the {name}", "the NAME")
            wordings.add(question.replace(action, "ACTION"))
            asked += 1
    assert asked >= len(entries) and len(wordings) > 20


def test_level_words_train_asks_each_action_for_the_object_then_its_part(world):
    """
    The level pairs ask each part's action for the object, then for its part.

    For every train image, per category in view, one of its part's
    actions asked for the object without naming it (every instance, object level) and then
    for the part, naming the object (every instance's part), with those masks; the object
    side asks by use, never by what the thing has (run 31 learned that one cue); each pair
    differs only in how it is put, and no wording is a held-out sentence or carries a
    clause of one, so the held-out splits still measure reading the level.
    """
    from m2sa_core.data.synthetic.wording.level import HELD_OUT_CLAUSES

    assert "which part of the" in HELD_OUT_CLAUSES and "how do i power up the" in HELD_OUT_CLAUSES
    assert "which parts are designed for my hand" in HELD_OUT_CLAUSES  # the multi families' too
    masks = {e["image_id"]: {a["label"]: a for a in e["annotations"]}
             for e in load(world, "masks_train.json")["images"]}
    train_ids = {e["image_id"] for e in load(world, "MMR_train.json")}
    held_out = _held_out_texts()
    parts_by_action = {fn.action: fn.targets[0] for fn in PART_FUNCTIONS}
    entries = load(world, "level_words_train.json")
    assert entries and {e["image_id"] for e in entries} <= train_ids
    pairs = 0
    for entry in entries:
        image = masks[entry["image_id"]]
        rows = list(zip(entry["questions"], entry["text_answers"], entry["answers"], entry["mask_types"],
                        entry["question_families"], strict=True))
        assert len(rows) % 2 == 0
        for (obj_q, obj_a, obj_anns, *obj_kind), (part_q, part_a, part_anns, *part_kind) in zip(rows[::2], rows[1::2]):
            assert (obj_kind, part_kind) == (["modal", "object"], ["modal", "part"])
            action = next(a for a in parts_by_action if part_q.rstrip(".?").endswith(a) or f" {a}," in part_q)
            assert action in obj_q, (obj_q, part_q)
            category, part = parts_by_action[action]
            assert not any(f"the {name} " in obj_q or f"the {name}," in obj_q
                           for name in CATEGORIES[category].spoken), obj_q
            assert " has " not in obj_q, obj_q  # by use, not possession: run 31's cue (training/tiny/research/RUNS.md)
            assert any(f"the {name}" in part_q for name in CATEGORIES[category].spoken), part_q
            for question in (obj_q, part_q):
                assert question not in held_out and not any(c in question.lower() for c in HELD_OUT_CLAUSES), question
            instances = sorted((lab for lab, a in image.items() if a["category_name"] == category),
                               key=lambda lab: int(lab.rsplit("_", 1)[1]))
            part_labels = [f"{o}'s {part}" for o in instances]
            for answer, anns, labels in ((obj_a, obj_anns, instances), (part_a, part_anns, part_labels)):
                assert re.findall(r"the ([^,{]+?) \{seg\}", answer) == labels
                assert [a["segmentation"] for a in anns] == [image[lab]["segmentation"] for lab in labels]
            pairs += 1
    assert pairs >= len(entries)


def _present_questions(entry: dict) -> list[str]:
    """Return the entry's questions less its absent ones (their phrasings: test_synthetic_absent.py)."""
    return [q for q, family in zip(entry["questions"], entry["question_families"]) if family != "absent"]


def test_val_and_test_use_only_held_out_phrasings(world):
    held_out = _held_out_texts()
    train_qs = {q for e in load(world, "MMR_train.json") for q in _present_questions(e)}
    eval_qs = {q for s in MMR_FILES[1:] for e in load(world, f"MMR_{s}.json") for q in _present_questions(e)}
    assert train_qs and eval_qs
    assert not (train_qs & held_out)
    assert eval_qs <= held_out


def test_text_corpus_covers_every_generated_word(world):
    words = set()
    for text in text_corpus():
        words.update(re.findall(r"\w+|[^\w\s]", text))
    for split in MMR_FILES:
        for e in load(world, f"MMR_{split}.json"):
            for text in e["questions"] + e["text_answers"]:
                missing = set(re.findall(r"\w+|[^\w\s]", text.replace("{seg}", ""))) - words
                assert not missing, (text, missing)


def test_cli_writes_the_dataset(tmp_path, capsys):
    assert main(["--out", str(tmp_path / "d"), "--images", "4", "--seed", "2", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "MMR_train.json" in out and (tmp_path / "d" / "MMR_test_mixed.json").is_file()
    with pytest.raises(SystemExit):
        main(["--out", str(tmp_path / "e"), "--images", "0"])


def test_views_train_asks_each_instance_of_a_several_target_view_question_by_name(world):
    """
    R2SM asks for one instance at a time ("... I mean the bottle_2.").

    The train split asks the same, one named question per target of every
    visible/complete question about several instances, with that target's mask and the
    asked mask type.
    """
    train = {e["image_id"]: e for e in load(world, "MMR_train.json")}
    named = {}
    for entry in load(world, "views_train.json"):
        source = train[entry["image_id"]]  # train images only
        for q, answer, anns, kind in zip(entry["questions"], entry["text_answers"], entry["answers"],
                                         entry["mask_types"]):
            asked, label = re.fullmatch(r"(.+) I mean the (\S+)\.", q).groups()
            assert len(anns) == 1 and answer.count("{seg}") == 1 and f"the {label} {{seg}}" in answer
            k = source["questions"].index(asked)
            assert source["mask_types"][k] == kind == ("amodal" if source["question_families"][k] == "amodal"
                                                       else "modal")
            labels = re.findall(r"the (\S+) \{seg\}", source["text_answers"][k])
            assert anns[0]["segmentation"] == source["answers"][k][labels.index(label)]["segmentation"]
            named.setdefault((entry["image_id"], k), set()).add(label)
    expected = {(i, k): set(re.findall(r"the (\S+) \{seg\}", e["text_answers"][k]))
                for i, e in train.items() for k, fam in enumerate(e["question_families"])
                if fam in ("amodal", "visible") and len(e["answers"][k]) > 1}
    assert expected and named == expected


def _view_rows(source: dict, entry: dict):
    """
    Walk a generated entry against the train entry it was made from.

    For each of the source's visible/complete questions, a row about all its instances
    and, when it has several, one per named instance. Yields (k, the source's
    annotations for that row, the question without its "I mean the X." suffix, text
    answer, answers, mask type); fails if the entry holds anything more.
    """
    rows = iter(zip(entry["questions"], entry["text_answers"], entry["answers"], entry["mask_types"]))
    for k, family in enumerate(source["question_families"]):
        if family not in ("amodal", "visible"):
            continue
        anns = source["answers"][k]
        labels = re.findall(r"the (\S+) \{seg\}", source["text_answers"][k])
        expected = [(None, anns)] + ([(lab, [a]) for lab, a in zip(labels, anns)] if len(anns) > 1 else [])
        for label, want in expected:
            question, answer, got, kind = next(rows)
            if label is not None:
                question = re.fullmatch(rf"(.+) I mean the {re.escape(label)}\.", question).group(1)
            yield k, want, question, answer, got, kind
    assert next(rows, None) is None  # nothing else in the entry


def test_view_words_train_words_each_view_request_afresh_without_held_out_clauses(world):
    """
    The visible/complete requests worded from the view lexicon.

    For each such train question, one rewording about all its instances and one per
    named instance when it has several, each with the source's masks and mask type; no
    wording carries a clause of a held-out phrasing, so the held-out test still
    measures generalisation.
    """
    from m2sa_core.data.synthetic.wording.view import HELD_OUT_CLAUSES

    train = {e["image_id"]: e for e in load(world, "MMR_train.json")}
    held_out = _held_out_texts()
    kinds, wordings = set(), set()
    entries = load(world, "view_words_train.json")
    assert entries
    for entry in entries:
        source = train[entry["image_id"]]  # train images only
        for k, want, question, answer, got, kind in _view_rows(source, entry):
            family = source["question_families"][k]
            assert kind == source["mask_types"][k] == ("amodal" if family == "amodal" else "modal")
            assert [a["segmentation"] for a in got] == [a["segmentation"] for a in want]
            assert answer.count("{seg}") == len(want)
            assert question not in held_out
            assert not any(clause in question.lower() for clause in HELD_OUT_CLAUSES), question
            kinds.add(kind)
            wordings.add(re.sub(r"the .+?([,.?]| as | but | only | with )", r"the NAME\1", question, count=1))
    assert kinds == {"amodal", "modal"} and len(wordings) > 20


def test_view_twins_ask_each_train_view_request_again_as_the_other_kind(world):
    """
    Each train visible/complete question made from a fixed phrasing comes back as its twin of the other kind.

    The same targets, the other mask type, answered in the other kind's words, once
    about all instances and once per named instance when it has several; no twin carries
    a clause of a held-out phrasing.
    """
    from m2sa_core.data.synthetic.wording.view import HELD_OUT_CLAUSES
    from m2sa_core.data.synthetic.wording.view_twins import TWINS

    train = {e["image_id"]: e for e in load(world, "MMR_train.json")}
    other = {"amodal": "modal", "modal": "amodal"}
    answer_words = {"amodal": ("whole", "complete"), "modal": ("visible",)}
    twins_of = {twin.split("{name}")[0] for twins in TWINS.values() for twin in twins}
    kinds = set()
    entries = load(world, "view_twins_train.json")
    assert entries
    for entry in entries:
        source = train[entry["image_id"]]  # train images only
        for k, want, question, answer, got, kind in _view_rows(source, entry):
            assert kind == other[source["mask_types"][k]]
            assert any(word in answer for word in answer_words[kind]), answer
            assert [a["amodal_segmentation"] for a in got] == [a["amodal_segmentation"] for a in want]
            for a in got:  # the twin's own kind of mask: the complete one, or the visible part of it
                seg, whole = decode_rle(a["segmentation"]), decode_rle(a["amodal_segmentation"])
                assert (seg == whole).all() if kind == "amodal" else (seg.any() and not (seg & ~whole).any())
            assert answer.count("{seg}") == len(want)
            assert any(question.startswith(start) for start in twins_of), question
            assert not any(clause in question.lower() for clause in HELD_OUT_CLAUSES), question
            kinds.add(kind)
    assert kinds == {"amodal", "modal"}


def test_every_train_view_phrasing_has_twins_of_the_other_kind():
    """
    A phrasing added to or reworded in questions.py without twins would lean its words towards one mask kind again.

    The twins keep most of their source's words.
    """
    from m2sa_core.data.synthetic.questions import phrasings_for
    from m2sa_core.data.synthetic.wording.view_twins import TWINS

    train = set(phrasings_for(AMODAL_PHRASINGS, False) + phrasings_for(VISIBLE_PHRASINGS, False))
    assert set(TWINS) == train
    for phrasing, twins in TWINS.items():
        words = set(re.findall(r"[a-z]+", phrasing.lower())) - {"the", "of", "name"}
        for twin in twins:
            kept = words & set(re.findall(r"[a-z]+", twin.lower()))
            assert len(kept) >= len(words) / 2, (phrasing, twin)


def test_view_wording_says_hidden_as_often_when_asking_for_the_visible_mask():
    """
    A hidden word must not decide the mask kind.

    The composed visible requests say "hidden" ("excluding the hidden part") about
    as often as the complete ones ("including the hidden part"), as with the other
    hidden words.
    """
    from m2sa_core.data.synthetic.knowledge import VIEW_WORDS
    from m2sa_core.data.synthetic.wording.view import compose

    rng = np.random.default_rng(0)
    texts = {kind: [compose(rng, kind, "mug") for _ in range(4000)] for kind in ("amodal", "visible")}
    for word in ("hidden", "occluded", "covered"):
        assert word in VIEW_WORDS["hidden"]
        said = {kind: sum(word in t for t in ts) for kind, ts in texts.items()}
        assert min(said.values()) > 0.75 * max(said.values()), (word, said)


@pytest.mark.integration
def test_phrase_exposure_shows_the_twins_balance_a_phrasings_words(world, tmp_path):
    """
    training/tiny/research/phrase_exposure.py, as run from the repository.

    Over MMR_train alone the fixed complete phrasing's "hidden parts" comes with complete requests
    only; adding the twins brings it to visible ones as well.
    """
    import subprocess
    import sys

    def table(*files: str) -> dict[str, list[float]]:
        config = tmp_path / f"mix{len(files)}.yaml"
        config.write_text("data:\n" + "".join(
            f"  - {{kind: synthetic, name: s{i}, path: {world / f}, image_root: {world / 'images'}, rate: 1.0}}\n"
            for i, f in enumerate(files)))
        root = Path(__file__).resolve().parents[2]
        out = subprocess.run([sys.executable, "training/tiny/research/phrase_exposure.py", str(config), "hidden parts"],
                             cwd=root, capture_output=True, text=True, check=True).stdout.splitlines()
        rows = [line.rsplit(maxsplit=3) for line in out[1:]]
        return {phrase: [float(x) for x in counts] for phrase, *counts in rows}

    complete, visible, _ = table("MMR_train.json")["hidden parts"]
    assert complete > 0 and visible == 0
    complete, visible, _ = table("MMR_train.json", "view_twins_train.json")["hidden parts"]
    assert complete > 0 and visible > 0


def _research_script(script: str, *args: str, capsys, monkeypatch) -> tuple[int, list[str], str]:
    """
    ``python training/tiny/research/<script> <args>`` from the repository, run in this process.

    The script runs as ``__main__`` with its own argv, as the command line runs it; in
    this process the model stack is already imported, which a child process would spend
    seconds doing again. Returns (exit status, stdout lines, stderr).
    """
    import runpy
    import sys

    root = Path(__file__).resolve().parents[2]
    path = root / "training" / "tiny" / "research" / script
    monkeypatch.chdir(root)
    monkeypatch.setattr(sys, "argv", [str(path), *args])
    code = 0
    try:
        runpy.run_path(str(path), run_name="__main__")
    except SystemExit as stop:
        code = stop.code or 0
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def test_probe_view_wording_asks_every_variant_about_the_same_objects(world, capsys, monkeypatch):
    """
    training/tiny/research/probe_view_wording.py, as run from the repository with the shipped model.

    One table row per request, each counted over the same held-out visible requests.
    """
    code, out, err = _research_script("probe_view_wording.py", "--model", "models/m2sa-tiny-synth",
                                      "--heldout", str(world), "--images", "1", "--variant", "Mark the {name} in view.",
                                      capsys=capsys, monkeypatch=monkeypatch)
    assert code == 0, err
    rows = [line for line in out[2:] if line.startswith("| ")]
    assert len(rows) == 9 and rows[-1].startswith("| Mark the X in view. |")
    assert {row.rsplit("|", 2)[1].split("/")[1].strip() for row in rows} == {"1"}


def test_probe_patch_words_scores_the_training_and_val_images_it_is_asked_for(world, capsys, monkeypatch):
    """
    training/tiny/research/probe_patch_words.py, as run from the repository with the shipped model.

    One row per split over the first images asked for, each instance column with its patch count.
    """
    code, out, err = _research_script("probe_patch_words.py", "--model", "models/m2sa-tiny-synth",
                                      "--world", str(world), "--images", "2", capsys=capsys, monkeypatch=monkeypatch)
    assert code == 0, err
    rows = {line.split("|")[1].strip(): line for line in out[2:]}
    assert set(rows) == {"train", "val"}
    for row in rows.values():
        cells = [c.strip() for c in row.split("|")[2:-1]]
        assert cells[0] == "2" and 0.0 <= float(cells[1]) <= 1.0
        first = re.fullmatch(r"(\d\.\d{3}) \((\d+)\)", cells[2])  # every scene has a first instance
        assert first and 0.0 <= float(first[1]) <= 1.0 and int(first[2]) > 0


def test_probe_patch_words_also_scores_another_worlds_training_images(world, tmp_path, capsys, monkeypatch):
    """
    ``--also WORLD``: a third row, that world's training images under the first world's candidate words.

    The same images under another name score exactly as the train row.
    """
    import shutil

    other = tmp_path / "other"
    other.mkdir()
    shutil.copy(world / "masks_train.json", other / "masks_train.json")
    (other / "images").symlink_to((world / "images").resolve())
    code, out, err = _research_script("probe_patch_words.py", "--model", "models/m2sa-tiny-synth", "--world",
                                      str(world), "--images", "2", "--also", str(other),
                                      capsys=capsys, monkeypatch=monkeypatch)
    assert code == 0, err
    rows = {line.split("|")[1].strip(): line.split("|", 2)[2] for line in out[2:]}
    assert set(rows) == {"train", "val", f"train of {other}"}
    assert rows[f"train of {other}"] == rows["train"]


def test_probe_patch_words_by_object_accounts_for_every_object_once(world, capsys, monkeypatch):
    """
    ``--by-object``: one row per (objects of its category, its own number) and split.

    Each object counted once, either without a main patch or with at most all of it read.
    """
    code, out, err = _research_script("probe_patch_words.py", "--model", "models/m2sa-tiny-synth",
                                      "--world", str(world), "--images", "3", "--by-object",
                                      capsys=capsys, monkeypatch=monkeypatch)
    assert code == 0, err
    rows = [[c.strip() for c in line.split("|")[1:-1]] for line in out[2:] if line.startswith("| ")]
    for split in ("train", "val"):
        records = json.loads((world / f"masks_{split}.json").read_text())
        records = records["images"] if isinstance(records, dict) else records
        mine = [r for r in rows if r[0] == split]
        assert mine and all(r[1] == str(min(3, len(records))) for r in mine)
        objects = sum(int(r[4]) for r in mine)
        assert objects > 0
        for r in mine:
            many, own, total, unseen, some, most, higher = map(int, r[2:])
            assert 1 <= own <= many and unseen + some <= total and most <= some and unseen + higher <= total


def test_lexicon_cuts_held_out_clauses_and_never_composes_one():
    """
    Clauses of three words or more, cut at slots and sentence ends, each once.

    A composition that can only produce a forbidden clause fails loudly instead
    of slipping a held-out sentence into training.
    """
    from m2sa_core.data.synthetic.wording.lexicon import compose, held_out_clauses

    clauses = held_out_clauses(["Point out the {name} and also where I {action}.", "Point out the {name} now."])
    assert clauses == ("point out the", "and also where i")
    rng = np.random.default_rng(0)
    forms = ("{v} the {name}.", "Point out the {name}.")
    texts = {compose(rng, forms, {"{v}": ("Show", "Point out"), "{name}": "mug"}, clauses, "the mug")
             for _ in range(50)}
    assert texts == {"Show the mug."}
    with pytest.raises(RuntimeError, match="avoids the held-out clauses"):
        compose(rng, ("Point out the {name}.",), {"{name}": "mug"}, clauses, "the mug")


def test_probe_instance_misses_lists_each_target_under_the_threshold_with_its_nearest_other(
        world, capsys, monkeypatch):
    """
    training/tiny/research/probe_instance_misses.py, as run from the repository with the shipped model.

    Under an IoU of 1.01 every target of the questions asked is listed, once, with the other target of
    its question its mask overlaps most (none for a question of one target).
    """
    from training.config import DataSourceConfig
    from training.sources import open_source

    questions = open_source(DataSourceConfig(kind="synthetic", path=str(world / "MMR_test_part_only.json"),
                                             image_root=str(world / "images"))).items[:3]
    args = ["--data", str(world / "MMR_test_part_only.json"), "--image-root", str(world / "images"),
            "--questions", "3", "--below", "1.01"]
    code, out, err = _research_script("probe_instance_misses.py", "--model", "models/m2sa-tiny-synth", *args,
                                      capsys=capsys, monkeypatch=monkeypatch)
    assert code == 0, err
    rows = [line.split(" | ") for line in out if line.startswith("| ") and not line.startswith("| question")]
    expected = [(q.question, len(q.targets)) for q in questions for _ in q.targets]
    assert len(rows) == len(expected)
    for (question, n_targets), row in zip(expected, rows):
        assert row[0][2:] == question and 0.0 <= float(row[2]) <= 1.0
        assert (row[3] == "no other target |") == (n_targets == 1)
    assert out[0].endswith(f"{len(expected)} of {len(expected)} targets under IoU 1.01 with the answer given")

    code, _, err = _research_script("probe_instance_misses.py", "--model", "no/such/model", *args,
                                    capsys=capsys, monkeypatch=monkeypatch)
    assert code == 2
    assert err.strip().splitlines()[-1] == "probe_instance_misses: no/such/model does not exist"

    broken = world.parent / "no_usable_questions.json"
    broken.write_text('[{"file_name": "000000.png", "height": 8, "width": 8, "questions": ["q"], "answers": []}]')
    code, _, err = _research_script("probe_instance_misses.py", "--model", "models/m2sa-tiny-synth", *args,
                                    "--data", str(broken), capsys=capsys, monkeypatch=monkeypatch)
    assert code == 2 and "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith(
        f"probe_instance_misses: data source synthetic: no usable samples in {broken}")
    code, _, err = _research_script("probe_instance_misses.py", "--model", "models/m2sa-tiny-synth", *args,
                                    "--family", "object", capsys=capsys, monkeypatch=monkeypatch)
    assert code == 2 and "Traceback" not in err
    assert "is of the families ['object']" in err.strip().splitlines()[-1]
