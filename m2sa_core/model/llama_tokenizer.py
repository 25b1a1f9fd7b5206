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
Loading and saving tokenizers so that Llama checkpoints see the ids they were trained on.

The authors' M2SA checkpoints and LLaVA v1 ship a sentencepiece ``tokenizer.model``
(plus ``tokenizer_config.json``, ``special_tokens_map.json`` and ``added_tokens.json``)
and were trained with transformers 4.31's slow ``LlamaTokenizer`` in its legacy mode.
Two properties of that stack decide the ids, and current transformers loses both
unless told:

* legacy mode: every piece of text between added tokens is encoded on its own, with
  sentencepiece's "▁" prefix (``<im_end> ▁Where``, ``[SEG] ▁and``);
* whitespace around added tokens that are not named special tokens ([SEG],
  ``<im_start>``, ``<im_end>``) is stripped on both sides, so ``logo [SEG]`` is
  ``▁logo [SEG]``, with no ``▁`` token before [SEG] (phi reads the state of the word
  that names the target, not of a space).

:func:`load_tokenizer` restores both for Llama tokenizers; other tokenizers (the tiny
model's byte-level BPE) load untouched. :func:`save_tokenizer` records ``legacy`` in the
saved ``tokenizer_config.json`` because current transformers does not write it.
Golden ids from the authors' stack are checked in ``tests/core/test_fidelity_tokens.py``.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from transformers import AddedToken, AutoTokenizer, PreTrainedTokenizerBase

LLAMA_CLASSES = ("LlamaTokenizer", "LlamaTokenizerFast", "CodeLlamaTokenizer", "CodeLlamaTokenizerFast")
TOKENIZER_CONFIG = "tokenizer_config.json"


class TokenizerLoadError(RuntimeError):
    """A tokenizer directory cannot be read (missing files or packages)."""


def is_llama_tokenizer(tokenizer: PreTrainedTokenizerBase) -> bool:
    """Return True for (sentencepiece-derived) Llama tokenizers, whose added tokens follow the authors' spacing."""
    return type(tokenizer).__name__ in LLAMA_CLASSES


def read_tokenizer_config(directory: str | Path) -> dict:
    path = Path(directory) / TOKENIZER_CONFIG
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise TokenizerLoadError(f"{path} is not valid JSON: {err}") from err
    return data if isinstance(data, dict) else {}


def strip_added_tokens(tokenizer: PreTrainedTokenizerBase) -> None:
    """Give every added token except BOS/EOS/UNK the slow tokenizer's strip-both-sides spacing."""
    named = {str(t) for t in (tokenizer.bos_token, tokenizer.eos_token, tokenizer.unk_token) if t is not None}
    updated = [
        AddedToken(tok.content, lstrip=True, rstrip=True, normalized=False, special=tok.special)
        for _, tok in sorted(tokenizer.added_tokens_decoder.items())
        if tok.content not in named and not (tok.lstrip and tok.rstrip and not tok.normalized)
    ]
    if updated:
        tokenizer.add_tokens(updated)


def load_tokenizer(directory: str | Path) -> PreTrainedTokenizerBase:
    """
    Return a tokenizer from local files only (never the hub), Llama ones with the authors' behaviour.

    ``legacy`` is read from ``tokenizer_config.json``; absent, it is True, as in
    transformers 4.31 (the authors' version), whose ``LlamaTokenizer`` defaulted to it.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise TokenizerLoadError(f"tokenizer directory not found: {directory}")
    config = read_tokenizer_config(directory)
    kwargs = {}
    if config.get("tokenizer_class") in LLAMA_CLASSES:
        legacy = config.get("legacy")
        kwargs["legacy"] = True if legacy is None else bool(legacy)
    sentencepiece_only = (directory / "tokenizer.model").is_file() and not (directory / "tokenizer.json").is_file()
    if sentencepiece_only and importlib.util.find_spec("sentencepiece") is None:
        raise TokenizerLoadError(
            f"{directory} holds only a sentencepiece tokenizer.model: install the 'sentencepiece' package"
        )
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(directory), local_files_only=True, **kwargs)
    except Exception as err:
        raise TokenizerLoadError(f"cannot load a tokenizer from {directory}: {err}") from err
    if is_llama_tokenizer(tokenizer):
        strip_added_tokens(tokenizer)
    return tokenizer


def save_tokenizer(tokenizer: PreTrainedTokenizerBase, directory: str | Path) -> None:
    """``save_pretrained`` plus the ``legacy`` flag of a Llama tokenizer, so it reloads the same."""
    tokenizer.save_pretrained(str(directory))
    if not is_llama_tokenizer(tokenizer):
        return
    path = Path(directory) / TOKENIZER_CONFIG
    config = read_tokenizer_config(directory)
    config["legacy"] = bool(getattr(tokenizer, "legacy", True))
    config["tokenizer_class"] = type(tokenizer).__name__
    path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
