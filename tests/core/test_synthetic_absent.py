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
Commands about what the scene does not hold (family ``absent``).

Every split holds them, each kind really is absent from its scene, the answer reads back
the words the record says are missing, the held-out phrasings stay out of train, and a
world's present questions are those of a world without them.
"""

from __future__ import annotations

import colorsys
import hashlib
import json
from pathlib import Path
import re

import cv2
from m2sa_core.data.mmr import read_mmr
from m2sa_core.data.rle import decode_rle
from m2sa_core.data.synthetic import main, text_corpus
from m2sa_core.data.synthetic.absent import (
    AbsentAsker,
    FORMS,
    INSTANCE_PHRASINGS,
    KINDS,
    ORDINALS,
    PART_PHRASINGS,
    PRESENT_HELD_OUT_CLAUSES,
    PROPERTY_PHRASINGS,
)
from m2sa_core.data.synthetic.questions import MIXED_PHRASINGS, OBJECT_FUNCTIONS, PART_FUNCTIONS
from m2sa_core.data.synthetic.scene import render_scene
from m2sa_core.data.synthetic.shapes import CATEGORIES
from m2sa_core.data.synthetic.world import generate_dataset, MMR_FILES
from m2sa_core.inference.absence import absence_of, ABSENT_ANSWERS
from m2sa_core.labels import parse_label_before
from m2sa_core.prompt import SEG_TOKEN
import numpy as np
import pytest

N_IMAGES, SEED, SIZE = 60, 3, 128  # 48 train, 6 val and 6 test images
PARALLEL = ("questions", "answers", "text_answers", "raw_answers", "mask_types", "question_families")
CATEGORY_OF_NAME = {name: c for c, spec in CATEGORIES.items() for name in spec.spoken}


@pytest.fixture(scope="module")
def worlds(tmp_path_factory) -> tuple[Path, Path]:
    """Return the same world with absent commands (the default) and without."""
    root = tmp_path_factory.mktemp("absent")
    generate_dataset(root / "on", N_IMAGES, seed=SEED, size=SIZE)
    generate_dataset(root / "off", N_IMAGES, seed=SEED, size=SIZE, absent_per_image=0)
    return root / "on", root / "off"


def load(world: Path, split: str) -> list[dict]:
    return json.loads((world / f"MMR_{split}.json").read_text())


def absent_rows(entries: list[dict]):
    """(question, text answer, missing) of every absent question, checking its other fields on the way."""
    for e in entries:
        for k, missing in enumerate(e.get("missing", [None] * len(e["questions"]))):
            if missing is None:
                assert e["question_families"][k] != "absent"
                continue
            assert e["question_families"][k] == "absent" and e["mask_types"][k] == "modal"
            assert e["answers"][k] == [] and e["raw_answers"][k] == e["text_answers"][k]
            assert "{seg}" not in e["text_answers"][k]
            yield e["questions"][k], e["text_answers"][k], missing


def _pattern(template: str) -> re.Pattern[str]:
    text = re.escape(template)
    for slot in ("name", "part", "ordinal", "colour", "action"):
        text = text.replace(re.escape("{" + slot + "}"), ".+")
    return re.compile(text)


def _phrasings(held_out: bool) -> list[re.Pattern[str]]:
    """Every absent phrasing of one side (train or held out), as patterns."""
    sets = [fn.phrasings for fn in OBJECT_FUNCTIONS + PART_FUNCTIONS]
    sets += [MIXED_PHRASINGS, PART_PHRASINGS, INSTANCE_PHRASINGS, PROPERTY_PHRASINGS]
    chosen = [s[-1] for s in sets] if held_out else [p for s in sets for p in s[:-1]]
    return [_pattern(p[0].upper() + p[1:]) for p in chosen]


def test_every_split_holds_every_kind_its_files_take(worlds):
    """Train and val hold all four kinds, obj_only the object-level ones, part_only parts, mixed categories."""
    on, _ = worlds
    expected = {"train": set(KINDS), "val": set(KINDS), "test_obj_only": {"category", "instance", "property"},
                "test_part_only": {"part"}, "test_mixed": {"category"}}
    for split in MMR_FILES:
        kinds = [m["kind"] for _, _, m in absent_rows(load(on, split))]
        assert set(kinds) == expected[split], split
        if split == "train":  # rounds of every kind: enough for a rate of their own in a mixture
            assert len(kinds) >= 4 * sum(1 for _ in load(on, split))
        else:  # one per image and file
            assert len(kinds) == len({e["image_id"] for e in load(on, split)}), split


def test_held_out_phrasings_and_answer_stay_out_of_train(worlds):
    """Train uses the train phrasings and first three answers only; val and test only the held-out ones."""
    on, _ = worlds
    train_side, held_out_side = _phrasings(False), _phrasings(True)
    for split in MMR_FILES:
        rows = list(absent_rows(load(on, split)))
        assert rows
        for question, answer, missing in rows:
            in_train = any(p.fullmatch(question) for p in train_side)
            in_held_out = any(p.fullmatch(question) for p in held_out_side)
            sentence = next(i for i, t in enumerate(ABSENT_ANSWERS) if answer == t.format(missing=missing["words"]))
            if split == "train":
                assert in_train and not in_held_out and sentence < len(ABSENT_ANSWERS) - 1, question
            else:
                assert in_held_out and not in_train and sentence == len(ABSENT_ANSWERS) - 1, question


def test_absent_train_phrasings_carry_no_present_held_out_clause():
    assert "point out the" in PRESENT_HELD_OUT_CLAUSES  # the held-out mixed phrasing's
    for phrasings in (PART_PHRASINGS, INSTANCE_PHRASINGS, PROPERTY_PHRASINGS):
        for phrasing in phrasings[:-1]:
            assert not any(c in phrasing.lower() for c in PRESENT_HELD_OUT_CLAUSES), phrasing


def _hsv(pixels: np.ndarray) -> np.ndarray:
    """Hue in degrees, saturation and value in 0-1, by the standard library (not OpenCV, as the generator)."""
    return np.array([colorsys.rgb_to_hsv(*(p / 255.0)) for p in pixels]) * [360.0, 1.0, 1.0]


def _of_colour(hsv: np.ndarray, colour: str) -> np.ndarray:
    hue, sat, val = hsv[:, 0], hsv[:, 1], hsv[:, 2]
    centres = {"red": 0, "orange": 30, "yellow": 60, "green": 120, "blue": 225, "purple": 285}
    if colour == "white":
        return (sat < 0.15) & (val > 0.75)
    if colour == "black":
        return val < 0.25
    return (sat > 0.45) & (val > 0.35) & (np.abs((hue - centres[colour] + 180) % 360 - 180) < 25)


def check_absent(scene, kind: str, words: str) -> None:
    """Fail unless what ``words`` names (of ``kind``) is really not in ``scene``."""
    if kind == "category":
        assert CATEGORY_OF_NAME[words] not in scene.categories(), words
    elif kind == "part":
        parsed = parse_label_before(words)
        assert parsed is not None and parsed.part_name, words
        assert parsed.instance in [o.instance for o in scene.instances(parsed.object_name)], words
        assert parsed.part_name not in CATEGORIES[parsed.object_name].parts
        assert parsed.part_name not in ("body", "bottom", "base"), words  # every thing has them
    elif kind == "instance":
        ordinal, name = words.split(" ", 1)
        assert ORDINALS.index(ordinal) + 1 > len(scene.instances(CATEGORY_OF_NAME[name])), words
    else:
        colour, name = words.split(" ", 1)
        instances = scene.instances(CATEGORY_OF_NAME[name])
        assert instances, words
        for obj in instances:
            share = _of_colour(_hsv(scene.image[obj.visible][::3].astype(float)), colour).mean()
            assert share < 0.02, (words, share)


def test_the_absent_thing_is_really_absent_over_many_scenes():
    """Every kind and form, train and held-out wording, over 120 scenes: the scene never holds what is asked."""
    asked = dict.fromkeys(KINDS, 0)
    for seed in range(120):
        rng = np.random.default_rng(seed)
        scene = render_scene(rng, SIZE)
        asker = AbsentAsker(scene, rng, held_out=bool(seed % 2))
        for kind in KINDS:
            for form in (FORMS if kind == "category" else ("",)):
                q = asker.ask(kind, form)
                if q is None:
                    continue
                assert q.family == "absent" and q.targets == [] and q.missing["kind"] == kind
                check_absent(scene, kind, q.missing["words"])
                assert absence_of(q.answer).missing == q.missing["words"]
                asked[kind] += 1
    assert min(asked.values()) > 60, asked


def test_a_scene_that_rules_a_kind_out_gives_none():
    """Every category in view leaves none to ask for, six mugs no ordinal beyond them."""
    from m2sa_core.data.synthetic.scene import Scene, SceneObject

    mask = np.ones((4, 4), bool)
    rng = np.random.default_rng(0)
    every = Scene(np.zeros((4, 4, 3), np.uint8), [SceneObject(c, 1, mask, mask, {}, {}) for c in CATEGORIES])
    assert AbsentAsker(every, rng, held_out=False).category("object") is None
    mugs = Scene(np.zeros((4, 4, 3), np.uint8), [SceneObject("mug", k, mask, mask, {}, {}) for k in range(1, 7)])
    assert AbsentAsker(mugs, rng, held_out=False).instance() is None


def test_answers_read_back_the_missing_words_and_present_answers_name_targets(worlds):
    on, _ = worlds
    absent = 0
    for split in MMR_FILES:
        for record in read_mmr(on / f"MMR_{split}.json", on / "images", strict=True):
            if "missing" in record.meta:
                assert record.targets == [] and record.meta["family"] == "absent"
                assert absence_of(record.answer_template).missing == record.meta["missing"]["words"]
                absent += 1
            else:
                assert record.targets and absence_of(record.answer_template.replace("{seg}", SEG_TOKEN)) is None
    assert absent > 100


def _without_absent(entries: list[dict]) -> list[dict]:
    out = []
    for e in entries:
        e = dict(e)
        missing = e.pop("missing", None)
        if missing is not None:
            keep = [k for k, m in enumerate(missing) if m is None]
            for key in PARALLEL:
                e[key] = [e[key][k] for k in keep]
        if e["questions"]:
            out.append(e)
    return out


def test_present_questions_are_those_of_a_world_without_absent_ones(worlds):
    """Images and every other file byte for byte; the MMR files less their absent questions, entry for entry."""
    on, off = worlds

    def digests(world: Path) -> dict[str, str]:
        return {p.relative_to(world).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
                for p in sorted(world.rglob("*")) if p.is_file() and not p.name.startswith("MMR_")}

    with_twins = digests(on)
    assert with_twins.pop("absent_twins_train.json") and "absent_twins_train.json" not in digests(off)
    assert with_twins == digests(off)
    for split in MMR_FILES:
        assert not any("missing" in e for e in load(off, split))
        with_absent = load(on, split)
        assert with_absent != load(off, split)
        assert _without_absent(with_absent) == load(off, split), split


def test_reader_round_trip_keeps_present_records_and_reads_absent_ones(worlds):
    on, off = worlds
    for split in MMR_FILES:
        entries = load(on, split)
        records = read_mmr(on / f"MMR_{split}.json", on / "images", strict=True)
        assert len(records) == sum(len(e["questions"]) for e in entries)
        missing = [m for e in entries for m in e.get("missing", [None] * len(e["questions"]))]
        assert [r.meta.get("missing") for r in records] == missing
        present = [r for r in records if "missing" not in r.meta]
        before = read_mmr(off / f"MMR_{split}.json", off / "images", strict=True)

        def key(r):
            return (r.image_id, r.question, r.answer_template, r.mask_type, r.meta,
                    r.targets)

        assert [key(r) for r in present] == [key(r) for r in before]


def test_cli_flag_sets_how_many_and_zero_writes_none(tmp_path, capsys):
    common = ["--images", "10", "--seed", "1", "--size", "128", "--workers", "1", "--quiet"]
    assert main(["--out", str(tmp_path / "one"), *common]) == 0
    assert main(["--out", str(tmp_path / "none"), *common, "--absent-per-image", "0"]) == 0
    for split in MMR_FILES:
        assert any("missing" in e for e in load(tmp_path / "one", split)), split
        assert not any("missing" in e for e in load(tmp_path / "none", split)), split
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["--out", str(tmp_path / "bad"), "--images", "4", "--absent-per-image", "-1"])
    assert "absent_per_image must be 0 or more" in capsys.readouterr().err


def test_text_corpus_holds_every_absent_phrasing_and_answer(worlds):
    on, _ = worlds
    corpus = set(text_corpus())
    for split in MMR_FILES:
        for question, answer, _ in absent_rows(load(on, split)):
            assert answer in corpus and question in corpus, (question, answer)
    for entry in json.loads((on / "absent_twins_train.json").read_text()):
        assert set(entry["questions"]) <= corpus


def test_absent_twins_ask_the_train_phrasings_about_what_is_there(worlds):
    """
    The part, instance and property phrasings asked of train images about things they hold, with their masks.

    An ordinal names the instance at that place from the left, a colour the instances that
    show it while the others show none of it, a part one of the named object's own; no
    held-out phrasing.
    """
    on, _ = worlds
    masks = {e["image_id"]: {a["label"]: a for a in e["annotations"]}
             for e in json.loads((on / "masks_train.json").read_text())["images"]}
    train_ids = {e["image_id"] for e in load(on, "train")}
    held_out = [_pattern(p) for p in (PART_PHRASINGS[-1], INSTANCE_PHRASINGS[-1], PROPERTY_PHRASINGS[-1])]
    entries = json.loads((on / "absent_twins_train.json").read_text())
    assert entries and {e["image_id"] for e in entries} <= train_ids
    kinds = set()
    for entry in entries:
        image = masks[entry["image_id"]]
        pixels = cv2.imread(str(on / "images" / entry["file_name"]))[:, :, ::-1]
        for question, answer, anns, family in zip(entry["questions"], entry["text_answers"], entry["answers"],
                                                  entry["question_families"], strict=True):
            assert not any(p.fullmatch(question) for p in held_out), question
            labels = re.findall(r"the (\S+(?: \S+)?) \{seg\}", answer)
            assert [a["segmentation"] for a in anns] == [image[lab]["segmentation"] for lab in labels]
            kind, slots = _asked(question)
            kinds.add(kind)
            if kind == "instance":
                (label,) = labels
                assert label == f"{image[label]['category_name']}_{ORDINALS.index(slots['ordinal']) + 1}"
                assert CATEGORY_OF_NAME[slots["name"]] == image[label]["category_name"] and family == "object"
            elif kind == "part":
                (label,) = labels
                parsed = parse_label_before(label)
                assert parsed.part_name in CATEGORIES[parsed.object_name].parts and family == "part"
                assert slots["part"] == parsed.part_name.replace("_", " "), question
                ordinal, _, name = slots["name"].partition(" ")
                if ordinal in ORDINALS and name in CATEGORY_OF_NAME:  # one of several, by its place
                    assert parsed.instance == ORDINALS.index(ordinal) + 1
                else:
                    assert len([a for a in image.values() if a["category_name"] == parsed.object_name]) == 1
            else:
                category = CATEGORY_OF_NAME[slots["name"]]
                named = set(labels)
                assert named and family == "object"
                for label, a in image.items():
                    if a["category_name"] != category:
                        continue
                    share = _of_colour(_hsv(pixels[decode_rle(a["segmentation"])][::3].astype(float)),
                                       slots["colour"]).mean()
                    assert (share > 0.25) if label in named else (share < 0.02), (question, label, share)
    assert kinds == {"instance", "part", "property"}


def _asked(question: str) -> tuple[str, dict[str, str]]:
    """Return the absent kind whose train phrasing ``question`` is, and what fills its slots."""
    for kind, phrasings in (("part", PART_PHRASINGS), ("instance", INSTANCE_PHRASINGS),
                            ("property", PROPERTY_PHRASINGS)):
        for phrasing in phrasings[:-1]:
            pattern = re.escape(phrasing)
            for slot in ("name", "part", "ordinal", "colour"):
                pattern = pattern.replace(re.escape("{" + slot + "}"), f"(?P<{slot}>.+?)")
            match = re.fullmatch(pattern, question)
            if match and (kind != "instance" or match["ordinal"] in ORDINALS) \
                    and (kind != "property" or match["name"] in CATEGORY_OF_NAME):
                return kind, match.groupdict()
    raise AssertionError(f"not a train phrasing of the part, instance or property kinds: {question!r}")


def test_a_mask_s_colour_is_measured_as_a_world_object_s():
    """mask_colour_share scores a model's mask by the rule that made a colour absent from the world."""
    from m2sa_core.data.synthetic.absent import ABSENT_SHARE, mask_colour_share

    image = np.zeros((8, 8, 3), np.uint8)
    image[:, :4] = (220, 30, 30)  # saturated red left half
    image[:, 4:] = (250, 250, 250)  # white right half
    left = np.zeros((8, 8), bool)
    left[:, :4] = True
    assert mask_colour_share(image, left, "red") == 1.0
    assert mask_colour_share(image, left, "blue") < ABSENT_SHARE
    assert mask_colour_share(image, ~left, "white") == 1.0
    assert mask_colour_share(image, left | ~left, "red") == 0.5
    assert mask_colour_share(image, np.zeros((8, 8), bool), "red") == 0.0  # an empty mask shows no colour
