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
Commands about what is not there: how often the model refuses them, and refuses the others.

A command is *absent* when its record says what is missing (``"missing" in record.meta``:
``{"kind", "words"}``, no targets), *present* otherwise. A planner needs two numbers: the
share of absent commands rejected (a mask of something else is what gets grasped) and the
share of present commands wrongly rejected (a robot that refuses real targets is useless).
Neither enters gIoU/cIoU, which stay the masks' scores on present commands.

What "rejected" means under each protocol:

* generative (the model answers freely): a command is rejected when its answer holds no
  ``[SEG]`` (:func:`m2sa_core.inference.absence.absence_of` is not ``None``). Of the absent
  commands rejected, ``absent_named`` is the share whose answer names the record's missing
  words (compared without case and extra spaces): the planner's "there is no microwave".
* teacher-forced (the gold answer is fed in, one position at a time): a present command is
  wrongly rejected when the model's argmax at the position of the first gold ``[SEG]`` is
  not ``[SEG]``, the token where a free answer would have started naming a target; an
  absent command is rejected when the argmax is ``[SEG]`` at no position of its gold absent
  answer (the end token included), so the model would name no target along the refusal
  it is fed. Naming is not measured here (the words are fed): ``absent_named`` is null.
  That rule is lenient where a tokenizer puts a token before every ``[SEG]`` (the tiny
  model's writes " " then ``[SEG]``): the fed refusal replaces that token's successor, so
  a model that never learned to refuse still predicts no ``[SEG]`` along it. Beside it,
  ``absent_first_token`` is the share of absent commands whose argmax at the answer's first
  position is the gold answer's first token: the model would begin the refusal itself
  (teacher-forced only; null generative, where the free answer says it).

Absent rejection is also broken down by the kind of absence (:data:`ABSENT_KINDS`), since
"a part the mug lacks" and "a category the scene lacks" fail for different reasons. A
share whose denominator is 0 is ``None`` (null in JSON): no absent command means "not
applicable", never 0 %.

Sums are float64 tensors, all-reduced across ranks like :class:`metrics.SegmentationEvaluator`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
import re
from typing import Any

from m2sa_core.data.mmr import MISSING_KINDS
from m2sa_core.evaluation.metrics import all_reduce_state, PROTOCOLS
from m2sa_core.prompt import IGNORE_INDEX
import numpy as np

# The kinds of absence a record's meta["missing"]["kind"] may name: the reader's, so they cannot drift.
ABSENT_KINDS: tuple[str, ...] = MISSING_KINDS

# One row per split: present commands, present rejected, absent commands, absent rejected,
# absent rejected naming the missing words, absent whose first answer token is the refusal's,
# then commands and rejected per kind.
_FIXED = 6
_COLUMNS = _FIXED + 2 * len(ABSENT_KINDS)


def is_absent(record) -> bool:
    """Return whether a record asks about something that is not there (its meta says what is missing)."""
    return "missing" in getattr(record, "meta", {})


def missing_of(record) -> Mapping[str, str]:
    """Return an absent record's ``{"kind", "words"}``."""
    return record.meta["missing"]


def same_words(said: str, words: str) -> bool:
    """Return whether an answer's missing words are the record's, up to case and spacing."""
    def norm(text: str) -> str:
        return re.sub(r"\s+", " ", text).strip().lower()

    return bool(said.strip()) and norm(said) == norm(words)


def teacher_forced_rejects(logits, labels, seg_token_id: int, absent: bool) -> bool:
    """
    Return whether the fed gold answer is rejected, by the rule in the module docstring.

    ``logits`` [L', V] of one sample and its ``labels`` [L] (``IGNORE_INDEX`` except the
    answer's tokens). L' may exceed L by the image tokens spliced in before the answer: the
    two align at their tails, since the answer ends both sequences (one sample, no padding).
    Position t's logits predict label t + 1, as in training. A present answer must hold a
    ``[SEG]``.
    """
    logits = logits.detach().float().cpu().numpy() if hasattr(logits, "detach") else np.asarray(logits, float)
    labels = labels.detach().cpu().numpy() if hasattr(labels, "detach") else np.asarray(labels)
    if logits.ndim != 2 or labels.ndim != 1 or logits.shape[0] < labels.shape[0]:
        raise ValueError(f"logits {logits.shape} and labels {labels.shape}: expected [L', V] and [L] with L' >= L")
    offset = logits.shape[0] - labels.shape[0]
    answer = [j for j in range(1, len(labels)) if labels[j] != IGNORE_INDEX]
    if not answer:
        raise ValueError("the labels supervise no answer token")
    predicted = {j: int(logits[offset + j - 1].argmax()) for j in answer}
    if absent:
        return all(predicted[j] != seg_token_id for j in answer)
    seg = [j for j in answer if labels[j] == seg_token_id]
    if not seg:
        raise ValueError("a present command's gold answer holds no [SEG]")
    return predicted[seg[0]] != seg_token_id


def teacher_forced_first_token(logits, labels) -> bool:
    """
    Return whether the argmax at the answer's first position is the gold answer's first token.

    ``logits`` [L', V] and ``labels`` [L] of one sample, aligned as in
    :func:`teacher_forced_rejects`: for an absent command, whether the model would begin
    the refusal rather than an answer naming targets.
    """
    logits = logits.detach().float().cpu().numpy() if hasattr(logits, "detach") else np.asarray(logits, float)
    labels = labels.detach().cpu().numpy() if hasattr(labels, "detach") else np.asarray(labels)
    offset = logits.shape[0] - labels.shape[0]
    first = next((j for j in range(1, len(labels)) if labels[j] != IGNORE_INDEX), None)
    if first is None or offset < 0:
        raise ValueError(f"logits {logits.shape} and labels {labels.shape}: no answer token to compare")
    return int(logits[offset + first - 1].argmax()) == int(labels[first])


def _share(part: float, whole: float) -> float | None:
    return part / whole if whole else None


class RejectionCounter:
    """
    Per split: present commands wrongly rejected, absent commands rejected (and named, by kind).

    ``splits`` fixes the split names in advance, so every process of a sharded evaluation
    has the same state layout for ``all_reduce``; without it splits are made on first use.
    """

    def __init__(self, protocol: str = "generative", splits: Sequence[str] | None = None) -> None:
        if protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
        self.protocol = protocol
        self.fixed = splits is not None
        self.rows: dict[str, np.ndarray] = {s: np.zeros(_COLUMNS) for s in (splits or ())}

    def _row(self, split: str) -> np.ndarray:
        if split not in self.rows:
            if self.fixed:
                raise KeyError(f"split {split!r} is not one of {sorted(self.rows)}")
            self.rows[split] = np.zeros(_COLUMNS)
        return self.rows[split]

    def add_present(self, rejected: bool, split: str = "all") -> None:
        """One present command; ``rejected`` when the model named no target for it."""
        row = self._row(split)
        row[0] += 1
        row[1] += bool(rejected)

    def add_absent(self, kind: str, rejected: bool, named: bool = False, first_token: bool = False,
                   split: str = "all") -> None:
        """
        One absent command of ``kind``.

        ``named`` (generative) when its refusal says the record's missing words;
        ``first_token`` (teacher-forced) when the model would begin the gold refusal.
        """
        if kind not in ABSENT_KINDS:
            raise ValueError(f"absent command of kind {kind!r}: expected one of {ABSENT_KINDS}")
        row = self._row(split)
        k = ABSENT_KINDS.index(kind)
        row[2] += 1
        row[3] += bool(rejected)
        row[4] += bool(rejected and named)
        row[5] += bool(first_token)
        row[_FIXED + 2 * k] += 1
        row[_FIXED + 2 * k + 1] += bool(rejected)

    def _report_row(self, row: np.ndarray) -> dict[str, Any]:
        present, present_rejected, absent, absent_rejected, named, first = (int(v) for v in row[:_FIXED])
        generative = self.protocol == "generative"
        by_kind = {}
        for k, kind in enumerate(ABSENT_KINDS):
            commands, rejected = int(row[_FIXED + 2 * k]), int(row[_FIXED + 2 * k + 1])
            by_kind[kind] = {"commands": commands, "rejected": _share(rejected, commands),
                             "rejected_count": rejected}
        return {
            "present_commands": present,
            "present_rejected": _share(present_rejected, present),
            "present_rejected_count": present_rejected,
            "absent_commands": absent,
            "absent_rejected": _share(absent_rejected, absent),
            "absent_rejected_count": absent_rejected,
            "absent_named": _share(named, absent_rejected) if generative else None,
            "absent_named_count": named if generative else None,
            "absent_first_token": None if generative else _share(first, absent),
            "absent_first_token_count": None if generative else first,
            "absent_by_kind": by_kind,
        }

    def report(self) -> dict[str, dict[str, Any]]:
        """JSON-ready figures per split, plus ``"all"`` summed over splits when there are several."""
        out = {split: self._report_row(row) for split, row in self.rows.items()}
        if len(self.rows) > 1 and "all" not in self.rows:
            out["all"] = self._report_row(sum(self.rows.values()))
        return out

    def state(self, device=None):
        """float64 tensor [n_splits, columns], splits sorted."""
        import torch

        rows = [self.rows[split] for split in sorted(self.rows)]
        return torch.tensor(np.array(rows).reshape(-1, _COLUMNS), dtype=torch.float64, device=device)

    def load_state(self, state) -> None:
        """Replace the sums with ``state`` (e.g. after an all-reduce of :meth:`state`)."""
        values = state.detach().cpu().numpy() if hasattr(state, "detach") else np.asarray(state)
        values = np.asarray(values, np.float64).reshape(-1, _COLUMNS)
        splits = sorted(self.rows)
        if len(values) != len(splits):
            raise ValueError(f"state has {len(values)} rows for {len(splits)} splits")
        for split, row in zip(splits, values):
            self.rows[split] = row.copy()

    def all_reduce(self) -> None:
        """Sum over all ``torch.distributed`` processes (no-op when not initialised); same ``splits`` on each."""
        all_reduce_state(self)


def _percent(share: float | None) -> str:
    return "n/a" if share is None else f"{100 * share:.1f}"


def markdown(report: Mapping[str, Mapping[str, Any]], titles: Mapping[str, str] | None = None) -> str:
    """One row per split: absent rejected, present wrongly rejected, absent named right (or begun), by kind."""
    titles = titles or {}
    head = ("| split | absent rejected % | absent | present wrongly rejected % | present | absent named right % | "
            "refusal begun % | " + " | ".join(f"{kind} rejected %" for kind in ABSENT_KINDS) + " |")
    lines = [head, "|---|" + "---:|" * (6 + len(ABSENT_KINDS))]
    for split, r in report.items():
        kinds = " | ".join(f"{_percent(r['absent_by_kind'][k]['rejected'])} ({r['absent_by_kind'][k]['commands']})"
                           for k in ABSENT_KINDS)
        lines.append(f"| {titles.get(split, split)} | {_percent(r['absent_rejected'])} | {r['absent_commands']} | "
                     f"{_percent(r['present_rejected'])} | {r['present_commands']} | {_percent(r['absent_named'])} | "
                     f"{_percent(r['absent_first_token'])} | {kinds} |")
    return "\n".join(lines)
