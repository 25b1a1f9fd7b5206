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
The tokenizer option that cuts inflection endings.

A held-out form of a training word must start with that word's stem token, and
nothing may change in what decodes.
"""

from __future__ import annotations

from pathlib import Path

from m2sa_core.data.patch_words import background_word, label_words
from m2sa_core.model.checkpoint import load_tokenizer
from m2sa_core.model.tokenizer import add_special_tokens, train_tokenizer
from m2sa_core.shipped_model import SHIPPED_MODEL
import pytest
from training.config import load_config

ROOT = Path(__file__).resolve().parents[2]
STAGE_1, STAGE_3 = ROOT / "training/tiny/1_sam.yaml", ROOT / "training/tiny/3_m2sa.yaml"

# The world's uses come as gerunds; held-out questions ask with the verb (RUNS.md, run 45).
CORPUS = ["the pan_(for_cooking)_1's bottom is for sizzling onions",
          "the laptop_computer_1's touchpad is for swiping and scrolling",
          "the bottle_1's cap is for sealing, the knife_2's handle for chopping",
          "the mug_1 and the mug_2 are on the table; I am sitting and serving tea"] * 30
HELD_OUT = {"sizzle": "sizzling", "swipe": "swiping", "seals": "sealing", "chop": "chopping",
            "sits": "sitting", "serve": "serving"}


def _first_token(tokenizer, word: str) -> str:
    return tokenizer.convert_ids_to_tokens(tokenizer(" " + word, add_special_tokens=False)["input_ids"])[0]


@pytest.fixture(scope="module")
def cut():
    tokenizer = train_tokenizer(CORPUS, vocab_size=600, split_inflections=True)
    add_special_tokens(tokenizer, False)
    return tokenizer


@pytest.fixture(scope="module")
def plain():
    """Return the default, whole-word tokenizer of the same corpus."""
    return train_tokenizer(CORPUS, vocab_size=600)


def test_a_held_out_form_starts_with_the_training_words_stem(cut, plain):
    for held, seen in HELD_OUT.items():
        stem = _first_token(cut, seen)
        assert _first_token(cut, held) == stem, (held, seen)
        assert len(stem) >= 4, stem  # "Ġ" and at least three letters: a stem, not a letter
        # whole-word BPE (the default) learns the training form as one token and spells the held-out
        # one in other pieces: what the option is for
        assert _first_token(plain, held) != _first_token(plain, seen), held


@pytest.mark.parametrize("text", [
    "Where do the onions sizzle in the pan? The pan_(for_cooking)_2's bottom. [SEG]",
    "this glass was used; it's the remote_control_1's button, isn't it?  Tabs\tand UPPER Sizzling",
    "naïve café — 12 mugs, ünïcödé and emoji 🍳",
])
def test_cutting_changes_no_text(cut, text):
    ids = cut(text, add_special_tokens=False)["input_ids"]
    assert cut.decode(ids) == text


def _words(tokenizer, text: str) -> list[str]:
    """Return the pieces BPE sees: what the pre-tokenizer cut the text into."""
    return [piece for piece, _ in tokenizer.backend_tokenizer.pre_tokenizer.pre_tokenize_str(text)]


def test_only_endings_after_a_stem_are_cut(cut, plain):
    for word in ("the", "this", "thus", "was", "its", "thing", "glass", "use", "mug_2's"):
        assert _words(cut, " " + word) == _words(plain, " " + word), word
    assert _words(cut, " chopping chop") == ["Ġchop", "ping", "Ġchop"]
    assert _words(cut, " slices slice") == ["Ġslic", "es", "Ġslic", "e"]
    assert _words(cut, " pushed turns") == ["Ġpush", "ed", "Ġturn", "s"]


def test_saved_tokenizer_keeps_cutting(cut, tmp_path):
    cut.save_pretrained(tmp_path)
    loaded = load_tokenizer(tmp_path)
    text = "Where would I swipe to scroll on the laptop_computer_1?"
    assert loaded(text, add_special_tokens=False)["input_ids"] == cut(text, add_special_tokens=False)["input_ids"]
    assert _first_token(loaded, "swipe") == _first_token(loaded, "swiping")


def test_patch_words_take_the_stem_as_the_category_and_table_word(cut):
    # " table" is " tabl" + "e" here: the table's word is its stem, as a category's word is
    assert cut.decode([background_word(cut)]) == " tabl"
    category, instance = label_words(cut, "bottle_1")
    assert cut.decode([category]) == " bottl" and cut.decode([instance]) == "1"


def test_a_tokenizer_that_spells_the_table_in_letters_is_refused():
    letters = train_tokenizer(["t a b l e"] * 5, vocab_size=300)
    with pytest.raises(ValueError, match="background word ' table'"):
        background_word(letters)


def test_the_stage_that_trains_the_tokenizer_cuts_inflections_and_later_stages_keep_it():
    """
    Stage 1 trains the shipped tokenizer with the option.

    Stage 3 loads it from stage 2's checkpoint, where setting the option again is refused
    (the test below).
    """
    assert load_config(STAGE_1).model.tokenizer_split_inflections is True
    assert load_config(STAGE_3).model.tokenizer_split_inflections is False
    switched_off = load_config(STAGE_1, ["model.tokenizer_split_inflections=false"])
    assert switched_off.model.tokenizer_split_inflections is False


def test_the_option_is_refused_where_the_tokenizer_comes_from_a_checkpoint(tmp_path):
    from training.model_setup import build_training_model

    config = load_config(STAGE_3, [f"model.init_from={tmp_path}", "model.tokenizer_split_inflections=true"])
    with pytest.raises(ValueError, match="brings its own"):
        build_training_model(config, [], device=None)


def test_the_shipped_model_reads_a_held_out_form_by_its_training_stem():
    """
    The shipped tokenizer was trained with the option.

    A verb the training world only says as a gerund ("sizzling") reaches the model as
    the same stem.
    """
    shipped = load_tokenizer(SHIPPED_MODEL)
    assert _first_token(shipped, "sizzle") == _first_token(shipped, "sizzling")
    text = "How do I power up the TV? The television_set_1's button [SEG]."
    assert shipped.decode(shipped(text, add_special_tokens=False)["input_ids"]) == text
