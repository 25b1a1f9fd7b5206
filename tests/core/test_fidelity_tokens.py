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
Token ids identical to the authors' stack (transformers 4.31, slow LlamaTokenizer).

The fixtures in tests/core/golden/ were written by scripts/golden/make_fixtures.py, which runs
the authors' own tokenizer preparation, conversation template, ``tokenizer_image_token``
and ``collate_fn`` in a side environment on a small sentencepiece Llama-style tokenizer.
The tokenizer directory holds only what the authors' merge script writes:
tokenizer.model, tokenizer_config.json, special_tokens_map.json, added_tokens.json.
"""

from __future__ import annotations

import json
from pathlib import Path

from m2sa_core.data.cli import main as data_main
from m2sa_core.inference.answer import parse_targets
from m2sa_core.model.config import AUTHORS_SEG_REQUEST
from m2sa_core.model.llama_tokenizer import load_tokenizer, save_tokenizer
from m2sa_core.prompt import build_prompt, tokenize_dialogue, tokenize_prompt
import pytest

GOLDEN = Path(__file__).parent / "golden"
TOKENIZER_DIR = GOLDEN / "llama_tokenizer"
FIXTURE = json.loads((GOLDEN / "tokens.json").read_text())
TRAIN_CASES = [c for c in FIXTURE["cases"] if c["kind"] == "train"]
PROMPT_CASES = [c for c in FIXTURE["cases"] if c["kind"] == "prompt"]


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer(TOKENIZER_DIR)


def test_the_fixture_tokenizer_ships_only_the_authors_files():
    assert sorted(p.name for p in TOKENIZER_DIR.iterdir()) == [
        "added_tokens.json", "special_tokens_map.json", "tokenizer.model", "tokenizer_config.json"]


def test_special_token_ids_match_the_authors(tokenizer):
    ids = FIXTURE["special_ids"]
    assert tokenizer.convert_tokens_to_ids("[SEG]") == ids["seg"]
    assert tokenizer.convert_tokens_to_ids("<im_start>") == ids["im_start"]
    assert tokenizer.convert_tokens_to_ids("<im_end>") == ids["im_end"]
    assert (tokenizer.bos_token_id, tokenizer.eos_token_id) == (ids["bos"], ids["eos"])
    assert len(tokenizer) == ids["length"]


@pytest.mark.parametrize("case", TRAIN_CASES, ids=[c["name"] for c in TRAIN_CASES])
def test_training_conversations_give_the_authors_ids_and_labels(tokenizer, case):
    turns = [tuple(t) for t in case["turns"]]
    ids, labels = tokenize_dialogue(tokenizer, turns, use_im_start_end=True)
    assert ids == case["input_ids"], _first_difference(tokenizer, ids, case)
    assert labels == case["labels"]


@pytest.mark.parametrize("case", PROMPT_CASES, ids=[c["name"] for c in PROMPT_CASES])
def test_inference_prompt_with_the_segmentation_request_gives_the_authors_ids(tokenizer, case):
    question = case["question"]
    assert question.endswith(" " + AUTHORS_SEG_REQUEST)
    command = question[: -len(AUTHORS_SEG_REQUEST)].strip()
    ids = tokenize_prompt(tokenizer, build_prompt(command, True, AUTHORS_SEG_REQUEST))
    assert ids == case["input_ids"], _first_difference(tokenizer, ids, case)


def test_seg_follows_the_target_word_without_a_space_token(tokenizer):
    """The projection phi reads the state of the token before [SEG]: it must be the target's last piece, not "▁"."""
    case = next(c for c in TRAIN_CASES if c["name"] == "several_seg_train")
    ids, _ = tokenize_dialogue(tokenizer, [tuple(t) for t in case["turns"]], use_im_start_end=True)
    seg = tokenizer.convert_tokens_to_ids("[SEG]")
    before = [tokenizer.convert_ids_to_tokens(ids[i - 1]) for i, t in enumerate(ids) if t == seg]
    assert before == ["button", "button", "ad"]


def test_saved_and_reloaded_tokenizer_keeps_the_ids(tokenizer, tmp_path):
    save_tokenizer(tokenizer, tmp_path)
    again = load_tokenizer(tmp_path)
    for case in TRAIN_CASES:
        turns = [tuple(t) for t in case["turns"]]
        assert tokenize_dialogue(again, turns, True)[0] == case["input_ids"]


def test_generated_answer_decodes_to_labelled_targets(tokenizer):
    case = next(c for c in TRAIN_CASES if c["name"] == "several_seg_train")
    answer_ids = [i for i, lab in zip(case["input_ids"], case["labels"]) if lab != -100][:-1]  # drop </s>
    text = tokenizer.decode(answer_ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)
    assert [t.label for t in parse_targets(text)] == [
        "mouse_(computer_equipment)_1's left_button", "mouse_(computer_equipment)_1's right_button",
        "laptop_computer_2's touchpad"]


def test_m2sa_data_tokens_prints_the_authors_conversation(capsys):
    case = next(c for c in TRAIN_CASES if c["name"] == "bare_question_tokens_cli")
    (question, answer), = case["turns"]
    assert data_main(["tokens", "--tokenizer", str(TOKENIZER_DIR), "--question", question, "--answer", answer]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ids"] == case["input_ids"]
    assert out["pieces"] == case["pieces"]
    assert out["ids"].count(-200) == 1 and "<image>" in out["pieces"]


def test_m2sa_data_tokens_reports_a_missing_tokenizer_in_one_line(tmp_path, capsys):
    assert data_main(["tokens", "--tokenizer", str(tmp_path / "nope"), "--question", "q", "--answer", "a"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("m2sa-data: error:") and "\n" not in err


def _first_difference(tokenizer, ids: list[int], case: dict) -> str:
    ours = ["<image>" if i == -200 else tokenizer.convert_ids_to_tokens(i) for i in ids]
    for k, (a, b) in enumerate(zip(ours, case["pieces"])):
        if a != b:
            return f"first difference at {k}: ours {ours[k - 3:k + 3]} authors {case['pieces'][k - 3:k + 3]}"
    return f"lengths differ: ours {len(ours)} authors {len(case['pieces'])}"
