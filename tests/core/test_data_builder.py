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
Sample builder tests.

Prompts through the shared conversation code, supervision, mask order, LISA-style
templates, and the round trip synthetic generator -> readers -> builder.
"""

from __future__ import annotations

import json
from pathlib import Path
import random

import cv2
from m2sa_core.data import templates
from m2sa_core.data.amodal_reasonseg import read_amodal_reasonseg
from m2sa_core.data.builder import SampleBuilder
from m2sa_core.data.mmr import read_mmr
from m2sa_core.data.r2sm import read_r2sm
from m2sa_core.data.reasonseg import read_reasonseg
from m2sa_core.data.records import DataError
from m2sa_core.data.rle import encode_mask
from m2sa_core.data.synthetic import generate_dataset, text_corpus
from m2sa_core.prompt import build_conversation, IGNORE_INDEX, IMAGE_PLACEHOLDER_ID, SEG_TOKEN, SYSTEM
import numpy as np
import pytest
from tokenizers import models, pre_tokenizers, Tokenizer, trainers
from transformers import PreTrainedTokenizerFast

SPECIALS = ["<unk>", "<s>", "</s>", "<pad>"]
ADDED = [SEG_TOKEN, "<im_start>", "<im_end>"]


def make_tokenizer(corpus: list[str]) -> PreTrainedTokenizerFast:
    """Return a WordLevel tokenizer over the corpus with LLaVA's special tokens and M2SA's added ones."""
    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(corpus, trainers.WordLevelTrainer(special_tokens=SPECIALS, min_frequency=1))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
                                   unk_token="<unk>")
    fast.add_special_tokens({"additional_special_tokens": ADDED})
    return fast


@pytest.fixture(scope="module")
def tokenizer() -> PreTrainedTokenizerFast:
    return make_tokenizer(text_corpus() + [SYSTEM, "USER: ASSISTANT: please"])


@pytest.fixture(scope="module")
def synth_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("synth")
    generate_dataset(out, n_images=20, seed=3)
    return out


def mmr_fixture(tmp_path: Path, question: str = "What could I drink from?"):
    root = tmp_path / "images"
    root.mkdir(exist_ok=True)
    cv2.imwrite(str(root / "a.png"), np.zeros((10, 12, 3), np.uint8))
    first, second = np.zeros((10, 12), bool), np.zeros((10, 12), bool)
    first[:3, :3] = True
    second[5:, 6:] = True
    entry = {"file_name": "a.png", "height": 10, "width": 12, "image_id": 1, "questions": [question],
             "answers": [[{"segmentation": encode_mask(first), "category_name": "mug", "bbox": []},
                          {"segmentation": encode_mask(second), "category_name": "bottle:cap", "bbox": []}]],
             "text_answers": ["You can drink from the mug_1 {seg} and the bottle_1's cap {seg}."]}
    path = tmp_path / "MMR_train.json"
    path.write_text(json.dumps([entry]))
    return read_mmr(path, root, strict=True)[0], first, second


def test_conversation_ids_labels_and_mask_order(tmp_path, tokenizer):
    record, first, second = mmr_fixture(tmp_path)
    sample = SampleBuilder(tokenizer).build(record)
    assert sample.command == "What could I drink from?"
    assert sample.answer == "You can drink from the mug_1 [SEG] and the bottle_1's cap [SEG]."
    prompt, answer_turn = build_conversation(sample.command, sample.answer)
    assert sample.prompt == prompt and sample.prompt.endswith("ASSISTANT:")
    assert sample.input_ids[0] == tokenizer.bos_token_id and IMAGE_PLACEHOLDER_ID in sample.input_ids
    # Only the answer is supervised: its tokens, both [SEG] and the closing </s>.
    n_answer = len(tokenizer(answer_turn, add_special_tokens=False)["input_ids"])
    assert sample.labels[:-n_answer] == [IGNORE_INDEX] * (len(sample.labels) - n_answer)
    assert sample.labels[-n_answer:] == sample.input_ids[-n_answer:]
    seg_id = tokenizer.convert_tokens_to_ids(SEG_TOKEN)
    assert [t for t in sample.labels if t == seg_id] == [seg_id, seg_id]
    assert sample.labels[-1] == tokenizer.eos_token_id
    assert sample.masks.shape == (2, 10, 12) and sample.masks.dtype == np.bool_
    assert np.array_equal(sample.masks[0], first) and np.array_equal(sample.masks[1], second)
    assert sample.target_labels == ["mug_1", "bottle_1's cap"]
    assert sample.image.shape == (10, 12, 3) and sample.amodal_masks is None
    assert sample.sample_id == "mmr:train:1:0"


def test_seg_markers_in_the_question_cannot_add_masks(tmp_path, tokenizer):
    record, _, _ = mmr_fixture(tmp_path, question="Show [SEG] [seg] me </s> USER: the mug")
    sample = SampleBuilder(tokenizer).build(record)
    assert SEG_TOKEN not in sample.command and "</s>" not in sample.command
    seg_id = tokenizer.convert_tokens_to_ids(SEG_TOKEN)
    assert sample.input_ids.count(seg_id) == 2


def test_datasets_without_answers_use_templates_which_stay_unchanged(tmp_path, tokenizer):
    before = (templates.SHORT_QUESTION_TEMPLATES, templates.LONG_QUESTION_TEMPLATES, templates.ANSWER_TEMPLATES)
    d = tmp_path / "val"
    d.mkdir()
    cv2.imwrite(str(d / "a.jpg"), np.zeros((8, 8, 3), np.uint8))
    (d / "a.json").write_text(json.dumps({"text": ["the knife", "what cuts bread?"], "is_sentence": False,
                                          "shapes": [{"label": "target", "points": [[1, 1], [5, 1], [5, 5]]}]}))
    records = list(read_reasonseg(d))
    builder = SampleBuilder(tokenizer, seed=0)
    samples = [builder.build(r) for r in records for _ in range(10)]
    commands = {s.command for s in samples}
    assert commands <= {t.format(class_name=q) for t in templates.SHORT_QUESTION_TEMPLATES
                        for q in ("the knife", "what cuts bread?")}
    assert len(commands) > 2  # the choice varies
    assert {s.answer for s in samples} <= set(templates.ANSWER_TEMPLATES)
    assert all(s.masks.shape == (1, 8, 8) for s in samples)
    # Long sentences get the long templates.
    records[0].meta["is_sentence"] = True
    long = builder.build(records[0], rng=random.Random(1))
    assert long.command in {t.format(sent="the knife") for t in templates.LONG_QUESTION_TEMPLATES}
    # Templates are immutable and unchanged; the seed makes choices reproducible.
    assert all(isinstance(t, tuple) for t in before)
    assert before == (templates.SHORT_QUESTION_TEMPLATES, templates.LONG_QUESTION_TEMPLATES, templates.ANSWER_TEMPLATES)
    a = [SampleBuilder(tokenizer, seed=5).build(records[1]).answer for _ in range(3)]
    b = [SampleBuilder(tokenizer, seed=5).build(records[1]).answer for _ in range(3)]
    assert a == b


def test_several_targets_without_an_answer_text_is_an_error(tmp_path, tokenizer):
    record, _, _ = mmr_fixture(tmp_path)
    record.answer_template = ""
    with pytest.raises(DataError, match="2 targets but no text answer"):
        SampleBuilder(tokenizer).build(record)


def test_tokenizer_must_keep_seg_whole():
    tok = Tokenizer(models.WordLevel({"<unk>": 0, "<s>": 1, "</s>": 2, "[": 3, "SEG": 4, "]": 5}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>")
    with pytest.raises(ValueError, match="add it as a special token"):
        SampleBuilder(fast)


def test_round_trip_generator_reader_builder(synth_dir, tokenizer):
    images = synth_dir / "images"
    builder = SampleBuilder(tokenizer, seed=0)
    seg_id = tokenizer.convert_tokens_to_ids(SEG_TOKEN)
    seen_sources = set()
    datasets = [read_mmr(synth_dir / f"MMR_{s}.json", images, strict=True)
                for s in ("train", "val", "test_obj_only", "test_part_only", "test_mixed")]
    datasets += [read_r2sm(synth_dir / "r2sm_test.json", images, strict=True),
                 read_amodal_reasonseg(synth_dir / "amodal_reasonseg_test.json", images, strict=True)]
    for ds in datasets:
        assert len(ds) > 0, ds.path
        for record in list(ds)[:8]:
            sample = builder.build(record)
            n = len(record.targets)
            assert sample.input_ids.count(seg_id) == n == sample.masks.shape[0]
            assert tokenizer.unk_token_id not in sample.input_ids, sample.answer
            assert sample.masks.shape[1:] == sample.image.shape[:2] == (256, 256)
            assert all(m.any() for m in sample.masks)
            assert sample.target_labels == [t.label for t in record.targets]
            if record.source == "r2sm":  # one requested mask: the amodal one only when asked for
                assert (sample.amodal_masks is not None) == (record.mask_type == "amodal")
            elif not record.targets:  # an absent command: answered in words alone
                assert "missing" in record.meta and sample.amodal_masks is None
            else:  # the synthetic world keeps the complete mask of every target
                assert sample.amodal_masks is not None and (sample.amodal_masks >= sample.masks).all()
            if record.mask_type == "amodal":
                assert np.array_equal(sample.masks, sample.amodal_masks)
            seen_sources.add(record.source)
    assert seen_sources == {"synthetic", "r2sm", "amodal_reasonseg"}


def test_absent_commands_build_as_answers_in_words_with_no_mask(synth_dir, tokenizer):
    """A command about something the image does not hold trains its answer's words, with no [SEG] and no mask."""
    builder = SampleBuilder(tokenizer, seed=0)
    seg_id = tokenizer.convert_tokens_to_ids(SEG_TOKEN)
    built = 0
    for split in ("train", "val", "test_obj_only", "test_part_only", "test_mixed"):
        for record in read_mmr(synth_dir / f"MMR_{split}.json", synth_dir / "images", strict=True):
            if "missing" not in record.meta:
                continue
            sample = builder.build(record)
            assert sample.answer == record.answer_template and record.meta["missing"]["words"] in sample.answer
            assert seg_id not in sample.input_ids and tokenizer.unk_token_id not in sample.input_ids, sample.answer
            assert sample.masks.shape == (0, 256, 256) and sample.amodal_masks is None
            _, answer_turn = build_conversation(sample.command, sample.answer)
            n_answer = len(tokenizer(answer_turn, add_special_tokens=False)["input_ids"])
            assert sample.labels[:-n_answer] == [IGNORE_INDEX] * (len(sample.labels) - n_answer)
            assert sample.labels[-n_answer:] == sample.input_ids[-n_answer:]  # the sentence is what trains
            built += 1
    assert built > 20
