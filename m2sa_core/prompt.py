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
The prompt vocabulary, the one place prompts are built.

Special tokens and ids, the LLaVA v1 template, the segmentation request, command
sanitising, and conversation building and tokenizing.

A checkpoint of the authors' was trained on exactly this text layout, so training,
evaluation and inference must all build prompts here and nowhere else. It sits beside
:mod:`m2sa_core.types` so that ``model/``, ``data/`` and the node all depend on it and
not on each other (see docs/ARCHITECTURE.md, "From image and command to message").
"""

from __future__ import annotations

import re

SEG_TOKEN = "[SEG]"
IMAGE_TOKEN = "<image>"  # placeholder in the text; replaced by the image patch embeddings
IM_START_TOKEN = "<im_start>"
IM_END_TOKEN = "<im_end>"
IMAGE_PLACEHOLDER_ID = -200  # id used for IMAGE_TOKEN in input_ids (LLaVA's convention)
IGNORE_INDEX = -100

SYSTEM = (
    "A chat between a curious human and an artificial intelligence assistant. "
    "The assistant gives helpful, detailed, and polite answers to the human's questions."
)
ROLES = ("USER", "ASSISTANT")
SEP = " "
SEP2 = "</s>"

# Text that a user's command must not smuggle into the prompt: it would add masks,
# images or end-of-turn markers, or speak for another role. Each is rewritten to a
# harmless look-alike so the text still reads the same and nothing silently vanishes.
RESERVED_REWRITES = {
    SEG_TOKEN: "(SEG)",
    IMAGE_TOKEN: "(image)",
    IM_START_TOKEN: "(im_start)",
    IM_END_TOKEN: "(im_end)",
    SEP2: "(/s)",
    "<s>": "(s)",
    f"{ROLES[0]}:": f"{ROLES[0]} -",
    f"{ROLES[1]}:": f"{ROLES[1]} -",
}


class SanitizedCommand(str):
    """
    A command :func:`sanitize_command` has made safe already, which it passes through as it is.

    A caller that must look at the cleaned text before the model does (the ROS node
    refuses a command of control characters alone at once) cleans it once, with
    :func:`sanitized`, and the prompt builder does not clean it a second time.
    """


def sanitized(command: str) -> SanitizedCommand:
    """``command`` made safe, marked so that sanitising it again is skipped."""
    return SanitizedCommand(sanitize_command(command))


def sanitize_command(command: str) -> str:
    """
    Make user text safe to embed in the prompt.

    Control characters become spaces and reserved markers are rewritten, so a command
    can neither inject [SEG] tokens (extra masks) nor fake a conversation turn.
    """
    if isinstance(command, SanitizedCommand):
        return command
    text = "".join(ch if ch.isprintable() or ch in "\n\t" else " " for ch in command)
    for marker, rewrite in RESERVED_REWRITES.items():
        text = re.sub(re.escape(marker), rewrite, text, flags=re.IGNORECASE)
    return text.strip()


def image_prefix(use_im_start_end: bool) -> str:
    if use_im_start_end:
        return IM_START_TOKEN + IMAGE_TOKEN + IM_END_TOKEN
    return IMAGE_TOKEN


def with_request(command: str, seg_request: str = "") -> str:
    """
    Return the user's text followed by the checkpoint's segmentation request, if it has one.

    The authors trained every segmentation question with a request appended ("... Please
    output segmentation mask."), and their VQA data teaches that a question without it
    gets a text-only answer, so a real checkpoint must be asked the same way.
    """
    request = seg_request.strip()
    return f"{command} {request}" if request else command


def build_prompt(command: str, use_im_start_end: bool = False, seg_request: str = "") -> str:
    """Return the text up to and including "ASSISTANT:", ready for generation."""
    user = image_prefix(use_im_start_end) + "\n" + with_request(command, seg_request)
    return f"{SYSTEM}{SEP}{ROLES[0]}: {user}{SEP}{ROLES[1]}:"


def build_conversation(command: str, answer: str, use_im_start_end: bool = False) -> tuple[str, str]:
    """
    (prompt, answer_with_eos): the prompt is unsupervised, the answer part is supervised.

    The answer carries its [SEG] tokens already (``{seg}`` placeholders replaced). The
    command is used as given (any request already in it).
    """
    return build_prompt(command, use_im_start_end), " " + answer.strip() + SEP2


def build_dialogue(turns: list[tuple[str, str]], use_im_start_end: bool = False) -> tuple[str, list[tuple[int, int]]]:
    """
    Several (question, answer) turns as one LLaVA v1 text; the image comes with the first question.

    Returns the text and, per turn, the character span of its supervised part (the
    answer after "ASSISTANT:" up to and including its ``</s>``).
    """
    if not turns:
        raise ValueError("build_dialogue: no turns")
    text = SYSTEM + SEP
    spans = []
    for i, (question, answer) in enumerate(turns):
        user = (image_prefix(use_im_start_end) + "\n" + question) if i == 0 else question
        text += f"{ROLES[0]}: {user}{SEP}{ROLES[1]}:"
        start = len(text)
        text += " " + answer.strip() + SEP2
        spans.append((start, len(text)))
    return text, spans


def tokenize_prompt(tokenizer, prompt: str) -> list[int]:
    """
    Token ids of a prompt: BOS, the text pieces, IMAGE_PLACEHOLDER_ID where ``<image>`` was.

    The pieces around the image are tokenized separately so the placeholder can never be
    merged with neighbouring text; training and inference both come through here, so the
    ids match exactly.
    """
    ids = [tokenizer.bos_token_id]
    for i, piece in enumerate(prompt.split(IMAGE_TOKEN)):
        if i > 0:
            ids.append(IMAGE_PLACEHOLDER_ID)
        if piece:
            ids.extend(tokenizer(piece, add_special_tokens=False)["input_ids"])
    return ids


def tokenize_conversation(tokenizer, prompt: str, answer: str) -> tuple[list[int], list[int]]:
    """
    (input_ids, labels) for one turn; labels are IGNORE_INDEX except on the answer.

    ``answer`` is the second element of :func:`build_conversation` (leading space,
    [SEG] tokens, trailing ``</s>``), so only the assistant's tokens, [SEG] and EOS
    included, are supervised.
    """
    return tokenize_dialogue_text(tokenizer, prompt + answer, [(len(prompt), len(prompt) + len(answer))])


def tokenize_dialogue(tokenizer, turns: list[tuple[str, str]], use_im_start_end: bool = False
                      ) -> tuple[list[int], list[int]]:
    """(input_ids, labels) of a multi-turn conversation (see :func:`build_dialogue`)."""
    text, spans = build_dialogue(turns, use_im_start_end)
    return tokenize_dialogue_text(tokenizer, text, spans)


def tokenize_dialogue_text(tokenizer, text: str, spans: list[tuple[int, int]]) -> tuple[list[int], list[int]]:
    """
    Token ids of the whole text at once, labels on the tokens of the supervised spans.

    The text is tokenized in one piece, as the authors' training does: a sentencepiece
    tokenizer gives other ids at a cut ("ASSISTANT:" and " It" tokenized apart make
    "▁▁It"). A span's tokens are found by tokenizing the text before its start and
    before its end; both cut at a space or after ``</s>``, where pieces never merge.
    """
    ids = tokenize_prompt(tokenizer, text)
    labels = [IGNORE_INDEX] * len(ids)
    for start, end in spans:
        first = _common_prefix(ids, tokenize_prompt(tokenizer, text[:start]))
        last = _common_prefix(ids, tokenize_prompt(tokenizer, text[:end]))
        labels[first:last] = ids[first:last]
    return ids, labels


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n
