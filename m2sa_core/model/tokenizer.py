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
Tokenizers: training one offline for the tiny preset, and adding M2SA's tokens.

The tiny model cannot use the LLaVA tokenizer (no downloads), so it gets a small
byte-level BPE trained on the project's own text. Byte-level means any command a user
types can be encoded (no unknown characters) and decoding reproduces the text exactly,
which the answer parser relies on. Special tokens mirror Llama's: ``<unk>`` 0, ``<s>``
1, ``</s>`` 2 (plus ``<pad>`` 3 because our collate right-pads).
"""

from __future__ import annotations

from collections.abc import Iterable

from m2sa_core.model.llama_tokenizer import is_llama_tokenizer
from m2sa_core.prompt import (
    build_conversation,
    IM_END_TOKEN,
    IM_START_TOKEN,
    ROLES,
    SEG_TOKEN,
    SYSTEM,
)
from tokenizers import decoders, models, pre_tokenizers, Regex, Tokenizer, trainers
from transformers import AddedToken, PreTrainedTokenizerBase, PreTrainedTokenizerFast

BASE_SPECIAL_TOKENS = ("<unk>", "<s>", "</s>", "<pad>")

# English inflection endings, cut off a word before BPE sees it, so that the forms of one verb
# or noun share their stem token: "sizzling" -> "sizzl" + "ing" and "sizzle" -> "sizzl" + "e",
# "chopping" -> "chop" + "ping" and "chop", "seals" -> "seal" + "s". A BPE that learns every
# training word whole gives "sizzling" one token and spells an unseen "sizzle" in pieces that
# no training text uses: most words of held-out questions that no training text has are other
# forms of a training word, and the model should meet their stem. Alternatives are tried leftmost
# first, so a doubled consonant's ending wins over the plain one. A stem keeps at least three
# letters ("thing", "was" stay whole), and no "-s" is cut after s, i or u ("glass", "this",
# "thus"); "-e" needs four letters and a consonant before it ("the", "use" stay whole).
# Cutting is only a split: the pieces decode to the text exactly.
_DOUBLED = "|".join(f"(?<={c}){c}(?:ing|ed)" for c in "bdgmnprt")
INFLECTION_PATTERN = (rf"(?<=[a-z]{{2}})(?:{_DOUBLED})(?![a-z])"
                      r"|(?<=[a-z]{3})(?:ing|ed|es)(?![a-z])"
                      r"|(?<=[a-z]{2}[^\Wsiu])s(?![a-z])"
                      r"|(?<=[a-z]{3}[b-df-hj-np-tv-z])e(?![a-z])")


def train_tokenizer(texts: Iterable[str], vocab_size: int = 1024,
                    split_inflections: bool = False) -> PreTrainedTokenizerFast:
    """
    Train a byte-level BPE tokenizer on ``texts`` (no [SEG] yet: see :func:`add_special_tokens`).

    :param texts: training corpus, e.g. prompts and answers of the synthetic world.
    :param vocab_size: upper bound of the base vocabulary (the 256 byte symbols and the
        four special tokens included).
    :param split_inflections: cut inflection endings off before BPE (:data:`INFLECTION_PATTERN`),
        so a held-out form of a training word starts with that word's stem token.
    """
    if vocab_size < 300:
        raise ValueError(f"vocab_size {vocab_size} too small for a byte-level BPE (need >= 300)")
    tok = Tokenizer(models.BPE())
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.pre_tokenizer = (pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(INFLECTION_PATTERN), "isolated"),
                                                  byte_level])
                         if split_inflections else byte_level)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(BASE_SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    corpus = [t for t in texts if t]
    if not corpus:
        raise ValueError("train_tokenizer: the corpus is empty")
    tok.train_from_iterator(corpus, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        clean_up_tokenization_spaces=False,
    )


def _as_added(tokenizer: PreTrainedTokenizerBase, tokens: list[str], special: bool) -> list:
    """
    Plain strings, or for a Llama tokenizer the authors' strip-both-sides added tokens.

    The authors' stack (transformers 4.31, slow ``LlamaTokenizer``) strips whitespace on
    both sides of [SEG], ``<im_start>`` and ``<im_end>``; see
    :mod:`m2sa_core.model.llama_tokenizer`. The tiny byte-level tokenizer keeps plain
    tokens, as it was trained.
    """
    if not is_llama_tokenizer(tokenizer):
        return list(tokens)
    return [AddedToken(t, lstrip=True, rstrip=True, normalized=False, special=special) for t in tokens]


def add_special_tokens(tokenizer: PreTrainedTokenizerBase, use_im_start_end: bool) -> dict[str, int | None]:
    """
    Append [SEG] (then <im_start>/<im_end> when used), in the authors' order.

    [SEG] gets id = base vocabulary size (32000 for Llama), which an authors'
    checkpoint depends on. Idempotent: tokens already present keep their ids.
    Returns the ids, ready for :class:`M2SAConfig`.
    """
    vocab = tokenizer.get_vocab()
    if SEG_TOKEN not in vocab:
        tokenizer.add_tokens(_as_added(tokenizer, [SEG_TOKEN], False), special_tokens=False)
    if use_im_start_end:
        missing = [t for t in (IM_START_TOKEN, IM_END_TOKEN) if t not in tokenizer.get_vocab()]
        if missing:
            tokenizer.add_tokens(_as_added(tokenizer, missing, True), special_tokens=True)
    if tokenizer.pad_token is None:
        # Llama has no pad token; LLaVA pads with <unk>.
        tokenizer.pad_token = tokenizer.unk_token
    ids = {
        "seg_token_id": tokenizer.convert_tokens_to_ids(SEG_TOKEN),
        "im_start_token_id": tokenizer.convert_tokens_to_ids(IM_START_TOKEN) if use_im_start_end else None,
        "im_end_token_id": tokenizer.convert_tokens_to_ids(IM_END_TOKEN) if use_im_start_end else None,
    }
    return ids


# -- the built-in corpus of the tiny preset ------------------------------------------------
# PACO-style categories and parts of the synthetic world (m2sa_core.data.synthetic), used only to
# give `Segmenter.from_pretrained("tiny")` a sensible tokenizer for tests and benchmarks.
_OBJECTS = {
    "television_set": ["screen", "button"],
    "remote_control": ["button", "body"],
    "mug": ["handle", "body"],
    "bottle": ["cap", "body", "label"],
    "knife": ["blade", "handle"],
    "laptop_computer": ["screen", "keyboard", "touchpad"],
    "mouse_(computer_equipment)": ["left_button", "right_button", "wheel"],
    "cup": ["handle", "body"],
    "scissors": ["blade", "handle"],
    "book": ["cover", "page"],
}
_QUESTIONS = [
    "I want to turn on the TV. What should I press?",
    "What would you press to turn the TV on?",
    "Which part of the {o} can I hold?",
    "Where can I pour water from?",
    "Please segment the {o}.",
    "What can I use to cut the bread?",
    "Show me the {p} of the {o}.",
    "Which objects can hold a drink?",
    "What should I use to type a message?",
    "Can you find something to open the {o} with?",
]


def builtin_corpus() -> list[str]:
    """Prompts and answers covering the template, the categories and typical commands."""
    texts = [SYSTEM, f"{ROLES[0]}: ", f"{ROLES[1]}: "]
    names = list(_OBJECTS.items())
    for i, (obj, parts) in enumerate(names):
        other, other_parts = names[(i + 1) % len(names)]
        for j, part in enumerate(parts):
            inst = j + 1
            for q in _QUESTIONS:
                question = q.format(o=obj.replace("_", " "), p=part.replace("_", " "))
                answers = [
                    f"It is {obj}_{inst} {SEG_TOKEN}.",
                    f"You can use the {obj}_{inst}'s {part} {SEG_TOKEN}.",
                    f"You can press the {obj}_{inst}'s {part} {SEG_TOKEN} or the "
                    f"{other}_{inst + 1}'s {other_parts[0]} {SEG_TOKEN}.",
                    f"The {obj}_{inst}'s {part} {SEG_TOKEN} and its {parts[-1]} {SEG_TOKEN}.",
                    f"Sure, it is {obj}_{inst} {SEG_TOKEN} and {other}_{inst} {SEG_TOKEN}.",
                ]
                for answer in answers:
                    prompt, ans = build_conversation(question, answer)
                    texts.append(prompt + ans)
    return texts


def build_tiny_tokenizer(vocab_size: int = 1024, use_im_start_end: bool = False) -> PreTrainedTokenizerFast:
    """Return the tokenizer `from_pretrained("tiny")` uses: trained on :func:`builtin_corpus`."""
    tok = train_tokenizer(builtin_corpus(), vocab_size=vocab_size)
    add_special_tokens(tok, use_im_start_end)
    return tok
